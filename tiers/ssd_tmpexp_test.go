//go:build linux

package tiers

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestSSDTmpExp(t *testing.T) {
	if os.Getenv("SSDEXP") == "" {
		t.Skip()
	}
	dir := "/tmp/ssdexp"
	cfg := SSDConfig{Dir: dir, Capacity: 100000*(16384+256) + 64*mib, Sync: SyncNone}
	if _, err := os.Stat(dir); err != nil {
		cfg = ssdFillForRecovery(t, dir, 100000, 16384)
	}
	for _, w := range []int{1, 4, 8, 16} {
		ssdDropCache(t, dir)
		cfg.RecoveryWorkers = w
		t.Logf("workers %d: %v", w, ssdTimeRecovery(t, cfg, 100000))
	}
	ssdDropCache(t, dir)
	start := time.Now()
	exec.Command("sh", "-c", "cat "+dir+"/*.slots > /dev/null").Run()
	t.Logf("cat: %v", time.Since(start))
}
