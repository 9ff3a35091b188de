// Command libstrata is the Go client as a C shared library, the native
// plane of the Python client (python/strata_client/native.py; ARCHITECTURE.md,
// "The Python client's native plane", says why a shared library):
//
//	go build -buildmode=c-shared -o libstrata.so ./cmd/libstrata
//
// It serves whole batches: one call reads or publishes every page of a
// batch, or looks a batch of keys up (without a lease: leases stay with the
// Python client, whose Lease other processes adopt), on whichever plane the Go client picks (same-host shared memory,
// raw tcp, gRPC), so a Python caller releases the GIL once per batch
// (ctypes does, around every foreign call) instead of once per page and
// chunk. Page buffers are the caller's memory, named by pointer and
// length: pages are read straight into them and written straight from
// them. A page in several pieces (a K and a V segment) is read straight
// into them and written straight from them over shared memory and raw tcp
// (client.Pieces), else (gRPC) through a staging buffer of the namespace;
// in rounds of at most stageBytes.
//
// Objects cross as handles (runtime/cgo.Handle). Every call answers 0 for
// success, else 1 with "REASON\tmessage" in its err buffer (client.Reason
// gives the reason); results a failed call did get (found pages, put
// statuses) stand beside the error. A panic is recovered and answered as
// INTERNAL. A process must not call in after a fork: the Go runtime's
// threads are not in the child (native.py refuses such calls before they
// reach here).
package main

/*
#include <stdint.h>
#include <stddef.h>

// strata_seg is one piece of a page buffer.
typedef struct {
	void*    ptr;
	uint64_t len;
} strata_seg;
*/
import "C"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/cgo"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
)

// abiVersion is what strata_abi answers: native.py refuses a library of
// another version (a stale build beside newer Python).
const abiVersion = 4

// stageBytes bounds the staging memory a namespace keeps for pages in
// several pieces: a batch of them goes in rounds of at most this much.
const stageBytes = 64 << 20

func main() {}

// options are the client options native.py sends, as JSON.
type options struct {
	Addrs         []string `json:"addrs"`
	Token         string   `json:"token"`
	CA            string   `json:"ca"`
	Cert          string   `json:"cert"`
	Key           string   `json:"key"`
	ServerName    string   `json:"server_name"`
	NodeTimeoutMs int64    `json:"node_timeout_ms"`
	DialTimeoutMs int64    `json:"dial_timeout_ms"`
	NoRaw         bool     `json:"no_raw"`
	NoShm         bool     `json:"no_shm"`
	// ShmVerify verifies pages read through shared memory against their
	// checksums (the Python client's default: every page it hands an
	// engine verified).
	ShmVerify bool `json:"shm_verify"`
}

// nsState is an opened namespace and its staging buffers.
type nsState struct {
	ns    *client.Namespace
	stage sync.Pool // *[]byte of stageBytes rounded down to whole pages
}

// fail writes "reason\tmessage" into err (cut to errLen) and answers 1.
func fail(err error, buf *C.char, n C.size_t) C.int {
	reason := client.Reason(err)
	if reason == "" {
		reason = "INTERNAL"
	}
	writeString(reason+"\t"+err.Error(), buf, n)
	return 1
}

// writeString copies s, NUL-terminated and cut to n bytes, into buf.
func writeString(s string, buf *C.char, n C.size_t) {
	if buf == nil || n == 0 {
		return
	}
	dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
	k := copy(dst[:len(dst)-1], s)
	dst[k] = 0
}

// recovered turns a panic into an INTERNAL answer.
func recovered(rc *C.int, buf *C.char, n C.size_t) {
	if p := recover(); p != nil {
		*rc = fail(fmt.Errorf("libstrata: panic: %v", p), buf, n)
	}
}

func timeoutCtx(ms C.int64_t) (context.Context, context.CancelFunc) {
	if ms <= 0 {
		return context.WithCancel(context.Background())
	}
	return context.WithTimeout(context.Background(), time.Duration(ms)*time.Millisecond)
}

//export strata_abi
func strata_abi() C.int { return abiVersion }

