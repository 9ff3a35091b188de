package load

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// testPySystem runs every operation on each worker of a Python-driven
// system, a put case's clean-up, and a failure reported by the driver.
func testPySystem(t *testing.T, sys System) {
	t.Helper()
	defer sys.Close()
	p := Params{PageBytes: 64 << 10, Pages: 16, Workers: 2, LookupKeys: 8, PutBytes: 8 * 64 << 10}
	wl, err := sys.Prepare(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := wl.Close(t.Context()); err != nil {
			t.Error(err)
		}
	}()
	for w := range p.Workers {
		for i := range 20 {
			for _, op := range []Op{Put, Get, Lookup} {
				if err := wl.Do(t.Context(), op, w, w*20+i); err != nil {
					t.Fatalf("%s %s on worker %d: %v", sys.Name(), op, w, err)
				}
			}
		}
	}
	if err := wl.After(t.Context(), Put, 40); err != nil {
		t.Fatal(err)
	}
	if sys.(ServerCPU).ServerCPU() < 0 {
		t.Error("negative CPU time")
	}
	// An unknown command comes back as the operation's error.
	if err := wl.(*pyWorkload).procs[0].call("nonsense 1"); err == nil || !strings.Contains(err.Error(), "KeyError") {
		t.Errorf("unknown command: %v, want the driver's KeyError", err)
	}
}

// TestPyRedis drives redis-server through pydriver.py's RESP worker (the
// standard library only: any python3).
func TestPyRedis(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	sys, err := StartPyRedis(t.Context(), py)
	if errors.Is(err, ErrNoRedis) {
		t.Skip("redis-server not installed")
	}
	if err != nil {
		t.Fatal(err)
	}
	testPySystem(t, sys)
}

// TestMooncake runs Mooncake Store (master, store server, workers) through
// the interpreter in $STRATA_MOONCAKE_PYTHON (benchmarks/mooncake-venv.sh
// builds it); skipped without it.
func TestMooncake(t *testing.T) {
	py := os.Getenv(MooncakePythonEnv)
	if py == "" {
		t.Skipf("$%s not set (benchmarks/mooncake-venv.sh)", MooncakePythonEnv)
	}
	sys, err := StartMooncake(t.Context(), py)
	if err != nil {
		t.Fatal(err)
	}
	testPySystem(t, sys)
}

// TestMooncakeMissing: an interpreter without the wheel is ErrNoMooncake,
// which strata-load reports as a skipped system.
func TestMooncakeMissing(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	if _, err := exec.Command(py, "-c", "import mooncake.store").CombinedOutput(); err == nil {
		t.Skip("this python3 has the wheel")
	}
	if _, err := StartMooncake(t.Context(), py); !errors.Is(err, ErrNoMooncake) {
		t.Fatalf("StartMooncake with %s: %v, want ErrNoMooncake", py, err)
	}
}
