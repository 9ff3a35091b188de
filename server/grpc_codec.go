package server

import (
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

// GRPCOptions are the options of the gRPC server s is registered on: a
// codec that sends Get pages straight from the store's memory (no protobuf
// copy, no pooled message buffer) and hands Put and Write data to the store
// from gRPC's receive buffers (no protobuf copy). The codec speaks standard
// protobuf, so any client works; every other message goes through the
// protobuf codec. Calling GRPCOptions turns the zero-copy data path on: pass
// the options to the grpc.NewServer that s registers on, or do not call it.
func (s *Server) GRPCOptions() []grpc.ServerOption {
	s.rawData.Store(true)
	return []grpc.ServerOption{grpc.ForceServerCodecV2(dataCodec{})}
}

// dataCodec is protobuf, with fast paths for the data messages: it
// marshals *pageOut (a GetResponse whose data is sent by reference) and
// unmarshals into *dataIn (a PutRequest or WriteRequest whose data stays in
// the receive buffers).
type dataCodec struct{}

func protoCodec() encoding.CodecV2 { return encoding.GetCodecV2(grpcproto.Name) }

func (dataCodec) Name() string { return grpcproto.Name }

func (dataCodec) Marshal(v any) (mem.BufferSlice, error) {
	if p, ok := v.(*pageOut); ok {
		return p.marshal()
	}
	return protoCodec().Marshal(v)
}

func (dataCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if d, ok := v.(*dataIn); ok {
		return d.unmarshal(data)
	}
	return protoCodec().Unmarshal(data, v)
}

// pageOut is one GetResponse: an optional header and a chunk of page bytes
// that the transport reads in place. A chunk of more than a kilobyte is
// referenced, not copied: released receives once the transport is done
// with it, and the sender must keep the bytes unchanged (the page pinned)
// until then.
type pageOut struct {
	header   *pb.PageHeader
	data     []byte
	released chan struct{}
	// referenced is set by marshal when data is referenced: one value will
	// arrive on released.
	referenced bool
}

func (p *pageOut) marshal() (mem.BufferSlice, error) {
	var prefix []byte
	if p.header != nil {
		h, err := proto.Marshal(p.header)
		if err != nil {
			return nil, err
		}
		prefix = protowire.AppendTag(prefix, 1, protowire.BytesType)
		prefix = protowire.AppendBytes(prefix, h)
	}
	b, referenced := pb.AppendData(prefix, 2, p.data, p.released)
	p.referenced = p.referenced || referenced
	return b, nil
}

// dataIn is a PutRequest or WriteRequest whose data field is left in gRPC's
// receive buffers: msg receives every other field, data the pieces of the
// data field (views into bufs, which holds a reference until free).
type dataIn struct {
	msg       proto.Message
	dataField protowire.Number
	bufs      mem.BufferSlice
	data      [][]byte
	size      int
}

func (d *dataIn) unmarshal(b mem.BufferSlice) error {
	d.data, d.size = d.data[:0], 0
	rest, err := splitField(b, d.dataField, func(piece []byte, first bool) {
		if first { // a bytes field named twice: the last one wins
			d.data, d.size = d.data[:0], 0
			return
		}
		d.data = append(d.data, piece)
		d.size += len(piece)
	})
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(rest, d.msg); err != nil {
		return err
	}
	if d.size > 0 {
		b.Ref()
		d.bufs = b
	}
	return nil
}

// free drops the reference to the receive buffers.
func (d *dataIn) free() {
	if d.bufs != nil {
		d.bufs.Free()
		d.bufs = nil
	}
	d.data, d.size = d.data[:0], 0
}

// splitField walks a protobuf message held in pieces: the bytes of field
// num (a bytes field) go to piece in order, as views of b, first set on the
// first piece of each occurrence (protobuf keeps the last); every other
// field is copied into rest, a message of its own.
func splitField(b mem.BufferSlice, num protowire.Number, piece func(p []byte, first bool)) (rest []byte, err error) {
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

// recvData receives the next message of a Put or Write stream into in:
// with the data codec (GRPCOptions) its data stays in gRPC's receive
// buffers until the next recvData or in.free; without it protobuf decodes
// a copy.
func (s *Server) recvData(stream grpc.ServerStream, in *dataIn) error {
	in.free()
	if s.rawData.Load() {
		return stream.RecvMsg(in)
	}
	if err := stream.RecvMsg(in.msg); err != nil {
		return err
	}
	if data := in.msg.(interface{ GetData() []byte }).GetData(); len(data) > 0 {
		in.data, in.size = append(in.data, data), len(data)
	}
	return nil
}
