package client

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/transport"
)

// Puts into granted slots (proto/frame SPEC.md §5b, protocol 4). The node
// grants each shm connection arena slots ahead of its puts, so a put is
// one pass over the page (the copy into a slot, checksummed as it is
// copied) and one SlotPut naming the slot, whose answer grants the slots
// that replace those used: one round trip. A put of several groups of
// pages (shmCommitGroup bytes) pipelines their SlotPuts as the Commits of
// a reserved put do (shm_put.go).
//
// The slots belong to the connection the node granted them on: they are
// kept per connection and namespace (shmSession.slots) and forgotten when
// the pool closes the connection (the node takes them back then). A put
// uses a connection's slots only when it holds one for each page (asking
// for the missing ones first, one round trip) and every page fills its
// slot; otherwise, or when the node grants too few (its arena full, the
// tenant at its quota), the put reserves its pages (§5a), which makes room
// by eviction and judges each page's admission.

const (
	// shmSlotBytes bounds the slots a connection keeps for a namespace
	// (at least one): a larger put reserves its pages.
	shmSlotBytes = 16 << 20
	// slotRetry is how long a session puts by reservation after the node
	// granted fewer slots than it asked for.
	slotRetry = time.Second
)

// takeSlots removes and returns the slots c holds for namespace id that
// are far enough from their deadline to be written; those past it are
// dropped (the node takes them back).
func (s *shmSession) takeSlots(c *transport.Conn, id namespace.ID) []frame.Grant {
	s.slotsMu.Lock()
	held := s.slots[c][id]
	delete(s.slots[c], id)
	s.slotsMu.Unlock()
	live := held[:0]
	for _, g := range held {
		if time.Until(time.UnixMilli(g.DeadlineMs)) > shmMinDeadline {
			live = append(live, g)
		}
	}
	return live
}

// keepSlots records slots as c's for namespace id.
func (s *shmSession) keepSlots(c *transport.Conn, id namespace.ID, slots []frame.Grant) {
	if len(slots) == 0 {
		return
	}
	s.slotsMu.Lock()
	defer s.slotsMu.Unlock()
	if s.slots == nil {
		s.slots = make(map[*transport.Conn]map[namespace.ID][]frame.Grant)
	}
	if s.slots[c] == nil {
		s.slots[c] = make(map[namespace.ID][]frame.Grant)
	}
	s.slots[c][id] = append(s.slots[c][id], slots...)
}

// forgetSlots drops what c held: the pool closed it.
func (s *shmSession) forgetSlots(c *transport.Conn) {
	s.slotsMu.Lock()
	delete(s.slots, c)
	s.slotsMu.Unlock()
}

// putSlots puts pages into slots granted to c. done false: nothing was
// published and c is in step (too few slots, a page that does not fill
// one): the caller reserves the pages instead. broke: c failed or is out
// of step; the node takes back its slots when it closes.
func (s *shmSession) putSlots(ctx context.Context, c *transport.Conn, n *nodeNS, pages []Page) (results []PutResult, done, broke bool, err error) {
	size := len(pages[0].Data)
	if size == 0 || len(pages) > max(1, shmSlotBytes/size) {
		return nil, false, false, nil
	}
	held := s.takeSlots(c, n.id)
	if short := len(pages) - len(held); short > 0 {
		if time.Now().UnixNano() < s.slotsShort.Load() {
			s.keepSlots(c, n.id, held)
			return nil, false, false, nil
		}
		m, err := s.call(ctx, c, &frame.SlotPut{NS: n.id, Want: uint32(short)})
		if err != nil {
			return nil, false, true, err
		}
		granted, broke, err := slotAnswer(m, 0)
		if err != nil {
			s.keepSlots(c, n.id, held)
			return nil, true, broke, err
		}
		if held = append(held, granted.Slots...); len(held) < len(pages) {
			s.slotsShort.Store(time.Now().Add(slotRetry).UnixNano())
			s.keepSlots(c, n.id, held)
			return nil, false, false, nil
		}
	}
	for i, p := range pages {
		if int64(len(p.Data)) != held[i].Ext.Len {
			s.keepSlots(c, n.id, held)
			return nil, false, false, nil
		}
	}
	p := &shmPut{s: s, n: n, c: c, pages: pages, results: make([]PutResult, len(pages))}
	sp := &slotPut{p: p, slots: held[:len(pages)], kept: held[len(pages):]}
	sp.surplus = len(sp.kept)
	p.ext = func(i int) frame.Extent { return sp.slots[i].Ext }
	p.request, p.answered = sp.request, sp.answered
	dl, _ := ctx.Deadline() // zero: none
	if err := c.SetDeadline(dl); err != nil {
		return nil, true, true, err
	}
	direct := make([]int, len(pages))
	for i := range direct {
		direct[i] = i
	}
	if broke, err := p.pipeline(ctx, direct); broke {
		return nil, true, true, err
	} else if err != nil { // refused (a bad page spec, say): c is in step and keeps its slots
		s.keepSlots(c, n.id, sp.kept)
		return nil, true, false, err
	}
	s.keepSlots(c, n.id, sp.kept)
	s.slotPuts.Add(1)
	return p.results, true, false, nil
}

