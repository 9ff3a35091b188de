package testnode

import (
	"bufio"
	"io"
	"os/exec"
	"regexp"
	"testing"
	"time"
)

// Process is a stratad child process that serves.
type Process struct {
	Cmd   *exec.Cmd
	Addr  string // its gRPC address
	Admin string // its admin HTTP address (/metrics)
}

// servingRE matches stratad's serving log line.
var servingRE = regexp.MustCompile(`strata node serving.*addr=(127\.0\.0\.1:\d+).*admin=(127\.0\.0\.1:\d+)`)

// Run starts the stratad binary bin with args and waits up to 60 s until it
// logs that it serves; the test's cleanup kills it. args should put the
// listeners on loopback port 0 (--listen 127.0.0.1:0, and an embedded
// etcd's --embedded-etcd-url http://127.0.0.1:0).
func Run(tb testing.TB, bin string, args ...string) *Process {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	m := Spawn(tb, cmd, true, servingRE, startTimeout)
	return &Process{Cmd: cmd, Addr: m[1], Admin: m[2]}
}

// Spawn starts cmd, which the test's cleanup kills and reaps, and waits up
// to within for a line of its stderr (fromStderr) or stdout that ready
// matches; it returns the match and its submatches. The rest of that
// output is read and dropped.
func Spawn(tb testing.TB, cmd *exec.Cmd, fromStderr bool, ready *regexp.Regexp, within time.Duration) []string {
	tb.Helper()
	pipe := cmd.StdoutPipe
	if fromStderr {
		pipe = cmd.StderrPipe
	}
	out, err := pipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := ready.FindStringSubmatch(sc.Text()); m != nil {
				found <- m
				break
			}
		}
		io.Copy(io.Discard, out)
	}()
	select {
	case m := <-found:
		return m
	case <-time.After(within):
		tb.Fatalf("%s did not say it was ready (%s) within %v", cmd.Path, ready, within)
	}
	return nil
}
