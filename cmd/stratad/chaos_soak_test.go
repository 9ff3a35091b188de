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
)

// The soak: the load on three nodes for a bounded time (soakTime, or
// STRATA_CHAOS_SOAK, a Go duration), with each node's goroutines (its
// go_goroutines metric), open file descriptors (/proc/PID/fd) and resident
// memory (VmRSS) sampled after a warm-up and every soakEvery until the
// end, and the client's (this process's) likewise. It fails when, from the
// first sample to the last, a node's or the client's goroutines or FDs
// grow by more than half (plus soakSlack: a handful of connections and
// their goroutines come and go with each call), or a node's RSS by more
// than soakRSS. The nodes keep every page the load writes (no tier
// evicts), so their indexes and heaps grow with the pages: soakRSS allows
// for that and for the Go heap's settling. Runs on two shared cores: 5,000
// to 10,700 pages a node and 19,000 to 29,000 calls in 75 s; each node's
// RSS +8 to +9 MiB, goroutines within 3 and FDs within 3 of the start.
// A leak of a kilobyte a call could pass the RSS bound; one of a
// goroutine or FD a call could not pass theirs.

const (
	soakTime  = 75 * time.Second
	soakEvery = 15 * time.Second
	soakSlack = 10
	soakRSS   = 32 << 20
)

// soakSample is one node's figures at one time.
type soakSample struct {
	at                   time.Duration // since the soak began
	goroutines, fds, rss int64         // rss in bytes
}

func (s soakSample) String() string {
	return fmt.Sprintf("%v: %d goroutines, %d fds, %.1f MiB RSS", s.at.Round(time.Second), s.goroutines, s.fds,
		float64(s.rss)/(1<<20))
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
	sample := func(began time.Time) {
		for i, n := range cl.nodes {
			s, err := sampleNode(ctx, n)
			if err != nil {
				t.Fatalf("sampling node %s: %v", n.addr, err)
			}
			s.at = time.Since(began)
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
			time.Sleep(min(soakEvery, soak-time.Since(began)))
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
		if i < len(cl.nodes) && last.rss > first.rss+soakRSS {
			t.Errorf("%s: RSS %.1f -> %.1f MiB, more than %d MiB more", who, float64(first.rss)/(1<<20),
				float64(last.rss)/(1<<20), soakRSS>>20)
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
