package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runCommand runs the command with args (and a fresh --out, --quiet)
// within a minute, fails t unless it succeeds, and returns the output
// directory, the report file's contents and the log.
func runCommand(t *testing.T, report string, args ...string) (out string, md []byte, log *strings.Builder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out = t.TempDir()
	cfg, err := parseFlags(append(args, "--out", out, "--quiet"))
	if err != nil {
		t.Fatal(err)
	}
	log = &strings.Builder{}
	cfg.log = log
	if err := run(ctx, cfg); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	md, err = os.ReadFile(filepath.Join(out, report))
	if err != nil {
		t.Fatal(err)
	}
	return out, md, log
}

// TestTransferSmoke runs the command's transfer case on a small prompt:
// strata over raw tcp and shm, the limits, the systems without a
// transfer left out with a note, and the table in transfer.md and on the
// log.
func TestTransferSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes and their producer and consumer processes")
	}
	_, md, log := runCommand(t, "transfer.md", "--transfer", "--transfer-tokens", "64", "--token-bytes", "4K", "--page-tokens", "16",
		"--streams", "1,2", "--systems", "strata,redis,tcp,memcpy", "--transport", "tcp,shm", "--rounds", "2", "--host-bytes", "4M")
	for _, want := range []string{"## transfer of 256KiB in 4 pages of 64KiB, 1 stream(s) a side, 2 transfers a system",
		"## transfer of 256KiB in 4 pages of 64KiB, 2 stream(s) a side", "| strata | ", "| strata-shm | ", "| tcp | ", "| memcpy | "} {
		if !strings.Contains(string(md), want) {
			t.Errorf("transfer.md lacks %q:\n%s", want, md)
		}
	}
	if !strings.Contains(log.String(), string(md)) || !strings.Contains(log.String(), "skipping redis: no transfer case") {
		t.Errorf("the log lacks the table or the note on redis:\n%s", log.String())
	}
}