//export strata_dial
func strata_dial(optsJSON *C.char, out *C.uint64_t, errBuf *C.char, errLen C.size_t) (rc C.int) {
	defer recovered(&rc, errBuf, errLen)
	var o options
	if err := json.Unmarshal([]byte(C.GoString(optsJSON)), &o); err != nil {
		return fail(fmt.Errorf("dial: options: %w: %w", client.ErrInvalid, err), errBuf, errLen)
	}
	if len(o.Addrs) == 0 {
		return fail(fmt.Errorf("dial: no node address: %w", client.ErrInvalid), errBuf, errLen)
	}
	opts := client.Options{Token: o.Token, CA: o.CA, Cert: o.Cert, Key: o.Key, ServerName: o.ServerName,
		Seeds: o.Addrs[1:], NoRaw: o.NoRaw, NoShm: o.NoShm, ShmVerifyChecksums: o.ShmVerify,
		NodeTimeout: time.Duration(o.NodeTimeoutMs) * time.Millisecond}
	ctx, cancel := timeoutCtx(C.int64_t(o.DialTimeoutMs))
	defer cancel()
	c, err := client.Dial(ctx, o.Addrs[0], opts)
	if err != nil {
		return fail(err, errBuf, errLen)
	}
	*out = C.uint64_t(cgo.NewHandle(c))
	return 0
}

//export strata_close
func strata_close(h C.uint64_t) {
	hd := cgo.Handle(h)
	hd.Value().(*client.Client).Close()
	hd.Delete()
}

//export strata_open
func strata_open(h C.uint64_t, canon unsafe.Pointer, canonLen C.size_t, timeoutMs C.int64_t, out *C.uint64_t,
	errBuf *C.char, errLen C.size_t) (rc C.int) {
	defer recovered(&rc, errBuf, errLen)
	c := cgo.Handle(h).Value().(*client.Client)
	d, err := namespace.Decode(C.GoBytes(canon, C.int(canonLen)))
	if err != nil {
		return fail(fmt.Errorf("open: descriptor: %w: %w", client.ErrInvalid, err), errBuf, errLen)
	}
	ctx, cancel := timeoutCtx(timeoutMs)
	defer cancel()
	ns, err := c.Open(ctx, d)
	if err != nil {
		return fail(err, errBuf, errLen)
	}
	*out = C.uint64_t(cgo.NewHandle(&nsState{ns: ns}))
	return 0
}

//export strata_ns_free
func strata_ns_free(h C.uint64_t) { cgo.Handle(h).Delete() }

// pageBufs are a batch's page buffers: whole ones (one piece) straight
// from the caller, the others' pieces kept for a staging round.
type pageBufs struct {
	whole  [][]byte   // per page: its one piece, or nil
	pieces [][][]byte // per page in several pieces: the pieces
	split  []int      // the pages in several pieces
}

// batch is a batch call's namespace and page buffers (none for n <= 0).
func batch(h C.uint64_t, n C.int, nsegs *C.int32_t, segs *C.strata_seg) (*nsState, pageBufs, error) {
	s := cgo.Handle(h).Value().(*nsState)
	if n <= 0 {
		return s, pageBufs{}, nil
	}
	bufs, err := buffers(int(n), nsegs, segs)
	return s, bufs, err
}

func buffers(n int, nsegs *C.int32_t, segs *C.strata_seg) (pageBufs, error) {
	counts := unsafe.Slice((*int32)(unsafe.Pointer(nsegs)), n)
	total := 0
	for i, k := range counts {
		if k < 1 {
			return pageBufs{}, fmt.Errorf("page %d has %d buffer pieces: %w", i, k, client.ErrInvalid)
		}
		total += int(k)
	}
	all := unsafe.Slice(segs, total)
	b := pageBufs{whole: make([][]byte, n), pieces: make([][][]byte, n)}
	at := 0
	for i, k := range counts {
		ps := make([][]byte, k)
		for j := range ps {
			s := all[at+j]
			if s.ptr == nil && s.len > 0 {
				return pageBufs{}, fmt.Errorf("page %d: piece %d is a null pointer: %w", i, j, client.ErrInvalid)
			}
			ps[j] = unsafe.Slice((*byte)(s.ptr), int(s.len))
		}
		at += int(k)
		if k == 1 {
			b.whole[i] = ps[0]
		} else {
			b.pieces[i] = ps
			b.split = append(b.split, i)
		}
	}
	return b, nil
}

