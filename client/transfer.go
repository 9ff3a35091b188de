package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/pbconv"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/transfer"
)

// Prefill–decode transfer through the store (docs/design.md §14). A
// producer (the prefill) puts its pages as usual, then:
//
//	room, _ := c.OpenRoom(ctx, requestID)
//	ns.Put(ctx, pages)
//	c.PublishRoom(ctx, room, ns, keys, tokens) // its GPU blocks may go now
//
// and the consumer (the decode), which never connects to the producer:
//
//	g, err := c.AwaitRoom(ctx, requestID, 0, ns) // the attempt, its keys
//	ns.Get(ctx, g.Keys, bufs, nil)              // into memory it owns
//	c.AckRoom(ctx, g.Room)                      // the pin goes
//
// Room calls go to the node that owns the room's key, which holds its
// record; when that node is down they fail at once (ErrUnavailable) and
// the consumer recomputes.

// Room names one attempt at a room.
type Room struct {
	Name    string
	Attempt uint64
}

// AbortReason says why an attempt is aborted.
type AbortReason = pb.AbortReason

// The abort reasons.
const (
	UserCancel      = pb.AbortReason_ABORT_REASON_USER_CANCEL
	Timeout         = pb.AbortReason_ABORT_REASON_TIMEOUT
	ProducerFailure = pb.AbortReason_ABORT_REASON_PRODUCER_FAILURE
	ConsumerFailure = pb.AbortReason_ABORT_REASON_CONSUMER_FAILURE
)

// RoomInfo is a room's record as its node reports it.
type RoomInfo = pb.RoomInfo

// Grant is what a consumer is handed: the attempt, the producer's keys in
// order (read them with the consumer's namespace, which is the
// producer's), and when their pin expires.
type Grant struct {
	Room       Room
	Keys       []namespace.Key
	Tokens     int
	Bytes      uint64
	PinExpires time.Time
}

// roomCall runs fn against the Transfer service of the node that owns
// room's key.
func (c *Client) roomCall(ctx context.Context, room, op string, fn func(context.Context, pb.TransferClient) error) error {
	if err := c.begin(); err != nil {
		return err
	}
	defer c.end()
	r := c.routing()
	i := r.view.place.Owner(transfer.RoomKey(room))
	nc, err := c.client(r.view, i)
	if err != nil {
		return fmt.Errorf("%s %q: %w", op, room, err)
	}
	if err := fn(ctx, pb.NewTransferClient(nc.conn)); err != nil {
		if roomNodeFailed(err) {
			c.suspect(r.view.ids[i], err)
			return fmt.Errorf("%s %q on node %s: %w: %w", op, room, r.view.ids[i], ErrUnavailable, err)
		}
		return fromRPC(fmt.Sprintf("%s %q", op, room), err)
	}
	return nil
}

// roomNodeFailed reports whether a room call failed for its node (down,
// unreachable, draining), not for the room: a deadline is the caller's own
// (an await that waited it out), not the node's failure.
func roomNodeFailed(err error) bool {
	if errors.Is(err, ErrProtocol) || pb.ReasonOf(err) == pb.ReasonShuttingDown {
		return true
	}
	st, ok := status.FromError(err)
	return ok && pb.ReasonOf(err) == "" && (st.Code() == codes.Unavailable || st.Code() == codes.Unknown)
}

// OpenRoom opens a new attempt at room for the producer.
func (c *Client) OpenRoom(ctx context.Context, room string) (Room, error) {
	var a uint64
	err := c.roomCall(ctx, room, "open room", func(ctx context.Context, t pb.TransferClient) error {
		resp, err := t.OpenRoom(ctx, &pb.OpenRoomRequest{Room: room})
		a = resp.GetAttempt()
		return err
	})
	return Room{Name: room, Attempt: a}, err
}

// PublishRoom pins the producer's committed pages (keys in order, holding
// tokens tokens, of namespace ns) for the consumer and makes the attempt
// visible to it. It returns when the pin expires. Every page must be
// published (ErrPageNotPresent otherwise, nothing pinned); an attempt
// aborted first publishes nothing (ErrTransferAborted).
func (c *Client) PublishRoom(ctx context.Context, room Room, ns *Namespace, keys []namespace.Key, tokens int) (time.Time, error) {
	var exp time.Time
	id := ns.ID()
	err := c.roomCall(ctx, room.Name, "publish room", func(ctx context.Context, t pb.TransferClient) error {
		resp, err := t.Publish(ctx, &pb.PublishRequest{Room: room.Name, Attempt: room.Attempt, NamespaceId: id[:],
			Descriptor_: pbconv.DescriptorProto(ns.Descriptor()), Keys: wireKeys(keys), Tokens: uint32(tokens)})
		exp = time.UnixMilli(resp.GetPinExpiresUnixMs())
		return err
	})
	return exp, err
}

