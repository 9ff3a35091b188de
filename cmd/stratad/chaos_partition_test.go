//go:build chaos

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
)

// The partition experiment. Two network namespaces the test creates,
// joined by a veth pair with private addresses that exist only inside
// them (10.213.0.1 in the first, 10.213.0.2 in the second); nothing is
// added to the host's own network. The test binary runs itself again
// inside the first namespace (TestChaosPartitionInside): etcd, two nodes
// and the client there, the third node in the second namespace. The
// fault sets the second namespace's end of the link down for a few
// seconds (packets to it vanish: a silent partition, not refused
// connections), then up again. Skipped where namespaces cannot be made
// (not root, no CAP_NET_ADMIN, no ip).

const (
	partHostA = "10.213.0.1"
	partHostB = "10.213.0.2"
	partCut   = 5 * time.Second // how long the link stays down
)

// The environment of the inside run.
const (
	envPartNetnsB  = "STRATA_CHAOS_NETNS_B"
	envPartLinkB   = "STRATA_CHAOS_LINK_B"
	envPartStratad = "STRATA_CHAOS_STRATAD"
)

func TestChaosPartition(t *testing.T) { runPartitioned(t, "TestChaosPartitionInside") }

// runPartitioned makes the two network namespaces and their link, and
// runs the test binary's test inside within the first (skipped where
// namespaces cannot be made); the inside test finds the second namespace
// and its end of the link, and the stratad binary, in its environment.
func runPartitioned(t *testing.T, inside string) {
	if os.Geteuid() != 0 {
		t.Skip("a partition needs network namespaces: run as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("a partition needs network namespaces: no ip (iproute2) on PATH")
	}
	bin := buildStratad(t)
	tag := fmt.Sprint(os.Getpid() % 100000)
	nsA, nsB := "strata-chaos-a-"+tag, "strata-chaos-b-"+tag
	linkA, linkB := "sca"+tag, "scb"+tag
	ip := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := ip("netns", "add", nsA); err != nil {
		t.Skipf("cannot create a network namespace (CAP_NET_ADMIN?): %v", err)
	}
	t.Cleanup(func() { ip("netns", "del", nsA) })
	if err := ip("netns", "add", nsB); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ip("netns", "del", nsB) })
	// The pair is made inside nsA with its peer in nsB: it never exists
	// in the host's namespace.
	if err := ip("-n", nsA, "link", "add", linkA, "type", "veth", "peer", "name", linkB, "netns", nsB); err != nil {
		t.Skipf("cannot make a veth pair (CAP_NET_ADMIN?): %v", err)
	}
	for _, args := range [][]string{
		{"-n", nsA, "addr", "add", partHostA + "/24", "dev", linkA},
		{"-n", nsB, "addr", "add", partHostB + "/24", "dev", linkB},
		{"-n", nsA, "link", "set", "lo", "up"},
		{"-n", nsB, "link", "set", "lo", "up"},
		{"-n", nsA, "link", "set", linkA, "up"},
		{"-n", nsB, "link", "set", linkB, "up"},
	} {
		if err := ip(args...); err != nil {
			t.Fatal(err)
		}
	}
	deadline := 5 * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), deadline+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", nsA, os.Args[0],
		"-test.run", "^"+inside+"$", "-test.v", "-test.count=1", "-test.timeout", deadline.String())
	cmd.Env = append(os.Environ(), envPartNetnsB+"="+nsB, envPartLinkB+"="+linkB, envPartStratad+"="+bin)
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if strings.Contains(line, "chaos") || strings.Contains(line, "---") || strings.Contains(line, "_test.go") {
			t.Log("inside: " + strings.TrimSpace(line))
		}
	}
	if err != nil {
		t.Fatalf("the partition run inside %s: %v", nsA, err)
	}
}