func piecesLen(ps [][]byte) int {
	n := 0
	for _, p := range ps {
		n += len(p)
	}
	return n
}

// scatter copies page into pieces, the pages of a round split between
// goroutines.
func scatter(page []byte, pieces [][]byte) {
	for _, p := range pieces {
		page = page[copy(p, page):]
	}
}

// parallel runs f(i) for i in [0, n) on up to 4 goroutines.
func parallel(n int, f func(i int)) {
	workers := min(n, 4)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				f(i)
			}
		})
	}
	wg.Wait()
}

// rounds splits the staged pages into rounds of at most stageBytes.
func (s *nsState) perRound() int { return max(1, stageBytes/max(1, s.ns.PageBytes())) }

func (s *nsState) slab() *[]byte {
	if b, ok := s.stage.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, s.perRound()*s.ns.PageBytes())
	return &b
}

func keysOf(n int, keys unsafe.Pointer) []namespace.Key {
	raw := unsafe.Slice((*byte)(keys), n*namespace.KeySize)
	out := make([]namespace.Key, n)
	for i := range out {
		copy(out[i][:], raw[i*namespace.KeySize:])
	}
	return out
}

// leaseSpec is an adopted lease as native.py sends it: the Python Lease's
// export().
type leaseSpec struct {
	Pages  int `json:"pages"`
	Leases []struct {
		Node      string `json:"node"`
		ID        uint64 `json:"id"`
		ExpiresMs int64  `json:"expires_ms"`
	} `json:"leases"`
}

//export strata_get
func strata_get(h C.uint64_t, n C.int, keys unsafe.Pointer, nsegs *C.int32_t, segs *C.strata_seg, leaseJSON *C.char,
	timeoutMs C.int64_t, found *C.uint8_t, bad *C.int, errBuf *C.char, errLen C.size_t) (rc C.int) {
	defer recovered(&rc, errBuf, errLen)
	s, bufs, err := batch(h, n, nsegs, segs)
	if err != nil {
		return fail(fmt.Errorf("get: %w", err), errBuf, errLen)
	}
	if n <= 0 {
		return 0
	}
	ks := keysOf(int(n), keys)
	ctx, cancel := timeoutCtx(timeoutMs)
	defer cancel()
	var lease *client.Lease
	if leaseJSON != nil {
		var spec leaseSpec
		if err := json.Unmarshal([]byte(C.GoString(leaseJSON)), &spec); err != nil {
			return fail(fmt.Errorf("get: lease: %w: %w", client.ErrInvalid, err), errBuf, errLen)
		}
		nls := make([]client.NodeLease, len(spec.Leases))
		for i, l := range spec.Leases {
			nls[i] = client.NodeLease{Node: l.Node, ID: l.ID, Expires: time.UnixMilli(l.ExpiresMs)}
		}
		if lease, err = s.ns.AdoptLease(ctx, spec.Pages, nls); err != nil {
			return fail(err, errBuf, errLen)
		}
	}
	out := unsafe.Slice((*uint8)(unsafe.Pointer(found)), int(n))
	var errs []error
	// Whole pages in one call, straight into the caller's buffers.
	var idx []int
	var wk []namespace.Key
	var wb [][]byte
	for i, b := range bufs.whole {
		if b != nil {
			idx, wk, wb = append(idx, i), append(wk, ks[i]), append(wb, b)
		}
	}
	if len(idx) > 0 {
		f, err := s.ns.Get(ctx, wk, wb, lease)
		for j, i := range idx {
			out[i] = b2u(j < len(f) && f[j])
		}
		errs = append(errs, err)
	}
	// Pages in pieces: a staging round at a time. The shared-memory and
	// raw tcp planes write them straight into their pieces (client.Pieces);
	// a page that came on another plane is in its staging buffer, and
	// scattered here.
	if len(bufs.split) > 0 {
		slab := s.slab()
		defer s.stage.Put(slab)
		pb := s.ns.PageBytes()
		per := s.perRound()
		for start := 0; start < len(bufs.split); start += per {
			round := bufs.split[start:min(len(bufs.split), start+per)]
			rk := make([]namespace.Key, len(round))
			rb := make([][]byte, len(round))
			for j, i := range round {
				if piecesLen(bufs.pieces[i]) < pb {
					return fail(fmt.Errorf("get: buffer %d is %d bytes, pages are %d: %w", i, piecesLen(bufs.pieces[i]), pb,
						client.ErrBufferTooSmall), errBuf, errLen)
				}
				rk[j], rb[j] = ks[i], (*slab)[j*pb:(j+1)*pb]
			}
			pcs := client.NewPieces()
			for j, i := range round {
				pcs.Add(rb[j], bufs.pieces[i])
			}
			f, err := s.ns.Get(client.WithPieces(ctx, pcs), rk, rb, lease)
			errs = append(errs, err)
			parallel(len(round), func(j int) {
				if j < len(f) && f[j] {
					if !pcs.Written(rb[j]) {
						scatter(rb[j], bufs.pieces[round[j]])
					}
					out[round[j]] = 1
				}
			})
			if ctx.Err() != nil {
				break
			}
		}
	}
	err = errors.Join(errs...)
	*bad = C.int(client.CountChecksum(err))
	if err != nil {
		return fail(err, errBuf, errLen)
	}
	return 0
}

