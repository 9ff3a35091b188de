package server

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/stratakv/strata/internal/testing/splitbuf"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

func TestDataInMatchesProtobuf(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	for i := range 200 {
		data := make([]byte, r.IntN(70000))
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		want := &pb.PutRequest{NamespaceId: []byte("0123456789abcdef"), Data: data}
		if r.IntN(2) == 0 {
			want.Header = &pb.PutHeader{Page: &pb.PageSpec{Key: bytes.Repeat([]byte{byte(i)}, 32), Depth: uint32(i),
				Size: uint64(len(data)), CostHint: 1.5}, Checksum: []byte{1, 2, 3, 4}}
		}
		raw, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		in := &dataIn{msg: &pb.PutRequest{}, dataField: 3}
		if err := in.UnmarshalBuffers(splitbuf.Split(r, raw)); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		var got []byte
		for _, p := range in.data {
			got = append(got, p...)
		}
		if !bytes.Equal(got, data) || in.size != len(data) {
			t.Fatalf("case %d: data differs (%d bytes, want %d)", i, in.size, len(data))
		}
		msg := in.msg.(*pb.PutRequest)
		want.Data = nil
		if !proto.Equal(msg, want) {
			t.Fatalf("case %d: fields %v, want %v", i, msg, want)
		}
		in.free()
	}
}

func TestPageOutMarshalsGetResponse(t *testing.T) {
	for _, n := range []int{0, 1, 1024, 1025, 256 << 10} {
		data := bytes.Repeat([]byte{0xA5}, n)
		out := &pageOut{header: &pb.PageHeader{Index: 3, Found: true, Size: uint64(n), Checksum: []byte{9}},
			data: data, released: make(chan struct{}, 1)}
		b, err := pb.Codec{}.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		var got pb.GetResponse
		if err := proto.Unmarshal(b.Materialize(), &got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.GetData(), data) || got.GetHeader().GetIndex() != 3 || got.GetHeader().GetSize() != uint64(n) {
			t.Fatalf("%d bytes: decoded %d bytes, header %v", n, len(got.GetData()), got.GetHeader())
		}
		if out.referenced != (n > 1024) {
			t.Fatalf("%d bytes: referenced %t", n, out.referenced)
		}
		b.Free()
		if out.referenced {
			select {
			case <-out.released:
			default:
				t.Fatalf("%d bytes: freeing the message did not release the page", n)
			}
		}
	}
}

// FuzzSplitField: whatever the bytes, pb.SplitField (through dataIn) either fails or agrees
// with protobuf on a WriteRequest.
func FuzzSplitField(f *testing.F) {
	seed, _ := proto.Marshal(&pb.WriteRequest{NamespaceId: []byte("ns"), WriteId: 7, Offset: 4096, Data: []byte("page bytes")})
	f.Add(seed, uint8(3))
	f.Add([]byte{0x22, 0x80}, uint8(1))
	f.Fuzz(func(t *testing.T, raw []byte, cut uint8) {
		r := rand.New(rand.NewPCG(uint64(cut), 1))
		in := &dataIn{msg: &pb.WriteRequest{}, dataField: 4}
		err := in.UnmarshalBuffers(splitbuf.Split(r, raw))
		var want pb.WriteRequest
		werr := proto.Unmarshal(raw, &want)
		if err != nil {
			return // stricter than protobuf is allowed (groups, say)
		}
		if werr != nil {
			t.Fatalf("split accepted what protobuf rejects: %v", werr)
		}
		var got []byte
		for _, p := range in.data {
			got = append(got, p...)
		}
		if !bytes.Equal(got, want.GetData()) {
			t.Fatalf("data %q, protobuf %q", got, want.GetData())
		}
		msg := in.msg.(*pb.WriteRequest)
		if msg.GetWriteId() != want.GetWriteId() || msg.GetOffset() != want.GetOffset() ||
			!bytes.Equal(msg.GetNamespaceId(), want.GetNamespaceId()) {
			t.Fatalf("fields %v, protobuf %v", msg, &want)
		}
		in.free()
	})
}
