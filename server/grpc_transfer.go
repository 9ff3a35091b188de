package server

import (
	"context"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/pbconv"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/transfer"
)

// The Transfer service and the Cluster service's pins: decode, call the
// request layer (requests_transfer.go), encode.

// withCaller authenticates a call and runs fn as its caller.
func withCaller[T any](s *Server, ctx context.Context, fn func(caller) (T, error)) (T, error) {
	c, err := s.callerOf(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	return fn(c)
}

// OpenRoom opens an attempt at a room for a producer.
func (s *Server) OpenRoom(ctx context.Context, req *pb.OpenRoomRequest) (*pb.OpenRoomResponse, error) {
	return withCaller(s, ctx, func(c caller) (*pb.OpenRoomResponse, error) {
		a, err := s.openRoom(c, req.GetRoom())
		if err != nil {
			return nil, err
		}
		return &pb.OpenRoomResponse{Attempt: uint64(a), NodeId: s.cfg.NodeID}, nil
	})
}

// Publish pins an attempt's committed pages for its consumer.
func (s *Server) Publish(ctx context.Context, req *pb.PublishRequest) (*pb.PublishResponse, error) {
	return withCaller(s, ctx, func(c caller) (*pb.PublishResponse, error) {
		id, err := namespace.IDFromBytes(req.GetNamespaceId())
		if err != nil {
			return nil, err
		}
		if req.GetDescriptor_() == nil {
			return nil, badRequest("publish: no descriptor")
		}
		keys, err := s.keysOf(req.GetKeys())
		if err != nil {
			return nil, err
		}
		exp, err := s.publishRoom(ctx, c, req.GetRoom(), transfer.Attempt(req.GetAttempt()), id,
			pbconv.Descriptor(req.GetDescriptor_()), keys, int(req.GetTokens()))
		if err != nil {
			return nil, err
		}
		return &pb.PublishResponse{PinExpiresUnixMs: exp.UnixMilli()}, nil
	})
}

// Await hands a room's published attempt to its consumer.
func (s *Server) Await(ctx context.Context, req *pb.AwaitRequest) (*pb.AwaitResponse, error) {
	return withCaller(s, ctx, func(c caller) (*pb.AwaitResponse, error) {
		if req.GetDescriptor_() == nil {
			return nil, badRequest("await: no descriptor")
		}
		g, err := s.awaitRoom(ctx, c, req.GetRoom(), transfer.Attempt(req.GetAttempt()), pbconv.Descriptor(req.GetDescriptor_()),
			time.Duration(req.GetTimeoutMs())*time.Millisecond, req.GetTaker())
		if err != nil {
			return nil, err
		}
		id := g.Pages.Namespace.ID()
		resp := &pb.AwaitResponse{Attempt: uint64(g.Attempt), NamespaceId: id[:], Keys: make([][]byte, len(g.Pages.Keys)),
			Tokens: uint32(g.Pages.Tokens), Bytes: g.Pages.Bytes, PinExpiresUnixMs: g.PinExpires.UnixMilli()}
		for i, k := range g.Pages.Keys {
			resp.Keys[i] = k[:]
		}
		return resp, nil
	})
}

// Ack is the consumer's word that it loaded (or, after an abort, stopped
// reading) the pages.
func (s *Server) Ack(ctx context.Context, req *pb.AckRequest) (*pb.AckResponse, error) {
	return withCaller(s, ctx, func(c caller) (*pb.AckResponse, error) {
		return &pb.AckResponse{}, s.ackRoom(c, req.GetRoom(), transfer.Attempt(req.GetAttempt()))
	})
}

// AbortRoom ends an attempt for a reason.
func (s *Server) AbortRoom(ctx context.Context, req *pb.AbortRoomRequest) (*pb.AbortRoomResponse, error) {
	return withCaller(s, ctx, func(c caller) (*pb.AbortRoomResponse, error) {
		st, err := s.abortRoom(c, req.GetRoom(), transfer.Attempt(req.GetAttempt()), transfer.Reason(req.GetReason()), req.GetDetail())
		if err != nil {
			return nil, err
		}
		return &pb.AbortRoomResponse{State: pb.RoomState(st)}, nil
	})
}

// RoomStatus answers a room's current record.
func (s *Server) RoomStatus(ctx context.Context, req *pb.RoomStatusRequest) (*pb.RoomStatusResponse, error) {
	return withCaller(s, ctx, func(c caller) (*pb.RoomStatusResponse, error) {
		st, err := s.roomStatus(c, req.GetRoom())
		if err != nil {
			return nil, err
		}
		return &pb.RoomStatusResponse{Room: roomInfo(st), NodeId: s.cfg.NodeID}, nil
	})
}

// ListRooms answers the rooms of a tenant, live and ended.
func (s *Server) ListRooms(ctx context.Context, req *pb.ListRoomsRequest) (*pb.ListRoomsResponse, error) {
	return withCaller(s, ctx, func(c caller) (*pb.ListRoomsResponse, error) {
		rooms, err := s.listRooms(c, req.GetTenant())
		if err != nil {
			return nil, err
		}
		resp := &pb.ListRoomsResponse{NodeId: s.cfg.NodeID, Rooms: make([]*pb.RoomInfo, len(rooms))}
		for i, st := range rooms {
			resp.Rooms[i] = roomInfo(st)
		}
		return resp, nil
	})
}

// roomInfo is a room's record on the wire. transfer.State and Reason
// number their values as RoomState and AbortReason do (a test pins it).
func roomInfo(st transfer.Status) *pb.RoomInfo {
	ms := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixMilli()
	}
	return &pb.RoomInfo{Tenant: st.Tenant, Room: st.Room, Attempt: uint64(st.Attempt), State: pb.RoomState(st.State),
		Reason: pb.AbortReason(st.Reason), Detail: st.Detail, Pages: uint32(st.Pages), Tokens: uint32(st.Tokens),
		Bytes: st.Bytes, OpenedUnixMs: ms(st.Opened), PublishedUnixMs: ms(st.Published), DoneUnixMs: ms(st.Done),
		PinExpiresUnixMs: ms(st.PinExpires), Mismatches: uint32(st.Mismatches)}
}

// Pin pins pages of this node's store for a transfer room on another node.
func (s *Server) Pin(ctx context.Context, req *pb.PinRequest) (*pb.PinResponse, error) {
	return withCaller(s, ctx, func(c caller) (*pb.PinResponse, error) {
		id, err := namespace.IDFromBytes(req.GetNamespaceId())
		if err != nil {
			return nil, err
		}
		keys, err := s.keysOf(req.GetKeys())
		if err != nil {
			return nil, err
		}
		pin, err := s.pinPages(ctx, c, id, keys, time.Duration(req.GetTtlMs())*time.Millisecond)
		if err != nil {
			return nil, err
		}
		return &pb.PinResponse{PinId: pin}, nil
	})
}

// Unpin releases a pin.
func (s *Server) Unpin(ctx context.Context, req *pb.UnpinRequest) (*pb.UnpinResponse, error) {
	return withCaller(s, ctx, func(c caller) (*pb.UnpinResponse, error) {
		id, err := namespace.IDFromBytes(req.GetNamespaceId())
		if err != nil {
			return nil, err
		}
		return &pb.UnpinResponse{}, s.unpinPages(c, id, req.GetPinId())
	})
}
