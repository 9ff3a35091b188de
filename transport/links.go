package transport

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"
)

// Socket links: a node announces its shm socket by a symbolic link at a
// conventional path named for its gRPC port (SocketLink), in a directory of
// its user's (SocketLinkDir). A node that closes removes its link; one
// killed (SIGKILL, a crash) leaves it, pointing at a socket nothing accepts
// on or at nothing. RemoveStaleLinks, which a node runs at start, removes
// those.
//
// Invariant: a link is removed only when the socket it names is dead (gone,
// not a socket, or refusing connections, ECONNREFUSED), and only that link:
// a node on the same port may replace it meanwhile (after its own check of
// the old one), so the sweep takes the link away by an atomic rename,
// checks that what it took is still the dead one, and otherwise puts the
// new one back (unless a newer one took its place). A socket whose state is
// unclear (a full accept queue, a permission error) counts as live.

// SocketLinkDir is the directory of this user's socket links:
// <temp dir>/strata-<uid>.
func SocketLinkDir() string {
	return filepath.Join(os.TempDir(), "strata-"+strconv.Itoa(os.Getuid()))
}

// SocketLink is the conventional path at which a node serving gRPC on port
// announces its shm socket (a symbolic link to it), so that a client that
// knows only the node's address finds it: SocketLinkDir()/<port>.sock.
func SocketLink(port int) string {
	return filepath.Join(SocketLinkDir(), strconv.Itoa(port)+".sock")
}

// linkName is the name of a socket link: <port>.sock.
var linkName = regexp.MustCompile(`^[0-9]+\.sock$`)

// probeTimeout bounds the connect that tells whether a socket is live.
const probeTimeout = time.Second

// RemoveStaleLinks removes the socket links in dir (SocketLinkDir) whose
// node is gone, and returns their paths. It leaves everything else: links
// to live sockets, files that are not symbolic links, names other than
// <port>.sock. A missing dir holds nothing to remove.
func RemoveStaleLinks(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading socket links: %w", err)
	}
	var removed []string
	for _, e := range ents {
		if e.Type()&fs.ModeSymlink == 0 || !linkName.MatchString(e.Name()) {
			continue
		}
		link := filepath.Join(dir, e.Name())
		target, err := os.Readlink(link)
		if err != nil || !deadSocket(resolve(dir, target)) {
			continue
		}
		if removeLink(link, target) {
			removed = append(removed, link)
		}
	}
	return removed, nil
}

// resolve is the path a link in dir to target names.
func resolve(dir, target string) string {
	if filepath.IsAbs(target) {
		return target
	}
	return filepath.Join(dir, target)
}

// deadSocket reports whether path is no live socket: it is gone, is not a
// socket, or refuses a connection.
func deadSocket(path string) bool {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return true
	case err != nil:
		return false
	case fi.Mode()&fs.ModeSocket == 0:
		return true
	}
	c, err := net.DialTimeout("unix", path, probeTimeout)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist)
}

// removeLink removes link if it still points at target, the dead socket it
// was judged by, and reports whether it did. It takes the link by a rename
// first, so that a link a new node made meanwhile is put back, not lost.
func removeLink(link, target string) bool {
	taken := filepath.Join(filepath.Dir(link), "."+filepath.Base(link)+"."+strconv.Itoa(os.Getpid())+".stale")
	if err := os.Rename(link, taken); err != nil {
		return false // gone already: another node's sweep, or its owner's
	}
	got, err := os.Readlink(taken)
	os.Remove(taken)
	if err == nil && got != target {
		_ = os.Symlink(got, link) // fails only when a newer link took its place
		return false
	}
	return err == nil
}
