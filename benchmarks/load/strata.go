package load

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/testcerts"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
)

// StrataConfig configures the strata system. Zero fields take their
// defaults.
type StrataConfig struct {
	// Addr is the node to measure. Default: a node started as a process of
	// its own (child.go; embedded etcd, host tier of HostBytes, gRPC on a
	// free loopback port), or in this process with InProcess.
	Addr string
	// InProcess starts the node in this process.
	InProcess bool
	// HostBytes is the in-process node's host tier. Default 1 GiB.
	HostBytes int64
	// Token is the tenant token, for a node that wants one. Default none.
	Token string
	// Tenant owns the load's namespaces. Default "bench".
	Tenant string
	// Transport is how the client moves pages: "tcp" (the node's raw tcp
	// data plane; "tcp-noverify" skips its checksum check,
	// client.Options.RawSkipVerify; "tcp-nopoll" waits for answers
	// without polling, client.Options.RawPoll < 0), "grpc" (gRPC streams), "shm" (shared memory with a node
	// on this host) or "auto" (the client's choice); "tcp-tls" and
	// "grpc-tls" are tcp and grpc with TLS: the node started here serves
	// TLS only, with a certificate of a CA made at start (testcerts), and
	// the client verifies it. Default "tcp".
	Transport string
	// NodeProcs is the GOMAXPROCS of the node's process (0: Go's default,
	// every CPU); only for a node started as a process of its own.
	NodeProcs int
	// NodeBinary, if set, is a stratad binary the node's process runs
	// instead of this binary's own node (child.go, startStratad): an
	// older build measured with this build's client, beside this build's
	// node (strata-load --old-node). Not with Addr or InProcess. Default
	// "": this binary's node.
	NodeBinary string
	// Label, if set, names the system strata-<label> (Name). Default none.
	Label string
	// Events makes the node publish the tenant's KV event stream (node
	// Config.Events), which one subscriber of this process drains while
	// the system runs (events.go). Only for a node this starts.
	Events bool

	tls *tlsFiles // set by StartStrata for a -tls transport
}

// tlsFiles are a TLS system's CA and node certificate, in a temporary
// directory.
type tlsFiles struct {
	dir, ca, cert, key string
}

// makeTLS makes a CA and a node certificate for 127.0.0.1.
func makeTLS() (*tlsFiles, error) {
	dir, err := os.MkdirTemp("", "strata-load-tls-")
	if err != nil {
		return nil, err
	}
	ca, err := testcerts.Make(dir, "strata-load")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p, err := ca.IssueErr("node")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &tlsFiles{dir: dir, ca: ca.CAFile, cert: p.Cert, key: p.Key}, nil
}

// Strata measures a strata node through the Go client, one client (one
// connection) per worker. A put publishes one fresh page (the pages a case
// wrote are deleted after it, off the clock); a get reads one page of the
// working set, no lease, into a reused buffer, verifying its checksum; a
// lookup asks about LookupKeys keys of the working set, no lease.
type Strata struct {
	cfg     StrataConfig
	node    *node.Node // the in-process node, or
	child   *child     // the node's process, or neither for an external node
	dir     string
	clients []*client.Client
	drain   *eventDrain // the event stream's subscriber (Events)
}