// slotPut is the slot half of a put into granted slots: page i goes into
// slots[i]; kept collects the slots c holds after the put.
type slotPut struct {
	p     *shmPut
	slots []frame.Grant
	kept  []frame.Grant
	// surplus is how many slots c held beyond those the put uses and has
	// not yet declined to replace: a SlotPut asks for the slots it uses
	// less those, so c holds no more slots after a put than its largest
	// put needs.
	surplus int
}

// request is the SlotPut of the pages at group.
func (sp *slotPut) request(group []int, sums [][]byte) frame.Message {
	pages := make([]frame.SlotPage, len(group))
	for j, i := range group {
		pg := sp.p.pages[i]
		spec := framePageSpec(pg)
		spec.Size = int64(len(pg.Data))
		pages[j] = frame.SlotPage{WriteID: sp.slots[i].WriteID, Page: spec, Checksum: sums[j]}
	}
	want := len(group) - min(sp.surplus, len(group))
	sp.surplus -= len(group) - want
	return &frame.SlotPut{NS: sp.p.n.id, Want: uint32(want), Pages: pages}
}

// answered records the outcomes of a SlotPut, the locations of the pages
// published and the slots c holds after it: those granted, and those of
// pages that were already published (EXISTS: unused). A SlotPut the node
// refused as a whole changed nothing (SPEC.md §5b): its slots stay c's,
// and the put fails with the refusal once its other answers are read.
func (sp *slotPut) answered(sc shmCommit, m frame.Message) error {
	p := sp.p
	if _, isErr := m.(*frame.Error); isErr {
		for _, i := range sc.pages {
			sp.kept = append(sp.kept, sp.slots[i])
		}
		p.refused = cmp.Or(p.refused, fromFrame("slot put", m))
		return nil
	}
	ok, _, err := slotAnswer(m, len(sc.pages))
	if err != nil {
		return err
	}
	for j, i := range sc.pages {
		r := ok.Results[j]
		switch {
		case r.Reserve == frame.SlotExists:
			p.results[i] = PutResult{Status: Exists}
			sp.kept = append(sp.kept, sp.slots[i])
		case r.Reserve == frame.SlotReserved:
			p.results[i] = PutResult{Status: PutStatus(r.Commit)}
			if p.results[i].Status != Committed {
				p.results[i].Reason = r.Reason
				break
			}
			p.s.locs.put(p.n.id, p.pages[i].Key, shmLoc{ext: sp.slots[i].Ext, sum: sc.sums[j]})
		default:
			p.results[i] = PutResult{Status: Rejected, Reason: r.Reason}
		}
	}
	sp.kept = append(sp.kept, ok.Slots...)
	return nil
}

// slotAnswer reads the answer to a SlotPut of pages pages. broke: the
// connection is out of step.
func slotAnswer(m frame.Message, pages int) (ok *frame.SlotPutOK, broke bool, err error) {
	ok, isOK := m.(*frame.SlotPutOK)
	switch {
	case !isOK:
		return nil, false, fromFrame("slot put", m)
	case len(ok.Results) != pages:
		return nil, true, fmt.Errorf("slot put: %d results for %d pages: %w", len(ok.Results), pages, ErrProtocol)
	}
	return ok, false, nil
}
