package server

import (
	"context"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/transfer"
)

// The request layer's transfer calls (docs/design.md §14): rooms are the
// caller's tenant's (open mode and the admin: tenant ""), and the pages a
// publish names must be in a namespace the caller may use. The cluster's
// Pin and Unpin come from the room's node (admin callers only) and pin
// pages in this node's store.

// rooms is the node's transfer rooms, or an error when it serves none.
func (s *Server) rooms() (*transfer.Rooms, error) {
	if s.cfg.Rooms == nil {
		return nil, badRequest("this node serves no transfer rooms")
	}
	return s.cfg.Rooms, nil
}

func (s *Server) openRoom(c caller, room string) (transfer.Attempt, error) {
	r, err := s.rooms()
	if err != nil {
		return 0, err
	}
	return r.Open(c.tenant, room)
}

// publishRoom pins the producer's committed pages for the consumer.
func (s *Server) publishRoom(ctx context.Context, c caller, room string, a transfer.Attempt, id namespace.ID,
	d namespace.Descriptor, keys []namespace.Key, tokens int) (time.Time, error) {
	r, err := s.rooms()
	if err != nil {
		return time.Time{}, err
	}
	d, err = s.transferNamespace(c, d)
	if err != nil {
		return time.Time{}, err
	}
	if d.ID() != id {
		return time.Time{}, errorf(errVersion, "publish names namespace %s, its descriptor is %s", id.Short(), d.ID().Short())
	}
	if err := s.checkLimit(len(keys), "keys"); err != nil {
		return time.Time{}, err
	}
	return r.Publish(ctx, c.tenant, room, a, transfer.Pages{Namespace: d, Keys: keys, Tokens: tokens,
		Bytes: uint64(len(keys)) * d.PageSize()})
}

// transferNamespace validates a namespace named by a publish or an await:
// a valid descriptor of a tenant the caller may use.
func (s *Server) transferNamespace(c caller, d namespace.Descriptor) (namespace.Descriptor, error) {
	d = d.Normalize()
	if err := d.Validate(); err != nil {
		return d, err
	}
	return d, c.mayUse(d.Tenant)
}

// awaitRoom waits, at most timeout (0: the caller's deadline alone), for
// the room's published attempt, for the consumer named taker.
func (s *Server) awaitRoom(ctx context.Context, c caller, room string, a transfer.Attempt, d namespace.Descriptor,
	timeout time.Duration, taker string) (transfer.Grant, error) {
	r, err := s.rooms()
	if err != nil {
		return transfer.Grant{}, err
	}
	if d, err = s.transferNamespace(c, d); err != nil {
		return transfer.Grant{}, err
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return r.AwaitAs(ctx, c.tenant, room, a, d, taker)
}

func (s *Server) ackRoom(c caller, room string, a transfer.Attempt) error {
	r, err := s.rooms()
	if err != nil {
		return err
	}
	return r.Ack(c.tenant, room, a)
}

func (s *Server) abortRoom(c caller, room string, a transfer.Attempt, reason transfer.Reason, detail string) (transfer.State, error) {
	r, err := s.rooms()
	if err != nil {
		return 0, err
	}
	return r.Abort(c.tenant, room, a, reason, detail)
}

func (s *Server) roomStatus(c caller, room string) (transfer.Status, error) {
	r, err := s.rooms()
	if err != nil {
		return transfer.Status{}, err
	}
	return r.Status(c.tenant, room)
}

// listRooms lists the rooms of tenant: the caller's own, or any for the
// admin ("" for every tenant).
func (s *Server) listRooms(c caller, tenant string) ([]transfer.Status, error) {
	r, err := s.rooms()
	if err != nil {
		return nil, err
	}
	if !c.admin {
		if tenant != "" && tenant != c.tenant {
			return nil, errorf(errDenied, "tenant %q may not list the rooms of tenant %q", c.tenant, tenant)
		}
		tenant = c.tenant
		if tenant == "" {
			return nil, errorf(errDenied, "listing rooms needs a tenant")
		}
	}
	return r.List(tenant), nil
}

// pinPages pins pages of this node's store for a transfer room on another
// node; only nodes (admin callers) may.
func (s *Server) pinPages(ctx context.Context, c caller, id namespace.ID, keys []namespace.Key, ttl time.Duration) (uint64, error) {
	if !c.admin {
		return 0, errorf(errDenied, "transfer pins are for nodes")
	}
	if err := s.checkLimit(len(keys), "keys"); err != nil {
		return 0, err
	}
	if _, err := s.resolve(ctx, c, id); err != nil {
		return 0, err
	}
	l, err := s.cfg.Store.Reader().Pin(id, keys, ttl)
	return l.ID, err
}

// unpinPages releases a pin pinPages made.
func (s *Server) unpinPages(c caller, id namespace.ID, pin uint64) error {
	if !c.admin {
		return errorf(errDenied, "transfer pins are for nodes")
	}
	return s.cfg.Store.Reader().ReleaseLease(id, pin)
}
