package stratav1

import (
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Codec is gRPC's protobuf codec with a fast path for the data messages
// of the client and the server: a value that is a BufferMarshaler
// encodes itself (page bytes sent by reference, AppendData), one that is a
// BufferUnmarshaler decodes itself (page bytes left in gRPC's receive
// buffers, SplitField); every other message goes through protobuf. It
// speaks standard protobuf, so either side may use it alone.
type Codec struct{}

// BufferMarshaler is a message that encodes itself into the buffers gRPC
// sends.
type BufferMarshaler interface {
	MarshalBuffers() (mem.BufferSlice, error)
}

// BufferUnmarshaler is a message that decodes itself from the buffers gRPC
// received, which it may keep (with Ref) past the call.
type BufferUnmarshaler interface {
	UnmarshalBuffers(b mem.BufferSlice) error
}

func protoCodec() encoding.CodecV2 { return encoding.GetCodecV2(grpcproto.Name) }

// Name is protobuf's: the codec replaces gRPC's for the messages it knows.
func (Codec) Name() string { return grpcproto.Name }

// Marshal encodes v.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(BufferMarshaler); ok {
		return m.MarshalBuffers()
	}
	return protoCodec().Marshal(v)
}

// Unmarshal decodes b into v.
func (Codec) Unmarshal(b mem.BufferSlice, v any) error {
	if m, ok := v.(BufferUnmarshaler); ok {
		return m.UnmarshalBuffers(b)
	}
	return protoCodec().Unmarshal(b, v)
}

// AppendMessage appends m, encoded, as the length-delimited field num.
func AppendMessage(b []byte, num protowire.Number, m proto.Message) ([]byte, error) {
	enc, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), enc), nil
}

// SplitField walks a protobuf message held in pieces: the bytes of field
// num (a bytes field) go to piece in order, as views of b, first set on the
// first piece of each occurrence (protobuf keeps the last); every other
// field is copied into rest, a message of its own.
func SplitField(b mem.BufferSlice, num protowire.Number, piece func(p []byte, first bool)) (rest []byte, err error) {
	r := NewPieceReader(b)
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
