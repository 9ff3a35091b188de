package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/transport"
)

// get is Get over the raw tcp data plane: one Read, answered by a Page
// frame per key whose bytes land straight in bufs[i], each verified
// against its checksum. Its reads poll for the answer (Options.RawPoll);
// those of puts and lookups do not. ok false: no connection could be had.
func (s *rawSession) get(ctx context.Context, n *nodeNS, keys []namespace.Key, bufs [][]byte, lease *nodeLease) (found []bool, ok bool, err error) {
	c, err := s.acquire()
	if err != nil {
		return nil, false, nil
	}
	req := &frame.Read{NS: n.id, Keys: keys}
	if lease != nil {
		req.Lease = lease.ID
	}
	c.SetReadPoll(s.poll)
	found, broke, err := n.readRaw(ctx, s, c, req, bufs)
	c.SetReadPoll(nil)
	s.finish(c, broke)
	return found, true, err
}

// readRaw sends req on c and reads its answer. broke reports that c cannot
// be used again.
func (n *nodeNS) readRaw(ctx context.Context, s *rawSession, c *transport.Conn, req *frame.Read, bufs [][]byte) (found []bool, broke bool, err error) {
	done := bound(ctx, c)
	defer func() {
		if !done() {
			broke = true // ctx ended: c's deadline is spoiled
		}
		if broke && err == nil {
			err = fmt.Errorf("get: %w", ctx.Err())
		}
		switch cerr := ctx.Err(); {
		case broke && cerr != nil && !errors.Is(err, cerr):
			// The node call's deadline (NodeTimeout) or cancellation cut the
			// connection: say so, so that the node counts as failed (its
			// pages misses, the node quarantined) instead of the read
			// error ("i/o timeout") reaching the caller.
			err = fmt.Errorf("%w: %w", cerr, err)
		case broke && cerr == nil && !errors.Is(err, ErrUnavailable):
			err = fmt.Errorf("%w: %w", ErrUnavailable, err) // the node or the path failed
		}
	}()
	id := s.ids.Add(1)
	if err := c.Send(id, req); err != nil {
		return nil, true, fmt.Errorf("get: %w", err)
	}
	keys := req.Keys
	found = make([]bool, len(keys))
	next := 0
	// A page registered in a Pieces (WithPieces) is read straight into its
	// pieces, as over shared memory; any other into its buffer.
	pcs := piecesOf(ctx)
	var one [1][]byte
	pieced := false // the page due went into its pieces
	pick := func(p *frame.Page, size int) ([][]byte, error) {
		if int(p.Index) != next {
			return nil, fmt.Errorf("page %d where %d was due: %w", p.Index, next, ErrProtocol)
		}
		dst := pcs.of(bufs[next])
		if pieced = dst != nil; !pieced {
			one[0] = bufs[next]
			dst = one[:]
		}
		if have := piecesLen(dst); size > have {
			return nil, fmt.Errorf("page %d is %d bytes, buffer %d: %w", next, size, have, ErrBufferTooSmall)
		}
		return dst, nil
	}
	var bad []error
	// Pages are checksummed piece by piece as they arrive, while the rest
	// is still in flight.
	var sum pageSum
	var each func([]byte)
	skip := n.c.rawSkipVerify
	if !skip {
		each = func(p []byte) { sum.write(p) }
	}
	for ; next < len(keys); next++ {
		sum = newPageSum(n.desc.Checksum)
		got, m, err := c.RecvPageInto(pick, each)
		switch {
		case err != nil && m == nil:
			// The connection failed mid-answer: the pages read so far may
			// be whole, but the call fails as a whole.
			return nil, true, fmt.Errorf("get: connection lost after %d of %d pages: %w", next, len(keys), err)
		case got != id:
			return nil, true, fmt.Errorf("get: answer for request %d, want %d: %w", got, id, ErrProtocol)
		case errors.Is(err, ErrProtocol):
			return nil, true, fmt.Errorf("get: %w", err)
		case err != nil:
			bad = append(bad, err) // a buffer too small: the page was skipped
			continue
		}
		p, isPage := m.(*frame.Page)
		if !isPage {
			if next > 0 {
				return nil, true, fmt.Errorf("get: op %d after %d pages: %w", m.Op(), next, ErrProtocol)
			}
			return nil, false, fromFrame("get", m)
		}
		if p.Found && (skip || sum.is(p.Checksum)) {
			found[next] = true
			if pieced {
				pcs.wrote(bufs[next])
			}
		} else if p.Found {
			bad = append(bad, fmt.Errorf("page %d: %w", next, ErrChecksum))
		}
	}
	if len(bad) > 0 {
		return found, false, fmt.Errorf("get: %w", errors.Join(bad...))
	}
	return found, false, nil
}

