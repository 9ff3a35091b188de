package membership

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/hashicorp/memberlist"
)

// Reports are what a member tells the one member that asks for it
// (Collect), by one packet each way, rather than in its gossip metadata:
// gossip metadata reaches every member and rides in every push-pull, so
// a member's value summaries there (280 bytes a node, issue 45) made each
// full-state exchange of a thousand members carry about 450 KB and each
// change to them a broadcast all N must take in. One member (the eviction
// coordinator) needs them; it asks.
//
// An ask and an answer are memberlist user messages (best effort, over
// the gossip transport, encrypted with the gossip keys):
//
//	byte     msgAsk (1) or msgAnswer (2)
//	8 bytes  the ask's id, big-endian (an answer repeats it)
//	uvarint  len, bytes   the sender's NodeID
//	bytes    an answer's report: the rest (at most MaxReportSize)
//
// A member answers only a member it holds Alive, at the gossip address
// it knows for it (never the address a packet claims), so an ask cannot
// aim its answer at a third party. A lost ask or answer is a report
// missing from that Collect; the asker asks again later.

// MaxReportSize is the most bytes of a report (Config.Report) a member
// answers with: one packet's payload on an Ethernet MTU, with room for
// the framing and the gossip encryption. A larger report is not sent: the
// member answers with none.
const MaxReportSize = 1024

// Message kinds of reports.
const (
	msgAsk    = 1
	msgAnswer = 2
)

// answer is one member's answer to an ask.
type answer struct {
	from   string
	report []byte
}

// Collect asks each member of ids for its report (Config.Report) and
// returns the reports that came back before ctx was done or every member
// had answered, by NodeID; a member that answered without a report is
// present with an empty one. This member's own report is read directly
// if ids names it. Members not known Alive are not asked. Collect returns
// ErrClosed after the Membership stopped, and otherwise never fails: a
// report that did not come is missing.
func (m *Membership) Collect(ctx context.Context, ids []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(ids))
	ch := make(chan answer, len(ids))
	id := m.nextAsk.Add(1)
	m.askMu.Lock()
	m.asks[id] = ch
	m.askMu.Unlock()
	defer func() {
		m.askMu.Lock()
		delete(m.asks, id)
		m.askMu.Unlock()
	}()

	ask := appendHeader(nil, msgAsk, id, m.cfg.NodeID)
	targets := make([]memberlist.Address, 0, len(ids))
	asked := make(map[string]bool, len(ids))
	m.mu.Lock()
	for _, to := range ids {
		if to == m.cfg.NodeID {
			continue
		}
		if e := m.members[to]; e != nil && e.State == Alive && e.GossipAddress != "" {
			targets = append(targets, memberlist.Address{Addr: e.GossipAddress, Name: to})
			asked[to] = true
		}
	}
	m.mu.Unlock()
	if slices.Contains(ids, m.cfg.NodeID) {
		out[m.cfg.NodeID] = m.report()
	}

	m.lifeMu.RLock()
	if m.stopped {
		m.lifeMu.RUnlock()
		return nil, fmt.Errorf("collecting reports: %w", ErrClosed)
	}
	for _, a := range targets {
		if err := m.ml.SendToAddress(a, ask); err != nil {
			m.log.Debug("asking for a report", "member", a.Name, "err", err)
		}
	}
	m.lifeMu.RUnlock()

	for pending := len(targets); pending > 0; {
		select {
		case <-ctx.Done():
			return out, nil
		case a := <-ch:
			if _, dup := out[a.from]; dup || !asked[a.from] {
				continue
			}
			out[a.from] = a.report
			pending--
		}
	}
	return out, nil
}

// report returns Config.Report's report, or none if it is too large.
func (m *Membership) report() []byte {
	if m.cfg.Report == nil {
		return nil
	}
	r := m.cfg.Report()
	if len(r) > MaxReportSize {
		m.log.Warn("report too large; answering without one", "bytes", len(r), "max", MaxReportSize)
		return nil
	}
	return slices.Clone(r)
}

// appendHeader appends an ask's or answer's header to b.
func appendHeader(b []byte, kind byte, id uint64, from string) []byte {
	b = append(b, kind)
	b = binary.BigEndian.AppendUint64(b, id)
	return appendString(b, from)
}

// handleReportMsg handles an ask or an answer (memberlist's NotifyMsg, on
// its packet goroutine: it must not block). Malformed messages are
// dropped.
func (m *Membership) handleReportMsg(b []byte) {
	if len(b) < 9 {
		return
	}
	kind, id := b[0], binary.BigEndian.Uint64(b[1:9])
	d := decoder{b: b[9:]}
	from := d.string()
	if d.err != nil || from == "" {
		return
	}
	switch kind {
	case msgAsk:
		m.answer(id, from)
	case msgAnswer:
		m.askMu.Lock()
		ch := m.asks[id]
		m.askMu.Unlock()
		if ch == nil {
			return // a Collect that has returned
		}
		select {
		case ch <- answer{from: from, report: slices.Clone(d.b)}:
		default: // more answers than asked: a duplicate
		}
	}
}

// answer sends this member's report to the member named from, if it is
// held Alive, at the address this member knows for it.
func (m *Membership) answer(id uint64, from string) {
	m.mu.Lock()
	e := m.members[from]
	var to memberlist.Address
	if e != nil && e.State == Alive {
		to = memberlist.Address{Addr: e.GossipAddress, Name: from}
	}
	m.mu.Unlock()
	if to.Addr == "" {
		return
	}
	msg := append(appendHeader(nil, msgAnswer, id, m.cfg.NodeID), m.report()...)
	if err := m.ml.SendToAddress(to, msg); err != nil {
		m.log.Debug("answering a report", "member", from, "err", err)
	}
}
