// Package pagecodec is the gRPC codec of strata's data calls, for the
// client and the server alike: protobuf, except that a message that
// encodes itself into buffers (Marshaler: page bytes referenced, not
// copied) or decodes itself from gRPC's receive buffers (Unmarshaler: page
// bytes left where they arrived) does so. The wire format is protobuf's,
// so a peer using the plain protobuf codec interoperates. Split is the
// decoding half such an Unmarshaler needs: it separates one bytes field,
// piece by piece, from the rest of the message.
package pagecodec

import (
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

// Marshaler is a message that encodes itself (pb.AppendData builds the
// referenced data field).
type Marshaler interface {
	MarshalBuffers() (mem.BufferSlice, error)
}

// Unmarshaler is a message that decodes itself from the receive buffers,
// which stay valid until the call's next receive.
type Unmarshaler interface {
	UnmarshalBuffers(mem.BufferSlice) error
}

// Codec is protobuf with the Marshaler and Unmarshaler fast paths. Pass it
// to a call with grpc.ForceCodecV2, or to a server with
// grpc.ForceServerCodecV2.
type Codec struct{}

func protoCodec() encoding.CodecV2 { return encoding.GetCodecV2(grpcproto.Name) }

// Name is protobuf's: the content type on the wire is unchanged.
func (Codec) Name() string { return grpcproto.Name }

// Marshal encodes v, by itself when it is a Marshaler.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(Marshaler); ok {
		return m.MarshalBuffers()
	}
	return protoCodec().Marshal(v)
}

// Unmarshal decodes b into v, by itself when it is an Unmarshaler.
func (Codec) Unmarshal(b mem.BufferSlice, v any) error {
	if u, ok := v.(Unmarshaler); ok {
		return u.UnmarshalBuffers(b)
	}
	return protoCodec().Unmarshal(b, v)
}

// Split reads the protobuf message in b without joining its buffers. The
// bytes field num goes to piece: piece(nil, true) where an occurrence
// starts (a field named twice: the last one wins), then piece(p, false)
// for each view of its bytes, in order. Every other field is appended to
// dst, re-encoded as it came, and returned as rest, for proto.Unmarshal.
func Split(dst []byte, b mem.BufferSlice, num protowire.Number, piece func(p []byte, first bool)) (rest []byte, err error) {
	rest = dst
	r := pb.NewPieceReader(b)
	for !r.Done() {
		tag, err := r.Varint()
		if err != nil {
			return nil, err
		}
		n, typ := protowire.DecodeTag(tag)
		if n <= 0 {
			return nil, errors.New("bad field number")
		}
		switch typ {
		case protowire.VarintType:
			v, err := r.Varint()
			if err != nil {
				return nil, err
			}
			rest = protowire.AppendVarint(protowire.AppendTag(rest, n, typ), v)
		case protowire.Fixed32Type, protowire.Fixed64Type:
			size := 4
			if typ == protowire.Fixed64Type {
				size = 8
			}
			rest = protowire.AppendTag(rest, n, typ)
			if err := r.Take(size, func(p []byte) { rest = append(rest, p...) }); err != nil {
				return nil, err
			}
		case protowire.BytesType:
			size, err := r.Varint()
			if err != nil {
				return nil, err
			}
			if size > uint64(r.Left()) {
				return nil, io.ErrUnexpectedEOF
			}
			if n == num {
				piece(nil, true)
				if err := r.Take(int(size), func(p []byte) { piece(p, false) }); err != nil {
					return nil, err
				}
				continue
			}
			rest = protowire.AppendVarint(protowire.AppendTag(rest, n, typ), size)
			if err := r.Take(int(size), func(p []byte) { rest = append(rest, p...) }); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("field %d: unsupported wire type %d", n, typ)
		}
	}
	return rest, nil
}
