package peer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratakv/strata/internal/dial"
	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
)

// Hinted handoff. A client puts a page on its owner (the first placement
// candidate over the alive members) and, when the owner is down or
// unreachable, on the next candidate. Once the owner is back, clients
// look the page up on the owner again and miss it: the copy on the
// candidate is unreachable, though acknowledged, until it is evicted. A
// Handoff gives such pages back: each round it walks a slice of its
// store's pages (every namespace, in key order, a cursor carried between
// rounds), and for every page whose owner in the current view is another
// member, alive for at least Settle, that holds no lease here, it puts
// the page on the owner (the one-call Put, checksummed as stored) and, once
// the owner answers committed or exists, deletes its own copy. A page the
// owner refuses (full, or worth less than it holds) stays, and is not
// offered again for RetryRefused. The walk starts over when the view
// changes, so pages go back within a few rounds of the owner's return.
//
// A handoff never lowers a page's durability. A page this node holds on a
// durable tier (SSD: it survives kill -9) is deleted here only once the
// owner holds it on a durable tier too, as its StatKeys reports; while the
// owner holds it in a volatile tier (a put lands in its top tier, host
// memory, until demoted) the copy here stays, remembered as pending, and
// each later pass of the walk asks the owner again (StatKeys, no data)
// instead of sending the page anew. A page the owner no longer holds is
// sent again. Keeping the giver's copy, rather than asking the owner to
// write the page to a durable tier, needs nothing new of the wire and
// costs only the duplicate's room until the owner demotes its copy (or
// this node evicts its own by value, as any page). A page held here in a
// volatile tier goes as before: the owner's copy is at least as durable.

// HandoffConfig tunes a Handoff; zero fields take the defaults.
type HandoffConfig struct {
	Every        time.Duration // between rounds; default 1s
	Keys         int           // pages examined per round; default 4096
	Pages        int           // pages moved per round at most; default 256
	Settle       time.Duration // an owner alive this long gets its pages; default 5s
	RetryRefused time.Duration // a page its owner refused is not offered again before; default 5m
}

func (c *HandoffConfig) defaults() {
	if c.Every <= 0 {
		c.Every = time.Second
	}
	if c.Keys <= 0 {
		c.Keys = 4096
	}
	if c.Pages <= 0 {
		c.Pages = 256
	}
	if c.Settle <= 0 {
		c.Settle = 5 * time.Second
	}
	if c.RetryRefused <= 0 {
		c.RetryRefused = 5 * time.Minute
	}
}

// HandoffStats counts what a Handoff did.
type HandoffStats struct {
	Moved   int64 // pages the owner took (committed or exists), deleted here
	Refused int64 // pages the owner refused, kept here
	Failed  int64 // pages whose handoff failed (owner unreachable, errors), kept here
	// Kept counts the times a page held here durably was taken by its
	// owner into a volatile tier only: the copy here stays until the owner
	// holds the page durably (Pending, now).
	Kept    int64
	Pending int64 // pages held here durably whose owner holds them volatile only
}

// refusedMax bounds the pages remembered as refused.
const refusedMax = 64 << 10

// Handoff gives pages back to their owners. Start runs it; Close stops it.
type Handoff struct {
	self string
	st   *store.Store
	log  *slog.Logger
	cfg  HandoffConfig

	moved, refusedN, failed, kept atomic.Int64
	pendingN                      atomic.Int64

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once

	// The loop's own state.
	members Members
	peers   peers
	since   map[string]time.Time // when each member was first seen alive (since it last was not)
	viewKey string               // the members of the view the cursor walks
	nsAt    int                  // the cursor: namespace index in the namespaces' order
	shardAt int                  // and the index shard of it to read next (store.ShardKeys)
	queue   []namespace.Key      // keys of the last shard read not yet examined
	queueNS namespace.ID         // their namespace
	refused map[handoffKey]time.Time
	pending map[handoffKey]struct{} // held here durably, on the owner volatile only (bounded by refusedMax)
}

type handoffKey struct {
	ns  namespace.ID
	key namespace.Key
}

