package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/scrape"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/transfer"
)

// The prefill–decode transfer against real processes (issue 40): stratad
// nodes on an etcd process of their own, with short transfer TTLs, and
// engines that are processes of their own too (TestTransferParty, the test
// binary run again), so that a producer or a consumer can be killed with
// kill -9 halfway through its part. transfer_faults_test.go kills each
// party in turn, transfer_criteria_test.go holds the seed's five criteria
// for a backend adapter and its negative tests, chaos_transfer_test.go
// cuts a consumer off in a network namespace.

// transferDesc is the namespace producer and consumer share: 16 KiB pages.
var transferDesc = namespace.Descriptor{Tenant: "xfer", Model: "m", ModelRevision: "r1", Engine: "test",
	DType: "bf16", PageTokens: 16, NumLayers: 2, NumKVHeads: 2, HeadDim: 64}

const (
	// transferPinTTL and transferOpenTTL are the nodes' --transfer-pin-ttl
	// and --transfer-open-ttl: short, so that an expiry is seconds away.
	transferPinTTL  = 3 * time.Second
	transferOpenTTL = 3 * time.Second
	// transferSweep is how often a node sweeps its rooms (node.sweepEvery):
	// an attempt expires within it after its TTL.
	transferSweep = time.Second
	// transferSlack is what an expiry may take past TTL and sweep on a
	// loaded machine, a room's status read included.
	transferSlack = 1500 * time.Millisecond
)

// transferNode is one stratad process of a transferCluster.
type transferNode struct {
	dir   string
	p     *testnode.Process
	admin pb.AdminClient
}

// transferCluster is stratad processes (SSD tiers, so that a node killed
// with kill -9 keeps its pages) on an etcd process.
type transferCluster struct {
	bin, etcd string
	extra     []string // more flags for every node
	nodes     []*transferNode
}

// startTransferCluster starts an etcd process and n nodes on it, with the
// short transfer TTLs and extra flags; the test is skipped in -short mode.
func startTransferCluster(t *testing.T, n int, extra ...string) *transferCluster {
	t.Helper()
	cl := &transferCluster{bin: buildStratad(t), etcd: freeEtcdURL(t), extra: extra}
	startEtcd(t, t.TempDir(), cl.etcd)
	for i := range n {
		cl.nodes = append(cl.nodes, &transferNode{dir: t.TempDir()})
		cl.start(t, i)
	}
	return cl
}

// start starts node i on its data directory (again, after a kill).
func (cl *transferCluster) start(t *testing.T, i int) {
	t.Helper()
	n := cl.nodes[i]
	args := append([]string{"--data-dir", n.dir, "--listen", "127.0.0.1:0", "--embedded-etcd-url", "http://127.0.0.1:0",
		"--transfer-pin-ttl", transferPinTTL.String(), "--transfer-open-ttl", transferOpenTTL.String()},
		append(clusterNodeArgs(cl.etcd), cl.extra...)...)
	n.p = testnode.Run(t, cl.bin, args...)
	n.admin = pb.NewAdminClient(testnode.Dial(t, n.p.Addr))
}

// kill kills node i with SIGKILL and reaps it.
func (cl *transferCluster) kill(i int) {
	cl.nodes[i].p.Cmd.Process.Signal(syscall.SIGKILL)
	cl.nodes[i].p.Cmd.Wait()
	cl.nodes[i].p = nil
}

// addrs is the gRPC addresses of the nodes that run.
func (cl *transferCluster) addrs() []string {
	var out []string
	for _, n := range cl.nodes {
		if n.p != nil {
			out = append(out, n.p.Addr)
		}
	}
	return out
}

// dial returns a client of the running nodes, first asking node i, that
// sees every running node alive, and its namespace d.
func (cl *transferCluster) dial(t *testing.T, i int, d namespace.Descriptor) (*client.Client, *client.Namespace) {
	t.Helper()
	first := cl.nodes[i].p.Addr
	var seeds []string
	for _, a := range cl.addrs() {
		if a != first {
			seeds = append(seeds, a)
		}
	}
	return dialOpen(t, t.Context(), first, client.Options{Seeds: seeds, NodeTimeout: 2 * time.Second}, len(seeds)+1, d)
}

// transferPair is a producer's and a consumer's client on a cluster.
type transferPair struct {
	cl         *transferCluster
	prod, cons *client.Client
	pns, cns   *client.Namespace
}

