package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/transport"
)

// getShm is Get through shared memory: one round trip locates the pages
// (under the caller's lease, if any), then each mapped page is one memcpy checked against its
// generation (a raced copy is a miss). Pages the node holds outside its
// host arena are read over tcp. ok false: shm is unusable, use tcp.
func (n *Namespace) getShm(ctx context.Context, keys []namespace.Key, bufs [][]byte, lease *Lease) (found []bool, ok bool, err error) {
	if lease == nil {
		if s := n.shmFor(); s != nil && s.pin() {
			found, err := n.getCached(ctx, s, keys, bufs)
			s.unpin()
			if found != nil || err != nil {
				return found, true, err
			}
		}
	}
	req := &frame.Get{NS: n.id, Keys: keys}
	if lease != nil {
		req.Lease = lease.ID
	}
	var others []int
	ok, err = n.withShm(func(s *shmSession, c *transport.Conn) (bool, error) {
		others = others[:0]
		m, err := s.call(ctx, c, req)
		if err != nil {
			return true, err
		}
		g, isOK := m.(*frame.GetOK)
		if !isOK {
			return false, shmErr("get", m)
		}
		if len(g.Pages) != len(keys) {
			return true, fmt.Errorf("get: %d pages for %d keys: %w", len(g.Pages), len(keys), ErrProtocol)
		}
		ops := make([]transport.Op, 0, len(keys))
		idx := make([]int, 0, len(keys))
		for i, p := range g.Pages {
			switch p.Status {
			case frame.PageMapped:
				if p.Ext.Len > int64(len(bufs[i])) {
					return false, fmt.Errorf("get: page %d is %d bytes, buffer %d: %w", i, p.Ext.Len, len(bufs[i]), ErrBufferTooSmall)
				}
				ops = append(ops, transport.Op{Ext: p.Ext, Buf: bufs[i]})
				idx = append(idx, i)
			case frame.PageElse:
				others = append(others, i)
			}
		}
		if err := s.shm.Read(ctx, ops); err != nil {
			return ctx.Err() == nil, fmt.Errorf("get: %w", err) // an extent outside the arena breaks the session
		}
		found = make([]bool, len(keys))
		var bad []error
		for j, op := range ops {
			i := idx[j]
			if op.OK && n.c.verifyShm && !bytes.Equal(n.desc.Checksum.Sum(op.Buf[:op.Ext.Len]), g.Pages[i].Checksum) {
				bad = append(bad, fmt.Errorf("page %d: %w", i, ErrChecksum))
				continue
			}
			found[i] = op.OK
			if op.OK {
				s.locs.put(n.id, keys[i], shmLoc{ext: op.Ext, sum: g.Pages[i].Checksum})
			} else {
				// The extent changed under the copy: without a lease the page
				// may have been demoted (or dropped) meanwhile. Ask the node
				// for its bytes, which it sends pinned, from whatever tier.
				others = append(others, i)
			}
		}
		if len(bad) > 0 {
			return false, fmt.Errorf("get: %w", errors.Join(bad...))
		}
		return false, nil
	})
	if !ok || err != nil || len(others) == 0 {
		return found, ok, err
	}
	// Pages in other tiers (gpu, ssd), and pages whose copy raced a move,
	// come over tcp, under the caller's lease.
	okeys, obufs := make([]namespace.Key, len(others)), make([][]byte, len(others))
	for j, i := range others {
		okeys[j], obufs[j] = keys[i], bufs[i]
	}
	t := *n
	t.tcpOnly = true
	got, err := t.Get(ctx, okeys, obufs, lease)
	for j, i := range others {
		found[i] = j < len(got) && got[j] // results stand beside an error that has them
	}
	if err != nil {
		return found, true, fmt.Errorf("tcp read: %w", err)
	}
	return found, true, nil
}

// putShm is a put batch through shared memory: reserve (extents in the
// arena), copy each page in place, commit (the node verifies size and
// checksum). Reservations outside the arena, or too close to their
// deadline, get their bytes over tcp. ok false: shm is unusable, use tcp.
func (n *Namespace) putShm(ctx context.Context, pages []Page) (results []PutResult, ok bool, err error) {
	if n.tcpOnly || n.c.shmPath == "" {
		return nil, false, nil
	}
	out := make([]PutResult, 0, len(pages))
	for start := 0; start < len(pages); start += n.maxBatch {
		res, ok, err := n.putShmBatch(ctx, pages[start:min(len(pages), start+n.maxBatch)])
		if !ok || err != nil {
			return nil, ok, err // not ok: tcp redoes the put (published pages answer Exists)
		}
		out = append(out, res...)
	}
	return out, true, nil
}

