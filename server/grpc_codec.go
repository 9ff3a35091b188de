package server

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

// GRPCOptions are the options of the gRPC server s is registered on: the
// data codec (pb.Codec), through which Get sends pages straight from the
// store's memory (pageOut: no protobuf copy, no pooled message buffer) and
// Put and Write hand data to the store from gRPC's receive buffers (dataIn:
// no protobuf copy). The codec speaks standard protobuf, so any client
// works. Calling GRPCOptions turns the zero-copy data path on: pass the
// options to the grpc.NewServer that s registers on, or do not call it.
func (s *Server) GRPCOptions() []grpc.ServerOption {
	s.rawData.Store(true)
	return []grpc.ServerOption{grpc.ForceServerCodecV2(pb.Codec{})}
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

// MarshalBuffers encodes the GetResponse for pb.Codec.
func (p *pageOut) MarshalBuffers() (mem.BufferSlice, error) {
	var prefix []byte
	if p.header != nil {
		var err error
		if prefix, err = pb.AppendMessage(prefix, 1, p.header); err != nil {
			return nil, err
		}
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

// UnmarshalBuffers decodes the message for pb.Codec.
func (d *dataIn) UnmarshalBuffers(b mem.BufferSlice) error {
	d.data, d.size = d.data[:0], 0
	rest, err := pb.SplitField(b, d.dataField, func(piece []byte, first bool) {
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