// startTransferPair starts a cluster of three nodes and dials a producer
// (first asking node 0) and a consumer (node 1).
func startTransferPair(t *testing.T) *transferPair {
	t.Helper()
	x := &transferPair{cl: startTransferCluster(t, 3)}
	x.prod, x.pns = x.cl.dial(t, 0, transferDesc)
	x.cons, x.cns = x.cl.dial(t, 1, transferDesc)
	return x
}

// leases is the leases and transfer pins the running nodes hold, each
// node's in order (0 for a node that does not run).
func (cl *transferCluster) leases(t *testing.T) []int {
	t.Helper()
	out := make([]int, len(cl.nodes))
	for i, n := range cl.nodes {
		if n.p == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		info, err := n.admin.NodeInfo(ctx, &pb.NodeInfoRequest{})
		cancel()
		if err != nil {
			t.Fatalf("node info of %s: %v", n.p.Addr, err)
		}
		out[i] = int(info.GetLeasesActive())
	}
	return out
}

// metric sums a metric of the running nodes' /metrics.
func (cl *transferCluster) metric(t *testing.T, name string, with ...string) float64 {
	t.Helper()
	var sum float64
	for _, n := range cl.nodes {
		if n.p != nil {
			sum += scrape.Sum(scrape.Metrics(t, n.p.Admin), name, with...)
		}
	}
	return sum
}

// waitReleased waits until no running node holds a lease or a pin and
// no room pins a byte: nothing a transfer took is left.
func (cl *transferCluster) waitReleased(t *testing.T, what string) {
	t.Helper()
	var leases []int
	var pinned float64
	if !poll.Within(10*time.Second, 20*time.Millisecond, func() bool {
		leases, pinned = cl.leases(t), cl.metric(t, "strata_room_pinned_bytes")
		return sum(leases) == 0 && pinned == 0
	}) {
		t.Fatalf("%s: the nodes hold leases %v and rooms pin %v bytes, want none", what, leases, pinned)
	}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// nodeOf is the index of the node that owns key in c's view.
func (cl *transferCluster) nodeOf(t *testing.T, c *client.Client, key namespace.Key) int {
	t.Helper()
	id := ownerIDs(t, c.Members(), []namespace.Key{key})[0]
	for _, m := range c.Members() {
		if m.ID != id {
			continue
		}
		for i, n := range cl.nodes {
			if n.p != nil && n.p.Addr == m.Address {
				return i
			}
		}
	}
	t.Fatalf("the owner %s of key %x is no running node: %+v", id, key[:6], c.Members())
	return -1
}

// roomOn is a room named prefix-N whose record node i keeps (it owns the
// room's key).
func (cl *transferCluster) roomOn(t *testing.T, c *client.Client, prefix string, i int) string {
	t.Helper()
	for j := range 1000 {
		room := fmt.Sprintf("%s-%d", prefix, j)
		if cl.nodeOf(t, c, transfer.RoomKey(room)) == i {
			return room
		}
	}
	t.Fatalf("no room %s-N of 1000 on node %d", prefix, i)
	return ""
}

// roomState is the room's current attempt and state.
func roomState(t *testing.T, c *client.Client, room string) *client.RoomInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	info, err := c.RoomStatus(ctx, room)
	if err != nil {
		t.Fatalf("status of room %s: %v", room, err)
	}
	return info
}

// putPages puts the chain of pages seed names (clusterPages) and fails t
// unless each is stored.
func putPages(t *testing.T, ns *client.Namespace, seed uint32, pages int) []namespace.Key {
	t.Helper()
	keys, data := clusterPages(ns, seed, pages)
	if err := putChain(t.Context(), ns, keys, data); err != nil {
		t.Fatal(err)
	}
	return keys
}

func putChain(ctx context.Context, ns *client.Namespace, keys []namespace.Key, data [][]byte) error {
	res, err := ns.Put(ctx, client.ChainPages(keys, data))
	if err != nil {
		return err
	}
	for i, r := range res {
		if !r.Status.Stored() {
			return fmt.Errorf("page %d of %d not stored: %v %s", i, len(keys), r.Status, r.Reason)
		}
	}
	return nil
}

// loaded gets keys into fresh buffers and counts the pages found with the
// bytes testnode.PageOf gives them; a page with other bytes fails t.
func loaded(t *testing.T, ns *client.Namespace, keys []namespace.Key) (int, error) {
	n, err := loadPages(t.Context(), ns, keys)
	if errors.Is(err, errWrongBytes) {
		t.Fatal(err)
	}
	return n, err
}