// eventsOf sets the pages' event info from the caller's: lens[i] bytes
// each, one after another from events, in the frame protocol's encoding
// of a page spec's event info (frame.DecodeEvent); 0 bytes: none. A nil
// lens: no page has any.
func eventsOf(pages []client.Page, events unsafe.Pointer, lens *C.uint32_t) error {
	if lens == nil {
		return nil
	}
	ls := unsafe.Slice((*uint32)(unsafe.Pointer(lens)), len(pages))
	total := 0
	for _, l := range ls {
		total += int(l)
	}
	if total == 0 {
		return nil
	}
	all := unsafe.Slice((*byte)(events), total)
	for i, l := range ls {
		if l == 0 {
			continue
		}
		var spec frame.PageSpec
		if err := frame.DecodeEvent(all[:l], &spec); err != nil {
			return fmt.Errorf("page %d's event info: %w: %w", i, err, client.ErrInvalid)
		}
		all = all[l:]
		pages[i].Event = &client.EventInfo{Tokens: spec.Tokens, LoraName: spec.LoraName, ExtraKeys: spec.ExtraKeys}
	}
	return nil
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

//export strata_put
func strata_put(h C.uint64_t, n C.int, keys, parents unsafe.Pointer, hasParent *C.uint8_t, depth, chainDepth *C.uint32_t,
	cost *C.double, events unsafe.Pointer, eventLens *C.uint32_t, nsegs *C.int32_t, segs *C.strata_seg, timeoutMs C.int64_t,
	skipPresent C.int, status *C.int32_t, reasons *C.char, reasonsLen C.size_t, errBuf *C.char, errLen C.size_t) (rc C.int) {
	defer recovered(&rc, errBuf, errLen)
	s, bufs, err := batch(h, n, nsegs, segs)
	if err != nil {
		return fail(fmt.Errorf("put: %w", err), errBuf, errLen)
	}
	if n <= 0 {
		return 0
	}
	ks, ps := keysOf(int(n), keys), keysOf(int(n), parents)
	hp := unsafe.Slice((*uint8)(unsafe.Pointer(hasParent)), int(n))
	ds := unsafe.Slice((*uint32)(unsafe.Pointer(depth)), int(n))
	cds := unsafe.Slice((*uint32)(unsafe.Pointer(chainDepth)), int(n))
	cs := unsafe.Slice((*float64)(unsafe.Pointer(cost)), int(n))
	st := unsafe.Slice((*int32)(unsafe.Pointer(status)), int(n))
	pages := make([]client.Page, n)
	for i := range pages {
		pages[i] = client.Page{Key: ks[i], Parent: ps[i], HasParent: hp[i] != 0, Depth: ds[i], ChainDepth: cds[i],
			CostHint: cs[i], Data: bufs.whole[i]}
	}
	if err := eventsOf(pages, events, eventLens); err != nil {
		return fail(fmt.Errorf("put: %w", err), errBuf, errLen)
	}
	ctx, cancel := timeoutCtx(timeoutMs)
	defer cancel()
	why := make([]string, n)
	put := func(ctx context.Context, idx []int) error {
		sub := make([]client.Page, len(idx))
		for j, i := range idx {
			sub[j] = pages[i]
		}
		res, err := s.ns.Put(ctx, sub)
		for j, i := range idx {
			if j < len(res) {
				st[i], why[i] = int32(res[j].Status), res[j].Reason
			}
		}
		return err
	}
	// skipPresent: the pages strata has already are answered EXISTS
	// unread and unsent, from a lookup in this same call (one GIL
	// hand-back for the caller instead of two). A lookup that fails skips
	// nothing: the put answers for every page.
	present := make([]bool, n)
	if skipPresent != 0 {
		if res, err := s.ns.Lookup(ctx, ks, false, 0); err == nil {
			for i, p := range res.Present {
				if i < len(present) && p {
					present[i], st[i] = true, int32(client.Exists)
				}
			}
		}
	}
	var errs []error
	var whole []int
	for i, b := range bufs.whole {
		if b != nil && !present[i] {
			whole = append(whole, i)
		}
	}
	if len(whole) > 0 {
		errs = append(errs, put(ctx, whole))
	}
	split := slices.DeleteFunc(slices.Clone(bufs.split), func(i int) bool { return present[i] })
	if len(split) > 0 {
		slab := s.slab()
		defer s.stage.Put(slab)
		pb := s.ns.PageBytes()
		per := s.perRound()
		for start := 0; start < len(split) && ctx.Err() == nil; start += per {
			round := split[start:min(len(split), start+per)]
			pcs := client.NewPieces()
			for j, i := range round {
				if l := piecesLen(bufs.pieces[i]); l != pb {
					return fail(fmt.Errorf("put page %d: %d bytes, namespace pages are %d: %w", i, l, pb, client.ErrInvalid),
						errBuf, errLen)
				}
				pages[i].Data = (*slab)[j*pb : (j+1)*pb]
				pcs.Add(pages[i].Data, bufs.pieces[i])
			}
			errs = append(errs, put(client.WithPieces(ctx, pcs), round))
		}
	}
	for i := range why {
		why[i] = strings.ReplaceAll(why[i], "\n", " ")
	}
	writeString(strings.Join(why, "\n"), reasons, reasonsLen)
	if err := errors.Join(errs...); err != nil {
		return fail(err, errBuf, errLen)
	}
	return 0
}

//export strata_lookup
func strata_lookup(h C.uint64_t, n C.int, keys unsafe.Pointer, timeoutMs C.int64_t, present *C.uint8_t, hit *C.int,
	errBuf *C.char, errLen C.size_t) (rc C.int) {
	defer recovered(&rc, errBuf, errLen)
	s := cgo.Handle(h).Value().(*nsState)
	if n <= 0 {
		return 0
	}
	ctx, cancel := timeoutCtx(timeoutMs)
	defer cancel()
	res, err := s.ns.Lookup(ctx, keysOf(int(n), keys), false, 0)
	out := unsafe.Slice((*uint8)(unsafe.Pointer(present)), int(n))
	for i, p := range res.Present {
		if i < len(out) {
			out[i] = b2u(p)
		}
	}
	*hit = C.int(res.HitPrefix)
	if err != nil {
		return fail(err, errBuf, errLen)
	}
	return 0
}

// stats are the client's counters native.py reports.
type stats struct {
	ShmActive        bool  `json:"shm_active"`
	RawActive        bool  `json:"raw_active"`
	ChecksumFailures int64 `json:"checksum_failures"`
	AllFailed        int64 `json:"all_failed"`
}

//export strata_stats
func strata_stats(h C.uint64_t, buf *C.char, n C.size_t) {
	c := cgo.Handle(h).Value().(*client.Client)
	b, _ := json.Marshal(stats{ShmActive: c.ShmActive(), RawActive: c.RawActive(),
		ChecksumFailures: c.ChecksumFailures(), AllFailed: c.AllFailed()})
	writeString(string(b), buf, n)
}