// AwaitRoom waits until room has a published attempt (attempt, or
// whichever comes when 0) and takes it for the consumer, whose namespace
// ns must be the producer's: ErrNamespaceMismatch, naming the differing
// fields, otherwise (the attempt is then aborted and the producer told).
// ctx bounds the wait. The client names itself as the taker, so that its
// next AwaitRoom of a room whose grant it took but never received (a
// partition, an answer lost) is handed that grant again.
func (c *Client) AwaitRoom(ctx context.Context, room string, attempt uint64, ns *Namespace) (Grant, error) {
	var g Grant
	err := c.roomCall(ctx, room, "await room", func(ctx context.Context, t pb.TransferClient) error {
		req := &pb.AwaitRequest{Room: room, Attempt: attempt, Descriptor_: pbconv.DescriptorProto(ns.Descriptor()), Taker: c.taker}
		if d, ok := ctx.Deadline(); ok {
			req.TimeoutMs = uint32(max(time.Until(d).Milliseconds(), 1))
		}
		resp, err := t.Await(ctx, req)
		if err != nil {
			return err
		}
		if id := ns.ID(); string(resp.GetNamespaceId()) != string(id[:]) {
			return fmt.Errorf("the node handed pages of namespace %x, not %s: %w", resp.GetNamespaceId(), id.Short(), ErrProtocol)
		}
		g = Grant{Room: Room{Name: room, Attempt: resp.GetAttempt()}, Tokens: int(resp.GetTokens()), Bytes: resp.GetBytes(),
			PinExpires: time.UnixMilli(resp.GetPinExpiresUnixMs()), Keys: make([]namespace.Key, len(resp.GetKeys()))}
		for i, raw := range resp.GetKeys() {
			k, err := namespace.KeyFromBytes(raw)
			if err != nil {
				return fmt.Errorf("key %d: %w: %w", i, ErrProtocol, err)
			}
			g.Keys[i] = k
		}
		return nil
	})
	return g, err
}

// AckRoom is the consumer's word that it loaded the pages, or, after an
// abort, that it stopped reading them: the pin is released.
func (c *Client) AckRoom(ctx context.Context, room Room) error {
	return c.roomCall(ctx, room.Name, "ack room", func(ctx context.Context, t pb.TransferClient) error {
		_, err := t.Ack(ctx, &pb.AckRequest{Room: room.Name, Attempt: room.Attempt})
		return err
	})
}

// AbortRoom ends an attempt for reason, from either side. It returns the
// attempt's state after: ABORTED, or DRAINING when a consumer took the
// pages and may be reading them (its AckRoom ends it).
func (c *Client) AbortRoom(ctx context.Context, room Room, reason AbortReason, detail string) (pb.RoomState, error) {
	var st pb.RoomState
	err := c.roomCall(ctx, room.Name, "abort room", func(ctx context.Context, t pb.TransferClient) error {
		resp, err := t.AbortRoom(ctx, &pb.AbortRoomRequest{Room: room.Name, Attempt: room.Attempt, Reason: reason, Detail: detail})
		st = resp.GetState()
		return err
	})
	return st, err
}

// RoomStatus returns a room's current record: the producer learns here
// how its attempt ended, a consumer's namespace mismatch among it.
func (c *Client) RoomStatus(ctx context.Context, room string) (*RoomInfo, error) {
	var info *RoomInfo
	err := c.roomCall(ctx, room, "room status", func(ctx context.Context, t pb.TransferClient) error {
		resp, err := t.RoomStatus(ctx, &pb.RoomStatusRequest{Room: room})
		info = resp.GetRoom()
		return err
	})
	return info, err
}

// ListRooms returns the rooms of tenant ("": the caller's, or every
// tenant's for the admin) on every alive node, with the node holding each.
func (c *Client) ListRooms(ctx context.Context, tenant string) (map[string][]*RoomInfo, error) {
	if err := c.begin(); err != nil {
		return nil, err
	}
	defer c.end()
	r := c.routing()
	out := map[string][]*RoomInfo{}
	var errs []error
	for i, id := range r.view.ids {
		if r.down[i] {
			continue
		}
		nc, err := c.client(r.view, i)
		if err == nil {
			var resp *pb.ListRoomsResponse
			if resp, err = pb.NewTransferClient(nc.conn).ListRooms(ctx, &pb.ListRoomsRequest{Tenant: tenant}); err == nil {
				out[id] = resp.GetRooms()
				continue
			}
		}
		errs = append(errs, fmt.Errorf("node %s: %w", id, fromRPC("list rooms", err)))
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}