var errWrongBytes = errors.New("page served with wrong bytes")

func loadPages(ctx context.Context, ns *client.Namespace, keys []namespace.Key) (int, error) {
	bufs := pageBufs(ns, len(keys))
	found, err := ns.Get(ctx, keys, bufs, nil)
	n := 0
	for i, k := range keys {
		if i < len(found) && found[i] {
			if !exact(k, bufs[i]) {
				return n, fmt.Errorf("page %d (%x): %w", i, k[:6], errWrongBytes)
			}
			n++
		}
	}
	return n, err
}

// The party process: an engine, producer or consumer, that the test drives
// with one command a line on its stdin and that answers each with one line
// on its stdout, so that it can be killed with kill -9 between any two.
const (
	envPartySeeds = "STRATA_TEST_PARTY_SEEDS" // the nodes' gRPC addresses, comma-separated
	envPartyAlive = "STRATA_TEST_PARTY_ALIVE" // how many alive members to wait for
)

// TestTransferParty is not a test: run as a child process (startParty) it
// is an engine's end of a transfer, with a client of its own (no shared
// memory), driven by these commands:
//
//	open ROOM              OpenRoom                → ok attempt=N
//	put SEED PAGES         put clusterPages' chain → ok pages=N
//	await ROOM TIMEOUT     AwaitRoom, any attempt  → ok attempt=N keys=N
//	load N                 get the first N keys the await granted, checked → ok loaded=N
//	ack                    AckRoom of the grant    → ok
//
// Each answer carries ms=, the call's time; a failure answers
// "err CLASS ms=N: error" (partyClass).
func TestTransferParty(t *testing.T) {
	seeds := os.Getenv(envPartySeeds)
	if seeds == "" {
		t.Skip("runs only as a party process of the transfer tests")
	}
	addrs := strings.Split(seeds, ",")
	alive, _ := strconv.Atoi(os.Getenv(envPartyAlive))
	c, ns := dialOpen(t, t.Context(), addrs[0], client.Options{Seeds: addrs[1:], NoShm: true, NodeTimeout: 2 * time.Second}, alive, transferDesc)
	p := &partyEngine{c: c, ns: ns}
	fmt.Println("party ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		began := time.Now()
		out, err := p.do(t.Context(), strings.Fields(sc.Text()))
		ms := time.Since(began).Milliseconds()
		if err != nil {
			fmt.Printf("err %s ms=%d: %v\n", partyClass(err), ms, err)
		} else {
			fmt.Printf("ok ms=%d %s\n", ms, out)
		}
	}
}

// partyEngine is the party process's state: its client and the grant of
// its last await.
type partyEngine struct {
	c     *client.Client
	ns    *client.Namespace
	grant client.Grant
}

