//go:build linux

package tiers

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The crash test's child process: re-exec of the test binary with these
// variables set.
const (
	ssdCrashDirEnv  = "STRATA_SSD_CRASH_DIR"
	ssdCrashModeEnv = "STRATA_SSD_CRASH_MODE"
)

// ssdCrashSize returns the size of crash-test page i: 16 KiB to 76 KiB, in
// four classes.
func ssdCrashSize(i int) int64 { return 16*kib + int64(i%4)*20*kib }

// TestSSDCrash kills a process that is sealing and freeing pages with
// SIGKILL, mid-stream, then recovers its directory and checks invariant 6
// for a process crash: every page the child reported sealed (and did not
// start freeing) is back byte for byte; no page comes back that the child
// had not begun to seal, or had finished freeing. The child runs two
// writers, printing "sealing i" before Seal, "sealed i" after it returns,
// and "freeing i" / "freed i" around Free (each keeps 20 pages); each line is
// a write(2) to a pipe, so it has left the child when the kill lands.
func TestSSDCrash(t *testing.T) {
	if dir := os.Getenv(ssdCrashDirEnv); dir != "" {
		ssdCrashChild(dir, os.Getenv(ssdCrashModeEnv))
		return
	}
	for _, tc := range []struct {
		mode  SyncMode
		pages int
	}{{SyncEveryPage, 60}, {SyncBatch, 60}, {SyncNone, 400}} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestSSDCrash$", "-test.count=1")
			cmd.Env = append(os.Environ(), ssdCrashDirEnv+"="+dir, ssdCrashModeEnv+"="+strconv.Itoa(int(tc.mode)))
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			seen := map[string]map[int]bool{"sealing": {}, "sealed": {}, "freeing": {}, "freed": {}}
			sc := bufio.NewScanner(out)
			killed := false
			for sc.Scan() {
				var what string
				var i int
				if _, err := fmt.Sscanf(sc.Text(), "%s %d", &what, &i); err != nil || seen[what] == nil {
					continue // the test framework's own output
				}
				seen[what][i] = true
				if what == "sealed" && len(seen["sealed"]) == tc.pages && !killed {
					if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
						t.Fatal(err)
					}
					killed = true
				}
			}
			err = cmd.Wait()
			if !killed {
				t.Fatalf("child exited before %d pages: %v", tc.pages, err)
			}
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("child ended with %v, not SIGKILL", err)
			}

			s, got, st := openTestSSD(t, SSDConfig{Dir: dir, Capacity: 8 * mib, FileSize: mib})
			byKey := map[[32]byte]int{}
			for i := range seen["sealing"] {
				byKey[ssdKey(i)] = i
			}
			for key, pg := range got { // openTestSSD checked the bytes
				i, ok := byKey[key]
				switch {
				case !ok:
					t.Errorf("recovered a page the child never began to seal")
				case seen["freed"][i]:
					t.Errorf("page %d came back after it was freed", i)
				case pg.meta.Len != ssdCrashSize(i) || pg.meta.Namespace != ssdTestNS:
					t.Errorf("page %d: meta %+v", i, pg.meta)
				}
			}
			lost := 0
			for i := range seen["sealed"] {
				if _, ok := got[ssdKey(i)]; !ok && !seen["freeing"][i] {
					lost++
					t.Errorf("sealed page %d lost", i)
				}
			}
			t.Logf("killed after %d sealed, %d freed; recovered %d (torn %d, dropped %d); lost %d",
				len(seen["sealed"]), len(seen["freed"]), st.Recovered, st.Torn, st.Dropped, lost)
			if st.Dropped != 0 {
				t.Errorf("a process crash dropped %d slots", st.Dropped)
			}
			// The tier works after the crash.
			ssdPut(t, s, ssdKey(1<<20), 4096, ssdAlgCRC32C, true)
		})
	}
}

// ssdCrashChild seals pages until killed (or a minute passes, or the tier
// is full), reporting each step on stdout.
func ssdCrashChild(dir, mode string) {
	m, _ := strconv.Atoi(mode)
	s, err := NewSSD(SSDConfig{Dir: dir, Capacity: 8 * mib, FileSize: mib, Sync: SyncMode(m)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if _, err := s.Recover(func(Extent, PageMeta) error { return nil }); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu sync.Mutex // one line per write
	say := func(what string, i int) {
		mu.Lock()
		defer mu.Unlock()
		os.Stdout.WriteString(what + " " + strconv.Itoa(i) + "\n")
	}
	deadline := time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			type page struct {
				ext Extent
				i   int
			}
			var live []page
			for i := w; time.Now().Before(deadline); i += 2 {
				n := ssdCrashSize(i)
				ext, err := s.Alloc(n)
				if err != nil {
					fmt.Fprintln(os.Stderr, "child:", err)
					return
				}
				p := ssdPayload(ssdKey(i), n)
				if err := s.WriteAt(ext, p, 0); err != nil {
					fmt.Fprintln(os.Stderr, "child:", err)
					return
				}
				say("sealing", i)
				if err := s.Seal(ext, ssdMetaFor(ssdKey(i), p, ssdAlgCRC32C, 0)); err != nil {
					fmt.Fprintln(os.Stderr, "child:", err)
					return
				}
				say("sealed", i)
				live = append(live, page{ext, i})
				if len(live) > 20 { // keep 20 pages per writer
					old := live[0]
					live = live[1:]
					say("freeing", old.i)
					s.Free(old.ext)
					say("freed", old.i)
				}
			}
		})
	}
	wg.Wait()
	os.Exit(0)
}
