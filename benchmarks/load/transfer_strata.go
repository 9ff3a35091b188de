package load

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/namespace"
)

// A strata transfer runs in three processes besides the load generator's:
// the node (as the strata system's), a producer and a consumer, each the
// load generator re-executed (ServeChild) with a client of its own per
// stream. The load generator drives the two over their standard input, one
// command a line, as it drives pydriver.py:
//
//	producer: produce ROOM N S  puts the prompt of transfer N over S
//	                            streams, opens ROOM and publishes it;
//	                            answers "ok T0 T1 T2": puts started,
//	                            publish started, publish returned
//	          drop N            deletes transfer N's pages
//	consumer: consume ROOM N S  awaits ROOM, gets its pages over S streams
//	                            into its buffers, checks each is transfer
//	                            N's, acknowledges; answers "ok T3 T4 T5":
//	                            the grant came, the pages are loaded, the
//	                            ack returned
//
// T0..T5 are the host's clock in Unix nanoseconds. The consumer gets the
// consume command first, so it is usually waiting when the room is
// published, as a decode engine told of the request would be.

// Transfer peer roles, and their environment besides childBytesEnv (the
// prompt's bytes).
const (
	roleProducer     = "producer"
	roleConsumer     = "consumer"
	peerAddrEnv      = "STRATA_LOAD_ADDR"
	peerTransportEnv = "STRATA_LOAD_TRANSPORT"
	peerTokenEnv     = "STRATA_LOAD_TOKEN"
	peerCAEnv        = "STRATA_LOAD_CA"
	peerPageEnv      = "STRATA_LOAD_PAGE_BYTES"
	peerStreamsEnv   = "STRATA_LOAD_STREAMS"
)

// transferPageTokens is the tokens of a page of the transfer's namespace.
const transferPageTokens = 16

// StrataTransfer moves a prompt through a strata node from a producer
// process to a consumer process (the roles above).
type StrataTransfer struct {
	s          *Strata // the node, and the name
	prod, cons *pyProc
}

// StartStrataTransfer starts the node as StartStrata does (cfg), then the
// producer and consumer for p. The node must let the tenant pin a
// transfer's bytes: its default quota is an eighth of its host tier
// (node.Config.Transfer).
func StartStrataTransfer(ctx context.Context, cfg StrataConfig, p TransferParams) (_ *StrataTransfer, err error) {
	s, err := StartStrata(ctx, cfg)
	if err != nil {
		return nil, err
	}
	t := &StrataTransfer{s: s}
	defer func() {
		if err != nil {
			err = errors.Join(err, t.Close())
		}
	}()
	env := []string{peerAddrEnv + "=" + s.cfg.Addr, peerTransportEnv + "=" + s.cfg.Transport, peerTokenEnv + "=" + s.cfg.Token,
		fmt.Sprintf("%s=%d", childBytesEnv, p.Bytes()), fmt.Sprintf("%s=%d", peerPageEnv, p.PageBytes),
		fmt.Sprintf("%s=%d", peerStreamsEnv, p.Streams)}
	if s.cfg.tls != nil {
		env = append(env, peerCAEnv+"="+s.cfg.tls.ca)
	}
	if t.prod, err = startPeer(ctx, roleProducer, env); err != nil {
		return t, err
	}
	t.cons, err = startPeer(ctx, roleConsumer, env)
	return t, err
}

// startPeer re-executes this binary as a transfer peer.
func startPeer(ctx context.Context, role string, env []string) (*pyProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(append(os.Environ(), childEnv+"="+role), env...)
	p, err := startLineProc(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("the transfer's %s: %w", role, err)
	}
	return p, nil
}

// Name is the strata system's (Strata.Name): strata, strata-shm, ...
func (t *StrataTransfer) Name() string { return t.s.Name() }

// Close ends the peers, then the node.
func (t *StrataTransfer) Close() error {
	var err error
	for _, p := range []*pyProc{t.prod, t.cons} {
		if p != nil {
			err = errors.Join(err, p.close())
		}
	}
	return errors.Join(err, t.s.Close())
}

// Move makes transfer n: the consumer awaits its room while the producer
// puts and publishes; then the producer drops the pages.
func (t *StrataTransfer) Move(_ context.Context, n, streams int) (Timing, error) {
	room := fmt.Sprintf("load-%d-%d", os.Getpid(), n)
	type answer struct {
		at  []int64
		err error
	}
	consumed := make(chan answer, 1)
	go func() {
		at, err := askTimes(t.cons, "consume %s %d %d", room, n, streams)
		consumed <- answer{at, err}
	}()
	prodAt, err := askTimes(t.prod, "produce %s %d %d", room, n, streams)
	if err != nil {
		err = fmt.Errorf("producer: %w", err)
	}
	cons := <-consumed // a consumer whose producer failed waits out its await
	if cons.err != nil {
		err = errors.Join(err, fmt.Errorf("consumer: %w", cons.err))
	}
	if err != nil {
		return Timing{}, err
	}
	if err := t.prod.call("drop %d", n); err != nil {
		return Timing{}, fmt.Errorf("producer dropping the pages: %w", err)
	}
	at := func(i int) time.Time {
		if i < 3 {
			return time.Unix(0, prodAt[i])
		}
		return time.Unix(0, cons.at[i-3])
	}
	tm := Timing{Put: at(1).Sub(at(0)), Publish: at(2).Sub(at(1)), Loaded: at(4).Sub(at(1)), Ack: at(5).Sub(at(4))}
	if at(3).Before(at(1)) {
		return tm, fmt.Errorf("the consumer had the grant %v before the publish started: the processes' clocks disagree", at(1).Sub(at(3)))
	}
	return tm, nil
}

