package client

import (
	"context"
	"fmt"
	"time"

	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/transport"
)

// A put through shared memory (SPEC.md §2, Reserve and Commit; §4, the
// pipelined commits). One Reserve frame sets space aside for the batch and
// answers, per page, its extent in the node's arena. The client then
// copies the pages into their extents group by group (shmCommitGroup
// bytes), checksumming each chunk it copied while it is still in cache
// (transport.Shm.WriteEach: one pass over the page, not a copy then a
// checksum), and sends each group's Commit as soon as the group is
// copied, without waiting for the answer: the node verifies one group's
// checksums while the client copies the next, and answers the commits in
// order. At most shmCommitsInFlight commits are unanswered at a time, so
// neither side's socket buffer fills while the other is not reading.
//
// Invariants kept: the node publishes nothing before it has verified the
// page's checksum against the bytes in its arena (store.Commit); a commit
// names only reservations of the connection that made them (the node
// answers any other write id UNKNOWN_WRITE); closing the connection aborts
// what it holds, so a put that breaks half way leaves no reservation
// behind, and the next plane redoes the batch (the pages already
// published answer Exists).

const (
	// shmCommitGroup is how many bytes of pages one Commit of a put
	// through shared memory covers (at least one page).
	shmCommitGroup = 1 << 20
	// shmCommitsInFlight is how many Commits of one put may be unanswered.
	shmCommitsInFlight = 4
)

// put is a put batch through shared memory. Reservations outside the arena,
// or too close to their deadline, get their bytes over gRPC and are
// committed first. ok false: the session is unusable or broke, or its
// node's version does not carry what a page has (frameVersion); the next plane
// redoes the batch (published pages answer Exists).
func (s *shmSession) put(ctx context.Context, n *nodeNS, pages []Page) (results []PutResult, ok bool, err error) {
	if s.version.Load() < frameVersion(pages) {
		return nil, false, nil
	}
	ok, err = s.with(func(c *transport.Conn) (bool, error) {
		if s.version.Load() >= 4 {
			res, done, broke, err := s.putSlots(ctx, c, n, pages)
			if done || broke {
				results = res
				return broke, err
			}
		}
		m, err := s.call(ctx, c, n.reserveFrame(pages))
		if err != nil {
			return true, err
		}
		r, res, open, broke, err := reserved(m, pages)
		if len(open) == 0 || err != nil {
			results = res
			return broke, err
		}
		p := &shmPut{s: s, n: n, c: c, pages: pages, results: res}
		p.reserved(r)
		if broke, err := p.run(ctx, open); broke || err != nil {
			return true, err // closing the connection aborts its reservations
		}
		results = res
		return false, nil
	})
	return results, ok, err
}

// shmPut is one put's copying and publishing requests on connection c:
// Commits of the reservations of a Reserve (reserved), or SlotPuts of
// granted slots (shm_slots.go).
type shmPut struct {
	s       *shmSession
	n       *nodeNS
	c       *transport.Conn
	pages   []Page
	r       *frame.ReserveOK // the Reserve's answer, for Commits
	results []PutResult
	// ext is the extent page i is copied into.
	ext func(i int) frame.Extent
	// request is the frame that publishes the pages at group, whose
	// checksums are sums.
	request func(group []int, sums [][]byte) frame.Message
	// answered records m, the answer to sc, in results.
	answered func(sc shmCommit, m frame.Message) error
	// sent are the requests sent and not yet answered, oldest first.
	sent []shmCommit
	// refused is the first refusal answered that left the connection in
	// step (a SlotPut the node refused as a whole): the put fails with it
	// once every answer is read, and the connection is kept.
	refused error
}

// shmCommit is a publishing request sent: its id, the pages it covers
// (indexes into pages), their checksums and the frame.
type shmCommit struct {
	id    uint64
	pages []int
	sums  [][]byte
	req   frame.Message
}

// reserved makes p commit the reservations of r.
func (p *shmPut) reserved(r *frame.ReserveOK) {
	p.r = r
	p.ext = func(i int) frame.Extent { return r.Slots[i].Ext }
	p.request = func(group []int, sums [][]byte) frame.Message {
		items := make([]frame.CommitItem, len(group))
		for j, i := range group {
			items[j] = frame.CommitItem{WriteID: r.Slots[i].WriteID, Size: int64(len(p.pages[i].Data)), Checksum: sums[j]}
		}
		return &frame.Commit{NS: p.n.id, Items: items}
	}
	p.answered = p.commitAnswered
}