// put is a put batch over the raw tcp data plane (putRawCalls). ok false:
// no connection could be had, or it failed before the node answered, or
// the node's version does not carry what a page has (frameVersion); the next plane
// redoes the batch (pages already published answer Exists; the node
// aborts the reservations of a connection that closes).
func (s *rawSession) put(ctx context.Context, n *nodeNS, pages []Page) ([]PutResult, bool, error) {
	c, err := s.acquire()
	if err != nil {
		return nil, false, nil
	}
	// The version is known once a connection was made (as for lookup).
	if s.version.Load() < frameVersion(pages) {
		s.finish(c, false)
		return nil, false, nil
	}
	done := bound(ctx, c)
	results, broke, err := n.putRawCalls(s, c, pages, piecesOf(ctx))
	if !done() {
		broke = true
	}
	s.finish(c, broke)
	if broke && ctx.Err() != nil {
		return nil, true, fmt.Errorf("put: %w", ctx.Err())
	}
	if broke {
		return nil, false, nil
	}
	return results, true, err
}

// putRawCalls runs a put batch on c: one round trip where it can, else
// two. A page registered in pcs is sent from its pieces.
func (n *nodeNS) putRawCalls(s *rawSession, c *transport.Conn, pages []Page, pcs *Pieces) (results []PutResult, broke bool, err error) {
	if len(pages) <= oneCallMaxPages && s.version.Load() >= 3 && len(pages[0].Data) <= frame.MaxWriteChunk {
		s.oneCall.Add(1)
		return n.putRawOneCall(s, c, pages, pcs)
	}
	s.twoPhase.Add(1)
	id := s.ids.Add(1)
	if err := c.Send(id, n.reserveFrame(pages)); err != nil {
		return nil, true, err
	}
	m, err := recvAnswer(c, id)
	if err != nil {
		return nil, true, err
	}
	r, results, open, broke, err := reserved(m, pages)
	if len(open) == 0 || err != nil {
		return results, broke, err
	}
	commit := n.commitFrame(r, pages, open, pcs)
	frames := make([]transport.Frame, 0, len(open)+1)
	for _, i := range open {
		wid, data := r.Slots[i].WriteID, pages[i].Data
		pieces := pcs.of(data)
		for off := 0; off < len(data); off += frame.MaxWriteChunk {
			end := min(len(data), off+frame.MaxWriteChunk)
			w := &frame.Write{NS: n.id, WriteID: wid, Offset: uint64(off)}
			if pieces == nil {
				w.Data = data[off:end]
			}
			frames = append(frames, transport.Frame{ID: s.ids.Add(1), Msg: w, Pieces: cutPieces(pieces, off, end)})
		}
	}
	id = s.ids.Add(1)
	frames = append(frames, transport.Frame{ID: id, Msg: commit})
	if err := c.SendFramesLent(frames...); err != nil {
		return nil, true, err
	}
	if m, err = recvAnswer(c, id); err != nil {
		return nil, true, err
	}
	if broke, err := committed(m, open, results); broke || err != nil {
		return nil, broke, err
	}
	return results, false, nil
}

