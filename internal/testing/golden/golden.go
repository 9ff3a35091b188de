// Package golden keeps tests' cross-language vectors honest: Check compares
// what the Go implementation produces with the file in testdata (or
// rewrites it when the test binary runs with -update, a flag this package
// registers), and Python runs a standard-library Python checker over the
// same file.
package golden

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata from the implementation")

// Updating reports whether the test binary runs with -update.
func Updating() bool { return *update }

// Check fails tb unless got equals the file at path byte for byte; under
// -update it writes got to path instead. mismatch says, after the path,
// what a difference means and what to do about it.
func Check(tb testing.TB, path string, got []byte, mismatch string) {
	tb.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		tb.Fatalf("%s %s", path, mismatch)
	}
}

// Python runs python3 on script with args and logs its output; the test
// fails if the script does, and is skipped where python3 is not installed.
func Python(tb testing.TB, script string, args ...string) {
	tb.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		tb.Skipf("python3 not found: skipping %s", script)
	}
	out, err := exec.Command(py, append([]string{script}, args...)...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s: %v\n%s", script, err, out)
	}
	tb.Logf("%s", out)
}
