//go:build chaos

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// The soak: the load on three nodes for a bounded time (soakTime, or
// STRATA_CHAOS_SOAK, a Go duration), with each node's goroutines (its
// go_goroutines metric), open file descriptors (/proc/PID/fd) and resident
// memory (VmRSS) sampled after a warm-up and every soakEvery until the
// end, and the client's (this process's) likewise. It fails when, from the
// first sample to the last, a node's or the client's goroutines or FDs
// grow by more than half (plus soakSlack: a handful of connections and
// their goroutines come and go with each call), or a node's RSS by more
// than soakRSS plus soakRSSPage for each page it gained: the nodes keep
// every page the load writes (no tier evicts), so their indexes and heaps
// grow with the pages. Runs on two shared cores: 5,000 to 12,600 pages a
// node and 19,000 to 34,000 calls in 75 s; each node's RSS +8 to +11 MiB
// (some 0.9 KiB a page), goroutines within 3 and FDs within 3 of the
// start (the SSD tier opens a slot file more as it fills). A leak of a kilobyte a call could pass the RSS bound; one of a
// goroutine or FD a call could not pass theirs.

const (
	soakTime    = 75 * time.Second
	soakEvery   = 15 * time.Second
	soakSlack   = 10
	soakRSS     = 16 << 20
	soakRSSPage = 2 << 10
)

// soakSample is one node's figures at one time.
type soakSample struct {
	at                          time.Duration // since the soak began
	goroutines, fds, rss, pages int64         // rss in bytes; pages: a node's (NodeInfo)
}

func (s soakSample) String() string {
	out := fmt.Sprintf("%v: %d goroutines, %d fds, %.1f MiB RSS", s.at.Round(time.Second), s.goroutines, s.fds,
		float64(s.rss)/(1<<20))
	if s.pages > 0 {
		out += fmt.Sprintf(", %d pages", s.pages)
	}
	return out
}

func TestChaosSoak(t *testing.T) {
	soak := soakTime
	if v := os.Getenv("STRATA_CHAOS_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("STRATA_CHAOS_SOAK=%q: %v", v, err)
		}
		soak = d
	}
	cl := startChaosCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), soak+5*time.Minute)
	defer cancel()
	_, l := dialLoad(t, ctx, cl.seeds[0], client.Options{Seeds: cl.seeds[1:], NodeTimeout: time.Second}, 3)
	l.run(4)
	defer l.halt()

	// samples[i] are node i's, the last the client's (this process:
	// the load's goroutines and connections, its RSS not bounded: it keeps
	// every acknowledged key).
	samples := make([][]soakSample, len(cl.nodes)+1)
	// One admin connection a node for the whole soak, connected before
	// the first sample so that every sample counts it.
	var admins []pb.AdminClient
	for _, n := range cl.nodes {
		a := adminClient(t, n.addr)
		if _, err := a.NodeInfo(ctx, &pb.NodeInfoRequest{}); err != nil {
			t.Fatal(err)
		}
		admins = append(admins, a)
	}
	sample := func(began time.Time) {
		for i, n := range cl.nodes {
			s, err := sampleNode(ctx, n)
			if err != nil {
				t.Fatalf("sampling node %s: %v", n.addr, err)
			}
			info, err := admins[i].NodeInfo(ctx, &pb.NodeInfoRequest{})
			if err != nil {
				t.Fatalf("sampling node %s: %v", n.addr, err)
			}
			s.at, s.pages = time.Since(began), int64(info.GetPages())
			samples[i] = append(samples[i], s)
		}
		s, err := sampleProc(os.Getpid())
		if err != nil {
			t.Fatalf("sampling the client: %v", err)
		}
		s.at, s.goroutines = time.Since(began), int64(runtime.NumGoroutine())
		samples[len(cl.nodes)] = append(samples[len(cl.nodes)], s)
	}
	l.experiment(t, fmt.Sprintf("soak for %v", soak), cl.nodes, 10*time.Second, func(t *testing.T) {
		began := time.Now()
		sample(began)
		for time.Since(began) < soak {
			time.Sleep(min(soakEvery, soak-time.Since(began))) // samples a real load every soakEvery: nothing to wait for but the clock
			sample(began)
		}
	})
	for i, ss := range samples {
		who := "the client"
		if i < len(cl.nodes) {
			who = fmt.Sprintf("node %d (%s)", i, cl.nodes[i].addr)
		}
		first, last := ss[0], ss[len(ss)-1]
		var b strings.Builder
		for j, s := range ss {
			if j > 0 {
				b.WriteString("; ")
			}
			b.WriteString(s.String())
		}
		t.Logf("chaos soak: %s: %s", who, b.String())
		if last.goroutines > first.goroutines*3/2+soakSlack {
			t.Errorf("%s: goroutines %d -> %d, more than half again (+%d)", who, first.goroutines, last.goroutines, soakSlack)
		}
		if last.fds > first.fds*3/2+soakSlack {
			t.Errorf("%s: fds %d -> %d, more than half again (+%d)", who, first.fds, last.fds, soakSlack)
		}
		if bound := first.rss + soakRSS + soakRSSPage*max(0, last.pages-first.pages); i < len(cl.nodes) && last.rss > bound {
			t.Errorf("%s: RSS %.1f -> %.1f MiB with %d more pages, over %.1f MiB (+%d MiB, +%d KiB a page)", who,
				float64(first.rss)/(1<<20), float64(last.rss)/(1<<20), last.pages-first.pages, float64(bound)/(1<<20),
				soakRSS>>20, soakRSSPage>>10)
		}
	}
}

// sampleNode reads n's goroutines from its metrics, its open FDs and RSS
// from /proc.
func sampleNode(ctx context.Context, n *chaosNode) (soakSample, error) {
	s, err := sampleProc(n.cmd.Process.Pid)
	if err != nil {
		return s, err
	}
	s.goroutines, err = metricValue(ctx, "http://"+n.admin+"/metrics", "go_goroutines")
	return s, err
}

// sampleProc reads a process's open FDs and RSS from /proc.
func sampleProc(pid int) (soakSample, error) {
	var s soakSample
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.fds = int64(len(fds))
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for line := range strings.Lines(string(status)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return s, fmt.Errorf("VmRSS %q: %w", line, err)
			}
			s.rss = kb << 10
		}
	}
	return s, nil
}

// metricValue is the value of an unlabelled gauge in a Prometheus text
// exposition at url.
func metricValue(ctx context.Context, url, name string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int64(f), err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	return 0, fmt.Errorf("%s: no %s", url, name)
}
