//go:build unix

package transport

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// listen binds a Unix socket at path; it listens until the test ends.
func listen(t *testing.T, path string) *net.UnixListener {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// deadSocketAt leaves at path the socket file of a listener that closed
// without removing it, as a node killed with SIGKILL does: connecting to it
// is refused.
func deadSocketAt(t *testing.T, path string) {
	t.Helper()
	l := listen(t, path)
	l.SetUnlinkOnClose(false)
	l.Close()
	if _, err := net.Dial("unix", path); err == nil {
		t.Fatal("a closed socket accepted")
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestRemoveStaleLinks: the links of nodes gone (their socket refuses
// connections, is gone, or is no socket) are removed; links to listening
// sockets, absolute or relative, and everything that is not a <port>.sock
// link stay, as do the sockets themselves.
func TestRemoveStaleLinks(t *testing.T) {
	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }
	live := listen(t, at("live.s"))
	deadSocketAt(t, at("dead.s"))
	if err := os.WriteFile(at("plain"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(at("1005.sock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	symlink(t, at("live.s"), at("1001.sock"))
	symlink(t, at("dead.s"), at("1002.sock"))
	symlink(t, at("missing.s"), at("1003.sock"))
	symlink(t, at("plain"), at("1004.sock"))
	symlink(t, "live.s", at("1006.sock"))
	symlink(t, "dead.s", at("1007.sock"))
	symlink(t, at("missing.s"), at("notes"))

	removed, err := RemoveStaleLinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if want := []string{at("1002.sock"), at("1003.sock"), at("1004.sock"), at("1007.sock")}; !slices.Equal(removed, want) {
		t.Fatalf("removed %q, want %q", removed, want)
	}
	var left []string
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if want := []string{"1001.sock", "1005.sock", "1006.sock", "dead.s", "live.s", "notes", "plain"}; !slices.Equal(left, want) {
		t.Fatalf("left %q, want %q", left, want)
	}
	// The live socket still serves through its link.
	c, err := net.Dial("unix", at("1001.sock"))
	if err != nil {
		t.Fatalf("the live socket's link: %v", err)
	}
	c.Close()
	if _, err := live.Accept(); err != nil {
		t.Fatal(err)
	}

	if removed, err := RemoveStaleLinks(at("none")); err != nil || removed != nil {
		t.Fatalf("a missing directory: %q, %v", removed, err)
	}
}

// TestRemoveLinkKeepsAReplacement: a link judged stale that a new node
// replaced before the sweep took it is put back, pointing at the new
// socket, and nothing the sweep took is left behind.
func TestRemoveLinkKeepsAReplacement(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "1001.sock")
	deadSocketAt(t, filepath.Join(dir, "dead.s"))
	listen(t, filepath.Join(dir, "new.s"))
	symlink(t, filepath.Join(dir, "new.s"), link) // replaced after the sweep read dead.s
	if removeLink(link, filepath.Join(dir, "dead.s")) {
		t.Fatal("removed a link that no longer named the dead socket")
	}
	if got, err := os.Readlink(link); err != nil || got != filepath.Join(dir, "new.s") {
		t.Fatalf("the new link: %q, %v", got, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Fatalf("left %v, want dead.s, new.s and the link", ents)
	}
	if !removeLink(link, filepath.Join(dir, "new.s")) {
		t.Fatal("a link still naming the socket it was judged by was kept")
	}
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Fatalf("the removed link: %v", err)
	}
}