// NewHandoff returns a Handoff for node self's store st, dialing owners
// with o (the admin token, TLS).
func NewHandoff(self string, st *store.Store, o dial.Options, cfg HandoffConfig, log *slog.Logger) *Handoff {
	cfg.defaults()
	h := &Handoff{self: self, st: st, log: log.With("component", "handoff"), cfg: cfg,
		peers: newPeers(o), since: map[string]time.Time{}, refused: map[handoffKey]time.Time{},
		pending: map[handoffKey]struct{}{}}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

// Start begins handing pages off through m's view.
func (h *Handoff) Start(m Members) {
	h.members = m
	h.wg.Go(func() { every(h.ctx, h.cfg.Every, nil, func() { h.round(time.Now()) }) })
}

// Close stops the handoff and waits for it; it is idempotent.
func (h *Handoff) Close() {
	h.closeOnce.Do(func() {
		h.cancel()
		h.wg.Wait()
		h.peers.close()
	})
}

// Stats is what the handoff did so far.
func (h *Handoff) Stats() HandoffStats {
	return HandoffStats{Moved: h.moved.Load(), Refused: h.refusedN.Load(), Failed: h.failed.Load(),
		Kept: h.kept.Load(), Pending: h.pendingN.Load()}
}

// round examines the next cfg.Keys pages and gives back those whose owner
// is another settled member.
func (h *Handoff) round(now time.Time) {
	alive := h.members.Alive()
	view, addrs := placementOf(alive)
	if view == nil {
		return
	}
	key := ""
	seen := make(map[string]bool, len(alive))
	self := -1
	for i := range view.Len() {
		id := view.Node(i).ID
		key += id + "\x00"
		seen[id] = true
		if id == h.self {
			self = i
		}
		if _, ok := h.since[id]; !ok {
			h.since[id] = now
		}
	}
	for id := range h.since {
		if !seen[id] {
			delete(h.since, id)
		}
	}
	if self < 0 {
		return // not in the view (yet): every page's owner is another node
	}
	if key != h.viewKey { // owners changed: walk everything again
		h.viewKey, h.nsAt, h.shardAt, h.queue = key, 0, 0, nil
		clear(h.pending) // owners may be others now; a page still pending is sent again and found there
	}
	if view.Len() == 1 {
		h.pendingN.Store(int64(len(h.pending)))
		return // alone in the view: every page is this node's own
	}
	nss := h.st.Admin().Namespaces()
	todo := map[int]map[namespace.ID][]store.KeyInfo{}  // by owner index, then namespace: pages to send
	check := map[int]map[namespace.ID][]store.KeyInfo{} // pending pages: ask the owner, send nothing
	budget, moving := h.cfg.Keys, 0
	for budget > 0 && moving < h.cfg.Pages {
		if len(h.queue) == 0 {
			if h.nsAt >= len(nss) {
				h.nsAt, h.shardAt = 0, 0
				break // the walk is done; the next round starts it again
			}
			// The walk reads a namespace an index shard at a time: O(pages)
			// a walk, where sorted pages (ListKeys) cost O(pages) each.
			id := nss[h.nsAt].ID
			keys, err := h.st.Admin().ShardKeys(id, h.shardAt)
			if h.shardAt++; h.shardAt >= store.IndexShards {
				h.nsAt, h.shardAt = h.nsAt+1, 0
			}
			if err == nil {
				h.queue, h.queueNS = keys, id
			}
			continue
		}
		id, take := h.queueNS, h.queue[:min(len(h.queue), budget, 1024)]
		infos, ok, err := h.st.Admin().Stat(id, take)
		if err != nil {
			h.queue = nil
			continue
		}
		budget -= len(take)
		examined := len(take)
		for j, ki := range infos {
			if !ok[j] {
				continue // gone since its shard was read
			}
			o := view.Owner(ki.Key)
			if o == self || ki.Leases > 0 || now.Sub(h.since[view.Node(o).ID]) < h.cfg.Settle {
				continue
			}
			hk := handoffKey{id, ki.Key}
			if until, ok := h.refused[hk]; ok {
				if now.Before(until) {
					continue
				}
				delete(h.refused, hk)
			}
			_, pending := h.pending[hk]
			into := todo
			if pending {
				into = check // a StatKeys, no data: bounded by the keys examined, not by Pages
			}
			if into[o] == nil {
				into[o] = map[namespace.ID][]store.KeyInfo{}
			}
			into[o][id] = append(into[o][id], ki)
			if pending {
				continue
			}
			if moving++; moving >= h.cfg.Pages {
				examined = j + 1
				break
			}
		}
		h.queue = h.queue[examined:]
	}
	for o, byNS := range todo {
		for id, infos := range byNS {
			h.give(addrs[o], view.Node(o).ID, id, infos, now)
		}
	}
	for o, byNS := range check {
		for id, infos := range byNS {
			h.settle(addrs[o], view.Node(o).ID, id, infos)
		}
	}
	h.pendingN.Store(int64(len(h.pending)))
	h.peers.forget(addrs)
}

// give puts infos' pages of namespace id on the owner at addr and deletes
// those it took.
func (h *Handoff) give(addr, owner string, id namespace.ID, infos []store.KeyInfo, now time.Time) {
	conn, err := h.peers.conn(addr)
	if err != nil {
		h.failed.Add(int64(len(infos)))
		return
	}
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	stream, err := pb.NewStrataClient(conn).Put(ctx)
	if err != nil {
		h.failed.Add(int64(len(infos)))
		return
	}
	keys := make([]namespace.Key, len(infos))
	for i, ki := range infos {
		keys[i] = ki.Key
	}
	var sent []int // positions of infos sent, in order
	first := true
	err = h.st.Reader().Read(id, 0, keys, func(i int, p store.PageView) error {
		if !p.Found {
			return nil // gone meanwhile
		}
		ki := infos[i]
		spec := &pb.PageSpec{Key: ki.Key[:], Depth: ki.Depth, Size: uint64(p.Size)}
		if ki.HasParent {
			spec.ParentKey = ki.Parent[:]
		}
		for off := 0; off < len(p.Data) || off == 0; off += handoffChunk {
			msg := &pb.PutRequest{Data: p.Data[off:min(off+handoffChunk, len(p.Data))]}
			if off == 0 {
				msg.Header = &pb.PutHeader{Page: spec, Checksum: p.Checksum}
			}
			if first {
				msg.NamespaceId = id[:]
				first = false
			}
			if err := stream.Send(msg); err != nil {
				return err
			}
		}
		sent = append(sent, i)
		return nil
	})
	if err != nil {
		h.failed.Add(int64(len(infos)))
		return
	}
	if len(sent) == 0 {
		return
	}
	resp, err := stream.CloseAndRecv()
	if err == nil && len(resp.GetResults()) != len(sent) {
		err = errors.New("put answered a different number of pages")
	}
	if err != nil && !errors.Is(err, io.EOF) {
		h.failed.Add(int64(len(sent)))
		h.log.Debug("handing pages back", "to", owner, "pages", len(sent), "err", err)
		return
	}
	var done []namespace.Key
	var durable []store.KeyInfo // taken, and held durably here: deleted once durable there
	for j, r := range resp.GetResults() {
		switch r.GetStatus() {
		case pb.CommitStatus_COMMIT_STATUS_COMMITTED, pb.CommitStatus_COMMIT_STATUS_EXISTS:
			if h.st.Handoff().Durable(infos[sent[j]].Tier) {
				durable = append(durable, infos[sent[j]])
			} else {
				done = append(done, keys[sent[j]])
			}
		default:
			h.refusedN.Add(1)
			h.refuse(handoffKey{id, keys[sent[j]]}, now)
		}
	}
	h.delete(owner, id, done)
	if len(durable) > 0 {
		h.settle(addr, owner, id, durable)
	}
}

// settle asks the owner at addr how it holds infos' pages (all held here
// on a durable tier) and deletes here those it holds durably. The others
// stay: pending while the owner holds them volatile only, offered again
// (sent anew) when it does not hold them at all.
func (h *Handoff) settle(addr, owner string, id namespace.ID, infos []store.KeyInfo) {
	conn, err := h.peers.conn(addr)
	if err != nil {
		return // still pending; asked again in the next pass
	}
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	req := &pb.StatKeysRequest{NamespaceId: id[:], Keys: make([][]byte, len(infos))}
	for i, ki := range infos {
		req.Keys[i] = ki.Key[:]
	}
	resp, err := pb.NewAdminClient(conn).StatKeys(ctx, req)
	if err == nil && len(resp.GetKeys()) != len(infos) {
		err = errors.New("stat keys answered a different number of keys")
	}
	if err != nil {
		h.log.Debug("asking the owner how it holds pages handed back", "to", owner, "pages", len(infos), "err", err)
		return
	}
	var done []namespace.Key
	for i, ki := range resp.GetKeys() {
		hk := handoffKey{id, infos[i].Key}
		_, was := h.pending[hk]
		switch {
		case len(ki.GetKey()) == 0: // gone there (evicted, or the owner restarted): send it again
			delete(h.pending, hk)
		case ki.GetTier() == pb.Tier_TIER_SSD:
			delete(h.pending, hk)
			done = append(done, infos[i].Key)
		case !was:
			h.kept.Add(1)
			if len(h.pending) < refusedMax { // past it, the page is sent again next pass (exists there)
				h.pending[hk] = struct{}{}
			}
		}
	}
	h.delete(owner, id, done)
}

// delete drops here the pages of namespace id the owner took.
func (h *Handoff) delete(owner string, id namespace.ID, done []namespace.Key) {
	if len(done) == 0 {
		return
	}
	n, err := h.st.Handoff().Handed(id, done)
	if err != nil {
		h.log.Warn("deleting pages handed back", "to", owner, "pages", len(done), "err", err)
		return
	}
	h.moved.Add(int64(n))
	h.log.Info("handed pages back to their owner", "to", owner, "pages", n)
}

// refuse remembers that k's owner refused it until now+RetryRefused; a
// full memory first drops the refusals that ran out, and past refusedMax
// live ones a refusal is not remembered (the page is offered again).
func (h *Handoff) refuse(k handoffKey, now time.Time) {
	if len(h.refused) >= refusedMax {
		for k, until := range h.refused {
			if !now.Before(until) {
				delete(h.refused, k)
			}
		}
	}
	if len(h.refused) < refusedMax {
		h.refused[k] = now.Add(h.cfg.RetryRefused)
	}
}

// handoffChunk is the data of one Put message (under any node's chunk
// limit).
const handoffChunk = 1 << 20