// TestChaosPartitionInside is not a test on its own: TestChaosPartition
// runs it inside its first network namespace.
func TestChaosPartitionInside(t *testing.T) {
	nsB, linkB, bin := os.Getenv(envPartNetnsB), os.Getenv(envPartLinkB), os.Getenv(envPartStratad)
	if nsB == "" {
		t.Skip("runs only inside the network namespace TestChaosPartition makes")
	}
	// Every listener on the veth address, so that the node in nsB can
	// reach etcd and the others' gossip, and they it.
	free := func(host string) string {
		l, err := net.Listen("tcp", host+":0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	// An embedded etcd listens on loopback only: the node in nsB reaches
	// it through a proxy on the veth address.
	etcdURL := freeEtcdURL(t)
	startEtcd(t, t.TempDir(), etcdURL)
	etcdB := "http://" + proxyTCP(t, partHostA+":0", strings.TrimPrefix(etcdURL, "http://"))
	nodes := make([]*chaosNode, 3)
	var seeds []string
	for i := range nodes {
		host, netns, etcd := partHostA, "", etcdURL
		listen := free(host)
		if i == 2 {
			// A free port in nsA is as good as any in the empty nsB.
			host, netns, etcd = partHostB, nsB, etcdB
			_, port, _ := net.SplitHostPort(listen)
			listen = net.JoinHostPort(host, port)
		}
		// No shared-memory socket: a Unix socket would reach the node in
		// nsB through the file system, across the partition.
		nodes[i] = &chaosNode{bin: bin, dir: t.TempDir(), etcd: etcd, listen: listen, netns: netns,
			extra: []string{"--gossip-addr", host + ":0", "--shm-socket", "off"}}
		nodes[i].start(t)
		seeds = append(seeds, nodes[i].addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, l := dialLoad(t, ctx, seeds[0], client.Options{Seeds: seeds[1:], NodeTimeout: time.Second, NoShm: true}, 3)
	l.run(2)
	defer l.halt()
	link := func(state string) {
		if out, err := exec.Command("ip", "-n", nsB, "link", "set", linkB, state).CombinedOutput(); err != nil {
			t.Fatalf("ip -n %s link set %s %s: %v: %s", nsB, linkB, state, err, out)
		}
	}
	l.experiment(t, fmt.Sprintf("partition: a node's link down for %v", partCut), nodes, 4*time.Second, func(t *testing.T) {
		link("down")
		// Evidence that the link is cut: a dial to the node times out,
		// and the client's view loses it (polled, 100 ms apart).
		began, fewest := time.Now(), len(nodes)
		conn, dialErr := net.DialTimeout("tcp", nodes[2].addr, time.Second)
		if dialErr == nil {
			conn.Close()
		}
		for time.Since(began) < partCut {
			fewest = min(fewest, aliveMembers(c))
			time.Sleep(100 * time.Millisecond) // samples for the cut's fixed span: nothing to wait for but the clock
		}
		link("up")
		healed := time.Now()
		waitAlive(t, c, 3, time.Minute)
		t.Logf("chaos partition: a dial to the cut node during the cut: %v; fewest alive members the client saw: %d of %d; "+
			"all alive again %v after the link came up", dialErr, fewest, len(nodes), time.Since(healed).Round(time.Millisecond))
		if dialErr == nil {
			t.Errorf("a dial to %s succeeded while its link was down", nodes[2].addr)
		}
	})
}

// proxyTCP forwards every connection accepted on listen to target until
// the test ends, and returns the address it listens on.
func proxyTCP(t *testing.T, listen, target string) string {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn // guarded by mu: closed at the end
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			pipe := func(dst, src net.Conn) {
				io.Copy(dst, src)
				dst.Close()
				src.Close()
			}
			wg.Go(func() { pipe(out, in) })
			wg.Go(func() { pipe(in, out) })
		}
	})
	return l.Addr().String()
}

// aliveMembers counts the members c sees alive.
func aliveMembers(c *client.Client) int {
	n := 0
	for _, m := range c.Members() {
		if m.State == client.MemberAlive {
			n++
		}
	}
	return n
}
