package client

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/stratakv/strata/internal/testing/splitbuf"
	"github.com/stratakv/strata/internal/testing/testseed"
	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

var getInSeed = flag.Uint64("getin.seed", 0, "seed of TestGetInReassemblesPages (0: from the clock)")

// TestGetInReassemblesPages decodes a Get stream's messages, cut at random
// places, straight into page buffers, and checks the pages and their
// checksums.
func TestGetInReassemblesPages(t *testing.T) {
	r := testseed.Rand(t, *getInSeed, "getin.seed")
	for round := range 50 {
		size, chunk := 1+r.IntN(100000), 1+r.IntN(30000)
		pages := make([][]byte, 1+r.IntN(4))
		bufs := make([][]byte, len(pages))
		for i := range pages {
			pages[i] = make([]byte, size)
			for j := range pages[i] {
				pages[i][j] = byte(r.Uint32())
			}
			bufs[i] = make([]byte, size)
		}
		found := make([]bool, len(pages))
		pr := &pageReader{bufs: bufs, found: found}
		in := &getIn{r: pr}
		for i, p := range pages {
			msg := &pb.GetResponse{Header: &pb.PageHeader{Index: uint32(i), Found: true, Size: uint64(size),
				Checksum: namespace.CRC32C.Sum(p), ChecksumAlgorithm: pb.ChecksumAlgorithm(namespace.CRC32C)}}
			for data := p; msg.Header != nil || len(data) > 0; {
				msg.Data = data[:min(chunk, len(data))]
				data = data[len(msg.Data):]
				raw, err := proto.Marshal(msg)
				if err != nil {
					t.Fatal(err)
				}
				if err := (pb.Codec{}).Unmarshal(splitbuf.Split(r, raw), in); err != nil || in.err != nil {
					t.Fatalf("round %d page %d: %v / %v", round, i, err, in.err)
				}
				msg.Header = nil
			}
		}
		for i := range pages {
			if !found[i] || !bytes.Equal(bufs[i], pages[i]) {
				t.Fatalf("round %d page %d: found %t, bytes equal %t (errors %v)", round, i, found[i], bytes.Equal(bufs[i], pages[i]), pr.bad)
			}
		}
	}
}

// FuzzGetIn: whatever arrives, decoding neither panics nor writes past a
// page buffer, and a data field protobuf agrees on lands in the buffer.
func FuzzGetIn(f *testing.F) {
	seed, _ := proto.Marshal(&pb.GetResponse{Header: &pb.PageHeader{Index: 0, Found: true, Size: 4}, Data: []byte("abcd")})
	f.Add(seed, uint8(1))
	f.Add([]byte{0x12, 0x85}, uint8(2))
	f.Fuzz(func(t *testing.T, raw []byte, cut uint8) {
		buf := make([]byte, 8)
		pr := &pageReader{bufs: [][]byte{buf}, found: make([]bool, 1)}
		in := &getIn{r: pr}
		err := (pb.Codec{}).Unmarshal(splitbuf.Split(rand.New(rand.NewPCG(uint64(cut), 1)), raw), in)
		var want pb.GetResponse
		if err != nil || in.err != nil || proto.Unmarshal(raw, &want) != nil {
			return
		}
		h := want.GetHeader()
		if h != nil && h.GetFound() && int(h.GetSize()) == len(want.GetData()) && !bytes.Equal(buf[:h.GetSize()], want.GetData()) {
			t.Fatalf("buffer %q, protobuf data %q", buf[:h.GetSize()], want.GetData())
		}
	})
}
