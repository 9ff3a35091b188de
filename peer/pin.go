package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/stratakv/strata/internal/dial"
	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/transfer"
)

// Pinner pins a transfer room's pages where they live (transfer.Pinner):
// pages this node owns in its own store, each other owner's with one
// Cluster.Pin call for all of its pages. Owners are placed over the alive
// members as clients place pages. Every page pinned or none: when one
// owner fails, the pins already taken are released.
type Pinner struct {
	self    string
	st      *store.Store
	members Members // the alive members, this node included
	log     *slog.Logger

	mu    sync.Mutex // guards peers
	peers peers
}

// NewPinner returns a Pinner for node self's store st, placing pages over
// members and dialing other owners with o (the admin token, TLS).
func NewPinner(self string, st *store.Store, members Members, o dial.Options, log *slog.Logger) *Pinner {
	return &Pinner{self: self, st: st, members: members, log: log.With("component", "transfer-pins"), peers: newPeers(o)}
}

// unpinTimeout bounds one Unpin call; a pin not released expires at its
// TTL anyway.
const unpinTimeout = 5 * time.Second

// held is one owner's pin: local (conn nil) or on the node at addr.
type held struct {
	addr string
	conn pb.ClusterClient
	id   uint64
}

// pins is a publish's pins, released together.
type pins struct {
	p    *Pinner
	ns   namespace.ID
	held []held
}

// Pin pins every page of pg for ttl.
func (p *Pinner) Pin(ctx context.Context, tenant string, pg transfer.Pages, ttl time.Duration) (transfer.Pin, error) {
	id := pg.Namespace.ID()
	groups, addrs, err := p.owners(pg.Keys)
	if err != nil {
		return nil, err
	}
	out := &pins{p: p, ns: id}
	for o, idx := range groups {
		keys := make([]namespace.Key, len(idx))
		for i, k := range idx {
			keys[i] = pg.Keys[k]
		}
		h, err := p.pinAt(ctx, addrs[o], id, tenant, keys, ttl)
		if err != nil {
			out.Release()
			return nil, err
		}
		out.held = append(out.held, h)
	}
	return out, nil
}

// owners groups the indices of keys by owner; owner "" is this node.
func (p *Pinner) owners(keys []namespace.Key) (map[int][]int, map[int]string, error) {
	view, addrs := placementOf(p.members.Alive())
	if view == nil {
		return nil, nil, errors.New("pinning transfer pages: no alive members to place them over")
	}
	groups := map[int][]int{}
	where := map[int]string{}
	for i, k := range keys {
		o := view.Owner(k)
		groups[o] = append(groups[o], i)
		if view.Node(o).ID == p.self {
			where[o] = ""
		} else {
			where[o] = addrs[o]
		}
	}
	return groups, where, nil
}

// pinAt pins keys on the node at addr ("" for this one).
func (p *Pinner) pinAt(ctx context.Context, addr string, id namespace.ID, tenant string, keys []namespace.Key, ttl time.Duration) (held, error) {
	if addr == "" {
		l, err := p.st.Reader().Pin(id, keys, ttl)
		if err != nil {
			return held{}, fmt.Errorf("pinning %d pages here: %w", len(keys), err)
		}
		return held{id: l.ID}, nil
	}
	p.mu.Lock()
	conn, err := p.peers.conn(addr)
	p.mu.Unlock()
	if err != nil {
		return held{}, fmt.Errorf("pinning %d pages on %s: %w", len(keys), addr, err)
	}
	c := pb.NewClusterClient(conn)
	raw := make([][]byte, len(keys))
	for i := range keys {
		raw[i] = keys[i][:]
	}
	resp, err := c.Pin(ctx, &pb.PinRequest{NamespaceId: id[:], Keys: raw, TtlMs: uint32(ttl.Milliseconds()), Tenant: tenant})
	if err != nil {
		return held{}, fmt.Errorf("pinning %d pages on %s: %w", len(keys), addr, err)
	}
	return held{addr: addr, conn: c, id: resp.GetPinId()}, nil
}

// Release releases every pin; a failure is logged, the pin then expiring
// at its TTL.
func (ps *pins) Release() {
	for _, h := range ps.held {
		if h.conn == nil {
			if err := ps.p.st.Reader().ReleaseLease(ps.ns, h.id); err != nil && !errors.Is(err, store.ErrLeaseExpired) {
				ps.p.log.Warn("releasing a transfer pin", "pin", h.id, "err", err)
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), unpinTimeout)
		_, err := h.conn.Unpin(ctx, &pb.UnpinRequest{NamespaceId: ps.ns[:], PinId: h.id})
		cancel()
		if err != nil {
			ps.p.log.Warn("releasing a transfer pin; it expires at its TTL", "node", h.addr, "pin", h.id, "err", err)
		}
	}
	ps.held = nil
}

// Close closes the connections to other owners.
func (p *Pinner) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.peers.close()
}
