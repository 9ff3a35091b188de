package node_test

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/transport"
)

// TestStartRemovesStaleLinks: a starting node removes the socket links that
// nodes killed with SIGKILL left (one to a socket file nothing accepts on
// any more, one to a socket that is gone), and keeps a live node's, which
// still leads to its socket.
func TestStartRemovesStaleLinks(t *testing.T) {
	live := testnode.Start(t, node.Config{HostBytes: 8 << 20})
	liveLink := transport.SocketLink(port(t, live.Addr()))
	liveSocket, err := os.Readlink(liveLink)
	if err != nil {
		t.Fatalf("the live node's link: %v", err)
	}

	// The dead nodes' ports are held by this test, so that no node takes
	// one (and its link) meanwhile.
	dir := t.TempDir()
	dead := filepath.Join(dir, "dead.s")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: dead, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close() // as SIGKILL leaves it: the file, and nothing accepting
	var stale []string
	for _, target := range []string{dead, filepath.Join(dir, "gone.s")} {
		held, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { held.Close() })
		link := transport.SocketLink(port(t, held.Addr().String()))
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(link) })
		stale = append(stale, link)
	}

	testnode.Start(t, node.Config{HostBytes: 8 << 20, ShmSocket: "off"})
	for _, link := range stale {
		if _, err := os.Lstat(link); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a dead node's link %s after a node started: %v", link, err)
		}
	}
	if got, err := os.Readlink(liveLink); err != nil || got != liveSocket {
		t.Fatalf("the live node's link after another started: %q, %v; want %q", got, err, liveSocket)
	}
	c, err := net.Dial("unix", liveLink)
	if err != nil {
		t.Fatalf("the live node through its link: %v", err)
	}
	c.Close()
}

// port is the port of a host:port address.
func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCloseRemovesItsLink: a node that stops cleanly removes its socket
// link, so that only a killed node leaves one for the next to remove.
func TestCloseRemovesItsLink(t *testing.T) {
	n := testnode.Start(t, node.Config{HostBytes: 8 << 20})
	link := transport.SocketLink(port(t, n.Addr()))
	if _, err := os.Readlink(link); err != nil {
		t.Fatalf("the node's link: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the link %s after the node closed: %v", link, err)
	}
}