// run copies and commits the reserved pages at open, then reads every
// answer. broke: the connection is out of step or failed.
func (p *shmPut) run(ctx context.Context, open []int) (broke bool, err error) {
	dl, _ := ctx.Deadline() // zero: none
	if err := p.c.SetDeadline(dl); err != nil {
		return true, err
	}
	var viaTCP, direct []int
	for _, i := range open {
		if sl := p.r.Slots[i]; sl.Mapped && time.Until(time.UnixMilli(sl.DeadlineMs)) > shmMinDeadline {
			direct = append(direct, i)
		} else {
			viaTCP = append(viaTCP, i)
		}
	}
	if len(viaTCP) > 0 {
		piecesOf(ctx).gather(p.pages, viaTCP)
		wid := func(i int) uint64 { return p.r.Slots[i].WriteID }
		if err := p.n.write(ctx, p.pages, viaTCP, wid); err != nil {
			return true, err
		}
		sums := make([][]byte, len(viaTCP))
		for j, i := range viaTCP {
			sums[j] = p.n.desc.Checksum.Sum(p.pages[i].Data)
		}
		if err := p.commit(viaTCP, sums); err != nil {
			return true, err
		}
	}
	return p.pipeline(ctx, direct)
}

// pipeline copies the pages at direct into their extents group by group,
// sending each group's request once it is copied, then reads every
// answer. broke: the connection is out of step or failed.
func (p *shmPut) pipeline(ctx context.Context, direct []int) (broke bool, err error) {
	if len(direct) == 0 {
		return p.drain()
	}
	per := max(1, shmCommitGroup/max(1, len(p.pages[direct[0]].Data)))
	for start := 0; start < len(direct); start += per {
		group := direct[start:min(len(direct), start+per)]
		sums, err := p.copy(ctx, group)
		if err != nil {
			return true, fmt.Errorf("put: %w", err)
		}
		if err := p.commit(group, sums); err != nil {
			return true, err
		}
	}
	return p.drain()
}

// drain reads the answers of the requests sent, then fails with the first
// refusal that left the connection in step, if any.
func (p *shmPut) drain() (broke bool, err error) {
	for len(p.sent) > 0 {
		if err := p.answer(); err != nil {
			return true, err
		}
	}
	return false, p.refused
}

// copy writes the pages at group into their extents (a page in pieces
// straight from them) and returns their checksums, computed from the bytes
// as they were written.
func (p *shmPut) copy(ctx context.Context, group []int) ([][]byte, error) {
	ops := make([]transport.Op, len(group))
	sums := make([]pageSum, len(group))
	pcs := piecesOf(ctx)
	for j, i := range group {
		ops[j] = transport.Op{Ext: p.ext(i), Buf: p.pages[i].Data, Pieces: pcs.of(p.pages[i].Data)}
		sums[j] = newPageSum(p.n.desc.Checksum)
	}
	if err := p.s.shm.WriteEach(ctx, ops, func(j int, b []byte) { sums[j].write(b) }); err != nil {
		return nil, err
	}
	out := make([][]byte, len(group))
	for j := range sums {
		out[j] = sums[j].sum()
	}
	return out, nil
}

// commit sends the request that publishes the pages at group, whose
// checksums are sums, after reading the oldest answer if
// shmCommitsInFlight are unanswered.
func (p *shmPut) commit(group []int, sums [][]byte) error {
	if len(p.sent) >= shmCommitsInFlight {
		if err := p.answer(); err != nil {
			return err
		}
	}
	req := p.request(group, sums)
	id := p.s.ids.Add(1)
	if err := p.c.Send(id, req); err != nil {
		return err
	}
	p.sent = append(p.sent, shmCommit{id: id, pages: group, sums: sums, req: req})
	return nil
}

// answer reads the answer to the oldest request unanswered and records it.
func (p *shmPut) answer() error {
	sc := p.sent[0]
	p.sent = p.sent[1:]
	m, err := recvAnswer(p.c, sc.id)
	if err != nil {
		return err
	}
	return p.answered(sc, m)
}

// commitAnswered records the outcomes of a Commit (and, for the pages in
// the arena, their locations).
func (p *shmPut) commitAnswered(sc shmCommit, m frame.Message) error {
	if broke, err := committed(m, sc.pages, p.results); broke || err != nil {
		if err == nil {
			err = fmt.Errorf("commit: %w", ErrProtocol)
		}
		return err
	}
	for j, i := range sc.pages {
		if sl := p.r.Slots[i]; p.results[i].Status == Committed && sl.Mapped {
			p.s.locs.put(p.n.id, p.pages[i].Key, shmLoc{ext: sl.Ext, sum: sc.sums[j]})
		}
	}
	return nil
}