// StartStrata starts the in-process node when cfg.Addr is empty.
func StartStrata(ctx context.Context, cfg StrataConfig) (*Strata, error) {
	if cfg.HostBytes <= 0 {
		cfg.HostBytes = 1 << 30
	}
	if cfg.Tenant == "" {
		cfg.Tenant = "bench"
	}
	if cfg.Transport == "" {
		cfg.Transport = "tcp"
	}
	if _, err := clientOptions(cfg); err != nil {
		return nil, err
	}
	if cfg.NodeProcs < 0 || cfg.NodeProcs > 0 && (cfg.Addr != "" || cfg.InProcess) {
		return nil, fmt.Errorf("node GOMAXPROCS %d: only for the node started as a process of its own", cfg.NodeProcs)
	}
	if cfg.Events && (cfg.Addr != "" || cfg.NodeBinary != "") {
		return nil, errors.New("events: only for the node strata-load starts from its own build")
	}
	if cfg.NodeBinary != "" && (cfg.Addr != "" || cfg.InProcess) {
		return nil, fmt.Errorf("node binary %s: only for the node started as a process of its own", cfg.NodeBinary)
	}
	if strings.HasSuffix(cfg.Transport, "-tls") {
		if cfg.Addr != "" {
			return nil, fmt.Errorf("transport %s: only with the node strata-load starts (no --addr)", cfg.Transport)
		}
		var err error
		if cfg.tls, err = makeTLS(); err != nil {
			return nil, err
		}
	}
	s := &Strata{cfg: cfg}
	if cfg.Addr != "" {
		return s, nil
	}
	if !cfg.InProcess {
		var env []string
		if cfg.NodeProcs > 0 {
			env = append(env, fmt.Sprintf("GOMAXPROCS=%d", cfg.NodeProcs))
		}
		var c *child
		var err error
		if cfg.NodeBinary != "" {
			c, err = startStratad(ctx, cfg.NodeBinary, cfg.HostBytes, cfg.tls, env...)
		} else {
			env = append(env, fmt.Sprintf("%s=%d", childBytesEnv, cfg.HostBytes))
			if cfg.tls != nil {
				env = append(env, childTLSEnv+"="+cfg.tls.cert+","+cfg.tls.key)
			}
			if cfg.Events {
				env = append(env, childEventsEnv+"="+cfg.Tenant)
			}
			c, err = startChild(ctx, roleNode, env...)
		}
		if err != nil {
			return nil, err
		}
		s.child, s.cfg.Addr = c, c.addr
		if a, pub, ok := strings.Cut(c.addr, " events "); ok {
			s.cfg.Addr = a
			if s.drain, err = drainEvents(ctx, pub, cfg.Tenant); err != nil {
				s.Close()
				return nil, err
			}
		}
		return s, nil
	}
	dir, err := os.MkdirTemp("", "strata-load-node-")
	if err != nil {
		return nil, err
	}
	s.dir = dir
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ncfg := node.Config{Listen: "127.0.0.1:0", DataDir: dir, EmbeddedEtcdURL: "http://127.0.0.1:0", HostBytes: cfg.HostBytes}
	if cfg.tls != nil {
		ncfg.TLSCert, ncfg.TLSKey = cfg.tls.cert, cfg.tls.key
	}
	if cfg.Events {
		ncfg.Events = eventsConfig(cfg.Tenant)
	}
	n, err := node.Start(sctx, ncfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting node: %w", err)
	}
	s.node, s.cfg.Addr = n, n.Addr()
	if cfg.Events {
		pub, _ := n.EventsAddrs(cfg.Tenant)
		if s.drain, err = drainEvents(ctx, pub, cfg.Tenant); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// clientOptions maps the transport to client options: "tcp" turns the
// client's shared-memory path off (leaving the raw tcp data plane),
// "grpc" turns both off, "auto" and "shm" leave the choice to the client
// (which uses shared memory with a node on this host); Prepare then checks
// that a "shm" or "tcp" client did take its path.
func clientOptions(cfg StrataConfig) (client.Options, error) {
	// A node's part of a call is bounded by the call's own context, as
	// with one node there is nowhere else to go: warming the working set
	// moves far more than NodeTimeout's default covers.
	// The buffer pool is installed as the client did on import before it
	// became opt-in (a 1,000-key lookup clears a 64 KiB buffer, not 1 MiB).
	opts := client.Options{Token: cfg.Token, NodeTimeout: time.Minute, InstallBufferPool: true}
	switch cfg.Transport {
	case "tcp", "tcp-tls":
		opts.NoShm = true
	case "tcp-noverify":
		opts.NoShm, opts.RawSkipVerify = true, true
	case "tcp-nopoll":
		opts.NoShm, opts.RawPoll = true, -1
	case "grpc", "grpc-tls":
		opts.NoShm, opts.NoRaw = true, true
	case "auto", "shm":
	default:
		return opts, fmt.Errorf("unknown transport %q (tcp, tcp-noverify, tcp-nopoll, grpc, shm, auto, tcp-tls, grpc-tls)", cfg.Transport)
	}
	if cfg.tls != nil {
		opts.CA = cfg.tls.ca
	}
	return opts, nil
}

// Name is "strata", or "strata-<transport>" for a transport other than
// tcp; with a Label, "strata-<label>" or "strata-<label>-<transport>".
func (s *Strata) Name() string {
	name := "strata"
	if s.cfg.Label != "" {
		name += "-" + s.cfg.Label
	}
	if s.cfg.Transport == "tcp" {
		return name
	}
	return name + "-" + s.cfg.Transport
}

// Close closes the clients and the node this system started.
func (s *Strata) Close() error {
	err := closeAll(s.clients)
	if s.drain != nil {
		err = errors.Join(err, s.drain.Close())
	}
	if s.node != nil {
		err = errors.Join(err, s.node.Close(), os.RemoveAll(s.dir))
	}
	if s.child != nil {
		err = errors.Join(err, s.child.Close())
	}
	if s.cfg.tls != nil {
		err = errors.Join(err, os.RemoveAll(s.cfg.tls.dir))
	}
	return err
}

// ServerCPU is the node process's CPU time: 0 for a node in this process
// (this process's own is counted) or an external one (not known).
func (s *Strata) ServerCPU() time.Duration {
	if s.child == nil {
		return 0
	}
	return s.child.CPUTime()
}

// Prepare opens a namespace of PageBytes pages on every worker's client and
// publishes the working set.
func (s *Strata) Prepare(ctx context.Context, p Params) (Workload, error) {
	opts, err := clientOptions(s.cfg)
	if err != nil {
		return nil, err
	}
	// One client per worker, and one that trims put cases (Trim).
	for len(s.clients) < p.Workers+1 {
		c, err := client.Dial(ctx, s.cfg.Addr, opts)
		if err != nil {
			return nil, err
		}
		s.clients = append(s.clients, c)
	}
	d := namespace.Descriptor{Tenant: s.cfg.Tenant, Model: "strata-load", ModelRevision: "1", Engine: "load",
		DType: "bf16", PageTokens: 16, PageBytes: uint64(p.PageBytes)}
	w := &strataWorkload{p: p, data: RandomBytes(p.PageBytes, 1), putBase: 1 << 40}
	for i := range p.Workers {
		ns, err := s.clients[i].Open(ctx, d)
		if err != nil {
			return nil, fmt.Errorf("opening namespace: %w", err)
		}
		if s.cfg.Transport == "shm" && !s.clients[i].ShmActive() {
			return nil, errors.New("transport shm: the client did not set up shared memory with the node (is it on this host, serving shm?)")
		}
		if strings.HasPrefix(s.cfg.Transport, "tcp") && !s.clients[i].RawActive() {
			return nil, errors.New("transport tcp: the node does not serve the raw tcp data plane (started with --raw-listen off?); use --transport grpc")
		}
		w.nss = append(w.nss, ns)
		bufs := make([][]byte, max(1, p.Batch))
		for k := range bufs {
			bufs[k] = make([]byte, p.PageBytes)
		}
		w.bufs = append(w.bufs, bufs)
		w.batch = append(w.batch, batchScratch{keys: make([]namespace.Key, len(bufs)), pages: make([]client.Page, len(bufs))})
		w.scratch = append(w.scratch, make([]namespace.Key, p.LookupKeys))
	}
	if w.trimNS, err = s.clients[p.Workers].Open(ctx, d); err != nil {
		return nil, fmt.Errorf("opening namespace: %w", err)
	}
	// Through shared memory each client writes pages into its own mapping
	// of the arena, whose first write to each 4 KiB takes a page fault
	// (more CPU than the copy): warm every worker's mapping, as a running
	// engine's would be. Other transports write through the node alone.
	warmers := w.nss[:1]
	if s.cfg.Transport == "shm" {
		warmers = w.nss
	}
	if err := w.warm(ctx, warmers); err != nil {
		return nil, err
	}
	w.keys = make([]namespace.Key, p.Pages)
	for i := range w.keys {
		w.keys[i] = PageKey(w.nss[0].ID(), uint64(i))
	}
	if err := w.putRange(ctx, 0, uint64(p.Pages)); err != nil {
		return nil, err
	}
	return w, nil
}

type strataWorkload struct {
	p       Params
	data    []byte
	nss     []*client.Namespace // one per worker
	keys    []namespace.Key     // the working set
	bufs    [][][]byte          // per worker, Batch page buffers
	batch   []batchScratch      // per worker, a batch's keys and pages
	scratch [][]namespace.Key   // per worker, lookup keys
	putBase uint64              // page number of the next put case's first page
	trimNS  *client.Namespace   // the namespace through a client of its own, for Trim
	trimmed uint64              // puts of this case below it are deleted (Trim)
}

// batchScratch is one worker's keys and pages of a batch.
type batchScratch struct {
	keys  []namespace.Key
	pages []client.Page
}

// Batches is true: a put or get moves Params.Batch pages, one Put or Get.
func (*strataWorkload) Batches() bool { return true }

// PageKey is the key of page number n: a one-page chain from the namespace
// over the tokens (n, n>>32), so every n is a fresh key.
func PageKey(id namespace.ID, n uint64) namespace.Key {
	return namespace.NextKey(namespace.Key(id), []uint32{uint32(n), uint32(n >> 32)})
}

func (*strataWorkload) Supports(Op) bool { return true }

// FreshPuts is true: every put publishes a new page.
func (*strataWorkload) FreshPuts() bool { return true }

func (w *strataWorkload) Do(ctx context.Context, op Op, wk, i int) error {
	ns := w.nss[wk]
	switch op {
	case Get:
		b := w.batch[wk]
		for k := range b.keys {
			b.keys[k] = w.keys[(i*len(b.keys)+k)%w.p.Pages]
		}
		found, err := ns.Get(ctx, b.keys, w.bufs[wk], nil)
		for k := range found {
			if err == nil && !found[k] {
				err = fmt.Errorf("page %d not found", (i*len(b.keys)+k)%w.p.Pages)
			}
		}
		return err
	case Put:
		b := w.batch[wk]
		for k := range b.pages {
			b.pages[k] = client.Page{Key: PageKey(ns.ID(), w.putBase+uint64(i*len(b.pages)+k)), Data: w.data}
		}
		res, err := ns.Put(ctx, b.pages)
		for k := range res {
			switch {
			case err != nil:
			case res[k].Status == client.Exists:
				// No other put uses this key (TestFreshPutsNeverRepeatAKey):
				// the client redid the put on its next plane after the first
				// had published the page and then broken (client.plane).
				err = fmt.Errorf("put of a fresh page answered %v %s: the client's first plane published it and broke, and the next redid it", res[k].Status, res[k].Reason)
			case res[k].Status != client.Committed:
				err = fmt.Errorf("put: %v %s", res[k].Status, res[k].Reason)
			}
		}
		return err
	case Lookup:
		keys := w.scratch[wk]
		for j := range keys {
			keys[j] = w.keys[(i*len(keys)+j)%w.p.Pages]
		}
		res, err := ns.Lookup(ctx, keys, false, 0)
		if err == nil && res.HitPrefix != len(keys) {
			err = fmt.Errorf("lookup: hit prefix %d of %d", res.HitPrefix, len(keys))
		}
		return err
	}
	return fmt.Errorf("strata: no %s", op)
}

// Trim deletes the pages puts [from, to) of this case wrote, through a
// client no worker uses.
func (w *strataWorkload) Trim(ctx context.Context, from, to int) error {
	b := uint64(max(1, w.p.Batch))
	if _, err := DeleteRange(ctx, w.trimNS, w.putBase+uint64(from)*b, w.putBase+uint64(to)*b); err != nil {
		return err
	}
	w.trimmed = uint64(to)
	return nil
}

// After deletes the pages a put case wrote that Trim left, so the next
// case starts from the working set alone.
func (w *strataWorkload) After(ctx context.Context, op Op, n int) error {
	if op != Put || n == 0 {
		return nil
	}
	b := uint64(max(1, w.p.Batch))
	from := w.putBase + min(w.trimmed, uint64(n))*b
	w.putBase += uint64(n) * b
	w.trimmed = 0
	return w.deleteRange(ctx, from, w.putBase)
}

// Close deletes the working set.
func (w *strataWorkload) Close(ctx context.Context) error {
	return w.deleteRange(ctx, 0, uint64(w.p.Pages))
}

// warm puts and deletes, through each of nss in turn, as many fresh pages
// as a put case holds (Params.PutBytes), so that the node's arena memory
// (and each client's mapping of it) is touched before the clock runs: the
// kernel's first touch of memory is not what a put measures.
func (w *strataWorkload) warm(ctx context.Context, nss []*client.Namespace) error {
	n := uint64(w.p.PutBytes / w.p.PageBytes)
	if n == 0 {
		return nil
	}
	for _, ns := range nss {
		from := w.putBase
		w.putBase += n
		if err := PutRange(ctx, ns, from, w.putBase, w.data); err != nil {
			return fmt.Errorf("warming the arena: %w", err)
		}
		if _, err := DeleteRange(ctx, ns, from, w.putBase); err != nil {
			return err
		}
	}
	return nil
}

func (w *strataWorkload) putRange(ctx context.Context, from, to uint64) error {
	return PutRange(ctx, w.nss[0], from, to, w.data)
}

// PutRange publishes pages numbered [from, to) of ns (keys: PageKey), all
// holding data, in batches of at most 64 MiB, and fails unless each is
// stored.
func PutRange(ctx context.Context, ns *client.Namespace, from, to uint64, data []byte) error {
	per := uint64(max(1, (64<<20)/len(data)))
	for start := from; start < to; start += per {
		pages := make([]client.Page, min(per, to-start))
		for j := range pages {
			pages[j] = client.Page{Key: PageKey(ns.ID(), start+uint64(j)), Data: data}
		}
		res, err := ns.Put(ctx, pages)
		if err != nil {
			return fmt.Errorf("putting pages %d..%d: %w", start, start+uint64(len(pages)), err)
		}
		for j, r := range res {
			if !r.Status.Stored() {
				return fmt.Errorf("page %d: %v %s", start+uint64(j), r.Status, r.Reason)
			}
		}
	}
	return nil
}

func (w *strataWorkload) deleteRange(ctx context.Context, from, to uint64) error {
	_, err := DeleteRange(ctx, w.nss[0], from, to)
	return err
}

// DeleteRange deletes pages numbered [from, to) of ns and returns how many
// were there.
func DeleteRange(ctx context.Context, ns *client.Namespace, from, to uint64) (int, error) {
	keys := make([]namespace.Key, 0, to-from)
	for n := from; n < to; n++ {
		keys = append(keys, PageKey(ns.ID(), n))
	}
	deleted, err := ns.Delete(ctx, keys)
	if err != nil {
		return deleted, fmt.Errorf("deleting pages %d..%d: %w", from, to, err)
	}
	return deleted, nil
}