func (p *partyEngine) do(ctx context.Context, cmd []string) (string, error) {
	arg := func(i int) int {
		if i >= len(cmd) {
			return 0
		}
		n, _ := strconv.Atoi(cmd[i])
		return n
	}
	if len(cmd) == 0 {
		return "", errors.New("no command")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	switch cmd[0] {
	case "open":
		r, err := p.c.OpenRoom(ctx, cmd[1])
		return fmt.Sprintf("attempt=%d", r.Attempt), err
	case "put":
		keys, data := clusterPages(p.ns, uint32(arg(1)), arg(2))
		return fmt.Sprintf("pages=%d", len(keys)), putChain(ctx, p.ns, keys, data)
	case "await":
		d, err := time.ParseDuration(cmd[2])
		if err != nil {
			return "", err
		}
		actx, acancel := context.WithTimeout(ctx, d)
		defer acancel()
		g, err := p.c.AwaitRoom(actx, cmd[1], 0, p.ns)
		p.grant = g
		return fmt.Sprintf("attempt=%d keys=%d", g.Room.Attempt, len(g.Keys)), err
	case "load":
		n, err := loadPages(ctx, p.ns, p.grant.Keys[:min(arg(1), len(p.grant.Keys))])
		return fmt.Sprintf("loaded=%d", n), err
	case "ack":
		return "", p.c.AckRoom(ctx, p.grant.Room)
	}
	return "", fmt.Errorf("unknown command %q", cmd[0])
}

// partyClasses name the errors a party's answer tells apart.
var partyClasses = []struct {
	name string
	err  error
}{
	{"unavailable", client.ErrUnavailable}, {"expired", client.ErrTransferExpired}, {"aborted", client.ErrTransferAborted},
	{"stale", client.ErrStaleAttempt}, {"busy", client.ErrRoomBusy}, {"mismatch", client.ErrNamespaceMismatch},
	{"state", client.ErrTransferState}, {"deadline", context.DeadlineExceeded},
}

// partyClass names err for the party's answer: the first of partyClasses
// it is, "deadline" for a gRPC deadline too, else "other".
func partyClass(err error) string {
	for _, c := range partyClasses {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	if status.Code(err) == codes.DeadlineExceeded {
		return "deadline"
	}
	return "other"
}

// party is a running party process.
type party struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan string
	stderr bytes.Buffer // read once the process is reaped
	killed bool
}

// partyAnswer is a party's answer to a command.
type partyAnswer struct {
	ok    bool
	class string // of a failure: partyClasses' names
	ms    int    // the call's time in the party
	line  string
}

// startParty runs a party process (in network namespace netns, unless
// "") whose client knows the nodes at seeds and waits for alive of them
// alive; the test's cleanup kills it.
func startParty(t *testing.T, netns string, seeds []string, alive int) *party {
	t.Helper()
	args := []string{"-test.run=^TestTransferParty$", "-test.count=1"}
	cmd := exec.Command(os.Args[0], args...)
	if netns != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", netns, os.Args[0]}, args...)...)
	}
	// TMPDIR: the directory its TestMain makes, which a kill -9 leaves, goes with the test's.
	cmd.Env = append(os.Environ(), envPartySeeds+"="+strings.Join(seeds, ","), envPartyAlive+"="+strconv.Itoa(alive),
		"TMPDIR="+t.TempDir())
	p := &party{t: t, cmd: cmd, lines: make(chan string, 64)}
	cmd.Stderr = &p.stderr
	var err error
	if p.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("party %d's stderr:\n%s", cmd.Process.Pid, p.stderr.String())
		}
	})
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	p.next("party ready", time.Minute)
	return p
}

// next returns the party's next line that starts with prefix; the lines
// before it (the test framework's) are logged.
func (p *party) next(prefix string, within time.Duration) string {
	p.t.Helper()
	timeout := time.After(within)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("party %d ended before %q", p.cmd.Process.Pid, prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
			p.t.Logf("party %d: %s", p.cmd.Process.Pid, line)
		case <-timeout:
			p.t.Fatalf("party %d said no %q within %v", p.cmd.Process.Pid, prefix, within)
		}
	}
}

// do sends the party a command and returns its answer.
func (p *party) do(cmd string) partyAnswer {
	p.t.Helper()
	p.send(cmd)
	return p.answer()
}

// send sends the party a command; answer takes its answer.
func (p *party) send(cmd string) {
	p.t.Helper()
	if _, err := io.WriteString(p.in, cmd+"\n"); err != nil {
		p.t.Fatalf("party %d: %s: %v", p.cmd.Process.Pid, cmd, err)
	}
}

// answer is the party's answer to the command sent last.
func (p *party) answer() partyAnswer {
	p.t.Helper()
	a := partyAnswer{line: p.next("", time.Minute)}
	for !strings.HasPrefix(a.line, "ok ") && !strings.HasPrefix(a.line, "err ") {
		p.t.Logf("party %d: %s", p.cmd.Process.Pid, a.line)
		a.line = p.next("", time.Minute)
	}
	f := strings.Fields(a.line)
	a.ok = f[0] == "ok"
	if !a.ok {
		a.class = f[1]
		f = f[1:]
	}
	fmt.Sscanf(strings.TrimSuffix(f[1], ":"), "ms=%d", &a.ms)
	return a
}

// must is do for a command that must succeed.
func (p *party) must(cmd string) partyAnswer {
	p.t.Helper()
	a := p.do(cmd)
	if !a.ok {
		p.t.Fatalf("party %d: %s: %s", p.cmd.Process.Pid, cmd, a.line)
	}
	return a
}

// field is an answer's value of key (key=N), or -1.
func (a partyAnswer) field(key string) int64 {
	for _, f := range strings.Fields(a.line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(v, ":"), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// kill kills the party with SIGKILL, as the kernel's OOM killer or a
// crash would end an engine, and reaps it.
func (p *party) kill() {
	if p.killed {
		return
	}
	p.killed = true
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
}
