package load

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStrataNodeBinary measures a node run from a stratad binary (built
// here from this tree, as --old-node would be from an older one) with this
// build's client, over tcp and shm: the system is named for its label, its
// gets, puts and lookups succeed, the node's CPU is its process's, and
// Close ends the process (SIGTERM) and removes its data directory.
func TestStrataNodeBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds stratad and runs it")
	}
	bin := filepath.Join(t.TempDir(), "stratad")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/stratad")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/stratad: %v\n%s", err, out)
	}
	for _, tr := range []string{"tcp", "shm"} {
		t.Run(tr, func(t *testing.T) {
			sys, err := StartStrata(t.Context(), StrataConfig{NodeBinary: bin, Label: "old", Transport: tr, HostBytes: 64 << 20})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"tcp": "strata-old", "shm": "strata-old-shm"}[tr]
			if sys.Name() != want {
				t.Errorf("name %q, want %q", sys.Name(), want)
			}
			wl, err := sys.Prepare(t.Context(), Params{PageBytes: 64 << 10, Pages: 8, Workers: 1, LookupKeys: 8})
			if err != nil {
				sys.Close()
				t.Fatal(err)
			}
			for i, op := range []Op{Get, Put, Lookup} {
				if err := wl.Do(t.Context(), op, 0, i); err != nil {
					t.Errorf("%s: %v", op, err)
				}
			}
			if err := errors.Join(wl.After(t.Context(), Put, 2), wl.Close(t.Context())); err != nil {
				t.Error(err)
			}
			if sys.ServerCPU() <= 0 {
				t.Error("no CPU time counted for the node's process: it started, opened namespaces and stored pages")
			}
			dir := sys.child.dir
			if err := sys.Close(); err != nil {
				t.Fatal(err)
			}
			if st := sys.child.cmd.ProcessState; st == nil || !st.Success() {
				t.Errorf("the node's process did not exit cleanly on SIGTERM: %v", st)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the node's data directory %s is left: %v", dir, err)
			}
		})
	}
}

// TestStrataNodeBinaryThatDoesNotServe: a binary that exits without
// serving (this test binary, running no test) is an error at once, with
// its output, not a minute's wait.
func TestStrataNodeBinaryThatDoesNotServe(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(t.TempDir(), "stratad")
	script := "#!/bin/sh\necho 'not a node' >&2\nexec " + self + " -test.run=^$\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	sys, err := StartStrata(t.Context(), StrataConfig{NodeBinary: wrapper, Label: "old"})
	if err == nil {
		sys.Close()
		t.Fatal("a binary that exits without serving started a system")
	}
	if !strings.Contains(err.Error(), "exited before it served") || !strings.Contains(err.Error(), "not a node") {
		t.Errorf("error %q: want it to say the node exited, with its output", err)
	}
}

// TestOldRatios: each strata-old system's rows are divided into its
// transport's strata rows, case by case, with p99s and CPU side by side;
// a case only the old one ran, or one that failed, has no ratio.
func TestOldRatios(t *testing.T) {
	row := func(sys string, op Op, workers, ops int, p99, cpu time.Duration, err string) Result {
		return Result{System: sys, Op: op, PageBytes: 64 << 10, Workers: workers, Ops: ops, Elapsed: time.Second,
			BytesPerOp: 64 << 10, KeysPerOp: 1, P99: p99, CPU: cpu, Err: err}
	}
	res := []Result{
		row("strata", Get, 1, 300, 90*time.Microsecond, 20*time.Microsecond, ""),
		row("strata-old", Get, 1, 200, 120*time.Microsecond, 25*time.Microsecond, ""),
		row("strata-old", Get, 8, 200, time.Millisecond, 25*time.Microsecond, ""),
		row("strata-shm", Get, 1, 100, 50*time.Microsecond, 10*time.Microsecond, "broke"),
		row("strata-old-shm", Get, 1, 100, 50*time.Microsecond, 10*time.Microsecond, ""),
		row("strata", Put, 1, 100, time.Millisecond, 50*time.Microsecond, ""),
	}
	var md strings.Builder
	if err := WriteMarkdown(&md, "# t\n", res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"strata ÷ strata-old, get (throughput ratio",
		"| 64KiB | 1 | 1.50 | 90 / 120 | 20 / 25 |",
		"| 64KiB | 8 | – | – | – |",
		"strata-shm ÷ strata-old-shm, get",
		"| 64KiB | 1 | failed | – | – |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("results.md lacks %q:\n%s", want, md.String())
		}
	}
	if strings.Contains(md.String(), "strata-old, put") {
		t.Errorf("a new ÷ old table for put, which no old system ran:\n%s", md.String())
	}
}
