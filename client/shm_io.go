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

// lookup is Lookup over the shm session's socket: one frame each way, as
// on the raw plane (the node answers both with one handler), so a
// same-host client whose raw plane is off does not fall back to gRPC for
// it. ok false: the session is unusable (the next plane asks).
func (s *shmSession) lookup(ctx context.Context, n *nodeNS, keys []namespace.Key, lease bool, ttl time.Duration) (res lookupAnswer, ok bool, err error) {
	req := &frame.Lookup{NS: n.id, Lease: lease, LeaseTTLms: uint32(ttl.Milliseconds()), Keys: keys}
	ok, err = s.with(func(c *transport.Conn) (bool, error) {
		m, err := s.call(ctx, c, req)
		if err != nil {
			return true, err
		}
		res, err = lookupAnswerOf(n, m, len(keys))
		return false, err
	})
	if ok && err == nil {
		s.lookups.Add(1)
	}
	return res, ok, err
}

// get is Get through shared memory: one round trip locates the pages
// (under the caller's lease, if any), then each mapped page is one memcpy
// checked against its generation (a raced copy is a miss). Pages the node
// holds outside its host arena are read on the next plane. ok false: the
// session is unusable.
func (s *shmSession) get(ctx context.Context, n *nodeNS, keys []namespace.Key, bufs [][]byte, lease *nodeLease) (found []bool, ok bool, err error) {
	if lease == nil {
		if s.pin() {
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
	pcs := piecesOf(ctx)
	var others []int
	ok, err = s.with(func(c *transport.Conn) (bool, error) {
		others = others[:0]
		m, err := s.call(ctx, c, req)
		if err != nil {
			return true, err
		}
		g, isOK := m.(*frame.GetOK)
		if !isOK {
			return false, fromFrame("get", m)
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
				ops = append(ops, transport.Op{Ext: p.Ext, Buf: bufs[i], Pieces: pcs.of(bufs[i])})
				idx = append(idx, i)
			case frame.PageElse:
				others = append(others, i)
			}
		}
		sums, err := n.readShm(ctx, s, ops)
		if err != nil {
			return ctx.Err() == nil, fmt.Errorf("get: %w", err) // an extent outside the arena breaks the session
		}
		found = make([]bool, len(keys))
		var bad []error
		for j, op := range ops {
			i := idx[j]
			if op.OK && sums != nil && !bytes.Equal(sums[j].sum(), g.Pages[i].Checksum) {
				bad = append(bad, fmt.Errorf("page %d: %w", i, ErrChecksum))
				continue
			}
			found[i] = op.OK
			if op.OK {
				if op.Pieces != nil {
					pcs.wrote(bufs[i])
				}
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
	// come on the next plane, under the caller's lease.
	if err = n.getOthers(ctx, keys, bufs, lease, others, found); err != nil {
		err = fmt.Errorf("get pages outside the arena: %w", err)
	}
	return found, true, err
}

// getCached serves a Get without a lease from the shmLoc cache with no
// round trip: every key must be cached and every copy must pass its
// generation re-check (and checksum, with ShmVerifyChecksums). Otherwise
// it forgets the stale locations and returns nil, nil: the caller asks the
// node.
func (n *nodeNS) getCached(ctx context.Context, s *shmSession, keys []namespace.Key, bufs [][]byte) ([]bool, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	var one [1]transport.Op
	ops := one[:0]
	if len(keys) > 1 {
		ops = make([]transport.Op, 0, len(keys))
	}
	pcs := piecesOf(ctx)
	for i, k := range keys {
		l, ok := s.locs.get(n.id, k)
		if !ok || l.ext.Len > int64(len(bufs[i])) {
			return nil, nil
		}
		ops = append(ops, transport.Op{Ext: l.ext, Buf: bufs[i], Pieces: pcs.of(bufs[i])})
	}
	sums, err := n.readShm(ctx, s, ops)
	if err != nil {
		return nil, nil // the node's answer will say what is wrong
	}
	hit := true
	for i, op := range ops {
		if !op.OK {
			s.locs.forget(n.id, keys[i])
			hit = false
			continue
		}
		if sums != nil {
			if l, _ := s.locs.get(n.id, keys[i]); !bytes.Equal(sums[i].sum(), l.sum) {
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
		if ops[i].Pieces != nil {
			pcs.wrote(bufs[i])
		}
	}
	s.countServed(n.id, len(keys), bytes)
	return found, nil
}

// readShm copies ops out of the arena; with Options.ShmVerifyChecksums it
// checksums each page as it copies it (one pass: each chunk while it is in
// cache) and returns the sums, by op, to compare; nil sums without.
func (n *nodeNS) readShm(ctx context.Context, s *shmSession, ops []transport.Op) ([]pageSum, error) {
	if !n.c.verifyShm {
		return nil, s.shm.Read(ctx, ops)
	}
	sums := make([]pageSum, len(ops))
	for j := range sums {
		sums[j] = newPageSum(n.desc.Checksum)
	}
	return sums, s.shm.ReadEach(ctx, ops, func(j int, p []byte) { sums[j].write(p) })
}