// putRawOneCall puts pages (all of the namespace's page size, which is at
// most frame.MaxWriteChunk) with one Put frame each, all in one writev,
// then reads their answers in order: one round trip. The node refuses a
// page with an Error frame as that page's answer (an unknown namespace,
// say), which fails the call but leaves the connection in step.
func (n *nodeNS) putRawOneCall(s *rawSession, c *transport.Conn, pages []Page, pcs *Pieces) (results []PutResult, broke bool, err error) {
	frames := make([]transport.Frame, len(pages))
	puts := make([]frame.Put, len(pages))
	first := s.ids.Add(uint64(len(pages))) - uint64(len(pages)) + 1
	for i, p := range pages {
		pieces := pcs.of(p.Data)
		puts[i] = frame.Put{NS: n.id, Checksum: n.sumOf(p.Data, pieces), Page: framePageSpec(p)}
		if pieces == nil {
			puts[i].Data = p.Data
		}
		frames[i] = transport.Frame{ID: first + uint64(i), Msg: &puts[i], Pieces: pieces}
	}
	if err := c.SendFramesLent(frames...); err != nil {
		return nil, true, err
	}
	results = make([]PutResult, len(pages))
	var refused error
	for i := range pages {
		m, err := recvAnswer(c, first+uint64(i))
		if err != nil {
			return nil, true, err
		}
		ok, isOK := m.(*frame.PutOK)
		if !isOK {
			if refused == nil {
				refused = fromFrame("put", m)
			}
			continue
		}
		switch ok.Reserve {
		case frame.SlotReserved:
			results[i] = PutResult{Status: PutStatus(ok.Commit)}
			if results[i].Status != Committed {
				results[i].Reason = ok.Reason
			}
		case frame.SlotExists:
			results[i] = PutResult{Status: Exists}
		default:
			results[i] = PutResult{Status: Rejected, Reason: ok.Reason}
		}
	}
	if refused != nil {
		return nil, false, refused
	}
	return results, false, nil
}

// lookup is Lookup over the raw tcp data plane: one frame each way.
// ok false: no connection, a node of protocol 2, or the connection failed
// before the answer. A lease taken for an answer that was lost ends at
// its expiry.
func (s *rawSession) lookup(ctx context.Context, n *nodeNS, keys []namespace.Key, lease bool, ttl time.Duration) (res lookupAnswer, ok bool, err error) {
	c, err := s.acquire()
	if err != nil {
		return lookupAnswer{}, false, nil
	}
	// The version is known once a connection was made: checked before
	// acquire, a client that only looked keys up never dialed the plane
	// and sent every lookup over gRPC.
	if s.version.Load() < 3 {
		s.finish(c, false)
		return lookupAnswer{}, false, nil
	}
	done := bound(ctx, c)
	id := s.ids.Add(1)
	req := &frame.Lookup{NS: n.id, Lease: lease, LeaseTTLms: uint32(ttl.Milliseconds()), Keys: keys}
	var m frame.Message
	if err = c.Send(id, req); err == nil {
		m, err = recvAnswer(c, id)
	}
	if !done() {
		s.finish(c, true)
		return lookupAnswer{}, true, fmt.Errorf("lookup: %w", ctx.Err())
	}
	s.finish(c, err != nil)
	if err != nil {
		return lookupAnswer{}, false, nil
	}
	s.lookups.Add(1)
	res, err = lookupAnswerOf(n, m, len(keys))
	return res, true, err
}

// lookupAnswerOf is a frame plane's answer m to a Lookup of keys keys.
func lookupAnswerOf(n *nodeNS, m frame.Message, keys int) (lookupAnswer, error) {
	r, isOK := m.(*frame.LookupOK)
	switch {
	case !isOK:
		return lookupAnswer{}, fromFrame("lookup", m)
	case len(r.Present) != keys || int(r.HitPrefix) > keys:
		return lookupAnswer{}, fmt.Errorf("lookup: %d answers for %d keys: %w", len(r.Present), keys, ErrProtocol)
	}
	res := lookupAnswer{HitPrefix: int(r.HitPrefix), Present: r.Present}
	if r.LeaseID != 0 {
		res.Lease = &nodeLease{ns: n, ID: r.LeaseID, Expires: time.UnixMilli(r.ExpiresMs), Pages: int(r.LeasePages)}
	}
	return res, nil
}