// askTimes sends a command and reads the three times it answers.
func askTimes(p *pyProc, format string, a ...any) ([]int64, error) {
	out, err := p.ask(format, a...)
	if err != nil {
		return nil, err
	}
	f := strings.Fields(out)
	at := make([]int64, len(f))
	for i, s := range f {
		if at[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			break
		}
	}
	if err != nil || len(at) != 3 {
		return nil, fmt.Errorf("answered %q, want three times", out)
	}
	return at, nil
}

// peer is a transfer peer's process: a client (and the namespace opened
// on it) per stream, and the prompt's pages: the producer's KV or the
// consumer's buffers.
type peer struct {
	cs    []*client.Client
	nss   []*client.Namespace
	pages [][]byte
	keys  map[int][]namespace.Key // the producer's transfers not dropped yet
}

// servePeer serves role's commands on standard input until it closes.
func servePeer(role string, bytes int) error {
	ctx := context.Background()
	p, err := openPeer(ctx, role, bytes)
	if err != nil {
		return err
	}
	defer func() { _ = closeAll(p.cs) }()
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		out, err := p.serve(ctx, role, strings.Fields(in.Text()))
		if err != nil {
			fmt.Printf("err %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		fmt.Println(strings.TrimSpace("ok " + out))
	}
	return in.Err()
}

// openPeer dials a client per stream with the transport's options and
// opens the transfer's namespace on each.
func openPeer(ctx context.Context, role string, bytes int) (*peer, error) {
	pageBytes, err1 := strconv.Atoi(os.Getenv(peerPageEnv))
	streams, err2 := strconv.Atoi(os.Getenv(peerStreamsEnv))
	if err := errors.Join(err1, err2); err != nil || pageBytes <= 0 || streams <= 0 || bytes%pageBytes != 0 {
		return nil, fmt.Errorf("transfer peer: pages of %d bytes over %d streams for %d bytes: %v", pageBytes, streams, bytes, err)
	}
	cfg := StrataConfig{Transport: os.Getenv(peerTransportEnv), Token: os.Getenv(peerTokenEnv)}
	if ca := os.Getenv(peerCAEnv); ca != "" {
		cfg.tls = &tlsFiles{ca: ca}
	}
	opts, err := clientOptions(cfg)
	if err != nil {
		return nil, err
	}
	// The model's identity: Llama-3-8B's geometry gives 2 MiB pages of 16
	// tokens; PageBytes states the page whatever the run's sizes.
	d := namespace.Descriptor{Tenant: "bench", Model: "meta-llama/Meta-Llama-3-8B", ModelRevision: "1", Engine: "strata-load",
		DType: "bf16", PageTokens: transferPageTokens, PageBytes: uint64(pageBytes)}
	p := &peer{keys: map[int][]namespace.Key{}}
	for range streams {
		c, err := client.Dial(ctx, os.Getenv(peerAddrEnv), opts)
		if err != nil {
			return nil, errors.Join(err, closeAll(p.cs))
		}
		p.cs = append(p.cs, c)
		ns, err := c.Open(ctx, d)
		if err == nil {
			err = checkTransport(cfg.Transport, c)
		}
		if err != nil {
			return nil, errors.Join(err, closeAll(p.cs))
		}
		p.nss = append(p.nss, ns)
	}
	buf := make([]byte, bytes) // the consumer's buffers, touched here, off the clock
	if role == roleProducer {
		buf = RandomBytes(bytes, 7) // the producer's KV
	} else {
		for i := 0; i < len(buf); i += 4096 {
			buf[i] = 1
		}
	}
	p.pages = splitPages(buf, pageBytes)
	return p, nil
}

// checkTransport fails unless c moves pages over the transport asked for.
func checkTransport(transport string, c *client.Client) error {
	switch {
	case transport == "shm" && !c.ShmActive():
		return errors.New("transport shm: the client did not set up shared memory with the node")
	case strings.HasPrefix(transport, "tcp") && !c.RawActive():
		return errors.New("transport tcp: the node does not serve the raw tcp data plane")
	}
	return nil
}

// serve runs one command.
func (p *peer) serve(ctx context.Context, role string, f []string) (string, error) {
	switch {
	case role == roleProducer && len(f) == 2 && f[0] == "drop":
		n, err := strconv.Atoi(f[1])
		if err == nil {
			err = p.drop(ctx, n)
		}
		return "", err
	case len(f) == 4 && (role == roleProducer && f[0] == "produce" || role == roleConsumer && f[0] == "consume"):
		n, err1 := strconv.Atoi(f[2])
		streams, err2 := strconv.Atoi(f[3])
		if err := errors.Join(err1, err2); err != nil {
			return "", err
		}
		var at [3]time.Time
		var err error
		if role == roleProducer {
			at, err = p.produce(ctx, f[1], n, streams)
		} else {
			at, err = p.consume(ctx, f[1], n, streams)
		}
		return fmt.Sprintf("%d %d %d", at[0].UnixNano(), at[1].UnixNano(), at[2].UnixNano()), err
	}
	return "", fmt.Errorf("%s: unknown command %q", role, strings.Join(f, " "))
}

// stamp marks page i of transfer n, in its first 16 bytes.
func stamp(page []byte, n, i int) {
	binary.LittleEndian.PutUint64(page, uint64(n))
	binary.LittleEndian.PutUint64(page[8:], uint64(i))
}

// produce puts transfer n's pages (a fresh prompt: its first token is n),
// over streams streams, then publishes them in room.
func (p *peer) produce(ctx context.Context, room string, n, streams int) (at [3]time.Time, err error) {
	tokens := make([]uint32, len(p.pages)*transferPageTokens)
	for j := range tokens {
		tokens[j] = uint32(j)
	}
	tokens[0] = uint32(n)
	keys := p.nss[0].PageKeys(tokens)
	for i, pg := range p.pages {
		stamp(pg, n, i)
	}
	pages := client.ChainPages(keys, p.pages)
	r, err := p.cs[0].OpenRoom(ctx, room)
	if err != nil {
		return at, err
	}
	p.keys[n] = keys
	at[0] = time.Now()
	err = eachStream(streams, len(pages), func(s, from, to int) error {
		res, err := p.nss[s].Put(ctx, pages[from:to])
		for j, pr := range res {
			if err == nil && pr.Status != client.Committed {
				err = fmt.Errorf("page %d: %v %s", from+j, pr.Status, pr.Reason)
			}
		}
		return err
	})
	at[1] = time.Now()
	if err == nil {
		_, err = p.cs[0].PublishRoom(ctx, r, p.nss[0], keys, len(tokens))
	}
	at[2] = time.Now()
	if err != nil {
		_, aerr := p.cs[0].AbortRoom(ctx, r, client.ProducerFailure, err.Error())
		return at, errors.Join(err, aerr)
	}
	return at, nil
}

// consume awaits room (a minute at most), gets its pages over streams
// streams into the peer's buffers, checks that each is page i of
// transfer n, and acknowledges. A failure after the grant aborts the
// attempt and acknowledges that the consumer stopped reading.
func (p *peer) consume(ctx context.Context, room string, n, streams int) (at [3]time.Time, err error) {
	actx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	g, err := p.cs[0].AwaitRoom(actx, room, 0, p.nss[0])
	if err != nil {
		return at, err
	}
	at[0] = time.Now()
	if len(g.Keys) != len(p.pages) {
		err = fmt.Errorf("the grant holds %d pages, want %d", len(g.Keys), len(p.pages))
	} else {
		err = eachStream(streams, len(g.Keys), func(s, from, to int) error {
			found, err := p.nss[s].Get(ctx, g.Keys[from:to], p.pages[from:to], nil)
			for j, ok := range found {
				if err == nil && !ok {
					err = fmt.Errorf("page %d not found", from+j)
				}
			}
			return err
		})
	}
	at[1] = time.Now()
	for i, pg := range p.pages {
		if gn, gi := binary.LittleEndian.Uint64(pg), binary.LittleEndian.Uint64(pg[8:]); err == nil && (gn != uint64(n) || gi != uint64(i)) {
			err = fmt.Errorf("buffer %d holds page %d of transfer %d, want page %d of %d", i, gi, gn, i, n)
		}
	}
	if err != nil {
		_, aerr := p.cs[0].AbortRoom(ctx, g.Room, client.ConsumerFailure, err.Error())
		return at, errors.Join(err, aerr, p.cs[0].AckRoom(ctx, g.Room))
	}
	err = p.cs[0].AckRoom(ctx, g.Room)
	at[2] = time.Now()
	return at, err
}

// drop deletes transfer n's pages.
func (p *peer) drop(ctx context.Context, n int) error {
	keys, ok := p.keys[n]
	if !ok {
		return fmt.Errorf("no transfer %d", n)
	}
	delete(p.keys, n)
	deleted, err := p.nss[0].Delete(ctx, keys)
	if err == nil && deleted != len(keys) {
		err = fmt.Errorf("deleted %d of transfer %d's %d pages", deleted, n, len(keys))
	}
	return err
}