func (n *Namespace) putShmBatch(ctx context.Context, pages []Page) (results []PutResult, ok bool, err error) {
	req := &frame.Reserve{NS: n.id, Pages: make([]frame.PageSpec, len(pages))}
	for i, p := range pages {
		if len(p.Data) != n.pageBytes {
			return nil, true, fmt.Errorf("put page %d: %d bytes, namespace pages are %d: %w", i, len(p.Data), n.pageBytes, ErrInvalid)
		}
		req.Pages[i] = frame.PageSpec{Key: p.Key, Parent: p.Parent, HasParent: p.HasParent, Depth: p.Depth,
			Size: int64(len(p.Data)), ChainDepth: p.ChainDepth}
	}
	ok, err = n.withShm(func(s *shmSession, c *transport.Conn) (bool, error) {
		m, err := s.call(ctx, c, req)
		if err != nil {
			return true, err
		}
		r, isOK := m.(*frame.ReserveOK)
		if !isOK {
			return false, shmErr("reserve", m)
		}
		if len(r.Slots) != len(pages) {
			return true, fmt.Errorf("reserve: %d answers for %d pages: %w", len(r.Slots), len(pages), ErrProtocol)
		}
		results = make([]PutResult, len(pages))
		var open, viaTCP []int
		var direct []transport.Op
		for i, sl := range r.Slots {
			switch sl.Status {
			case frame.SlotReserved:
				open = append(open, i)
				if sl.Mapped && time.Until(time.UnixMilli(sl.DeadlineMs)) > shmMinDeadline {
					direct = append(direct, transport.Op{Ext: sl.Ext, Buf: pages[i].Data})
				} else {
					viaTCP = append(viaTCP, i)
				}
			case frame.SlotExists:
				results[i] = PutResult{Status: Exists}
			default:
				results[i] = PutResult{Status: Rejected, Reason: sl.Reason}
			}
		}
		if len(open) == 0 {
			return false, nil
		}
		wid := func(i int) uint64 { return r.Slots[i].WriteID }
		if err := s.shm.Write(ctx, direct); err != nil {
			return true, fmt.Errorf("put: %w", err) // closing the connection aborts its reservations
		}
		if len(viaTCP) > 0 {
			if err := n.write(ctx, pages, viaTCP, wid); err != nil {
				return true, err
			}
		}
		items := make([]frame.CommitItem, len(open))
		for j, i := range open {
			items[j] = frame.CommitItem{WriteID: wid(i), Size: int64(len(pages[i].Data)), Checksum: n.desc.Checksum.Sum(pages[i].Data)}
		}
		m, err = s.call(ctx, c, &frame.Commit{NS: n.id, Items: items})
		if err != nil {
			return true, err
		}
		co, isOK := m.(*frame.CommitOK)
		if !isOK || len(co.Statuses) != len(open) {
			return true, shmErr("commit", m)
		}
		for j, i := range open {
			results[i] = PutResult{Status: PutStatus(co.Statuses[j])}
			if results[i].Status != Committed {
				results[i].Reason = results[i].Status.String()
			} else if sl := r.Slots[i]; sl.Mapped {
				s.locs.put(n.id, pages[i].Key, shmLoc{ext: sl.Ext, sum: items[j].Checksum})
			}
		}
		return false, nil
	})
	return results, ok, err
}

// getCached serves a Get without a lease from the shmLoc cache with no
// round trip: every key must be cached and every copy must pass its
// generation re-check (and checksum, with ShmVerifyChecksums). Otherwise
// it forgets the stale locations and returns nil, nil: the caller asks the
// node.
func (n *Namespace) getCached(ctx context.Context, s *shmSession, keys []namespace.Key, bufs [][]byte) ([]bool, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	var one [1]transport.Op
	ops := one[:0]
	if len(keys) > 1 {
		ops = make([]transport.Op, 0, len(keys))
	}
	for i, k := range keys {
		l, ok := s.locs.get(n.id, k)
		if !ok || l.ext.Len > int64(len(bufs[i])) {
			return nil, nil
		}
		ops = append(ops, transport.Op{Ext: l.ext, Buf: bufs[i]})
	}
	if err := s.shm.Read(ctx, ops); err != nil {
		return nil, nil // the node's answer will say what is wrong
	}
	hit := true
	for i, op := range ops {
		if !op.OK {
			s.locs.forget(n.id, keys[i])
			hit = false
			continue
		}
		if n.c.verifyShm {
			if l, _ := s.locs.get(n.id, keys[i]); !bytes.Equal(n.desc.Checksum.Sum(op.Buf[:op.Ext.Len]), l.sum) {
				s.locs.forget(n.id, keys[i])
				hit = false
			}
		}
	}
	if !hit {
		return nil, nil
	}
	found := make([]bool, len(keys))
	var bytes int64
	for i := range found {
		found[i] = true
		bytes += ops[i].Ext.Len
	}
	s.countServed(n.id, len(keys), bytes)
	return found, nil
}
