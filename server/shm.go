package server

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/stratakv/strata/proto/frame"
	"github.com/stratakv/strata/tiers"
	"github.com/stratakv/strata/transport"
)

// The shm listener serves same-host clients over a Unix socket (proto/frame
// SPEC.md specifies the framing and the trust model). A
// connection authenticates with a tenant token, receives the host arena's
// memfd and its generations' memfd, then sends control requests that go
// through the request layer (requests.go, frame_ops.go) to the store: Get locates pages (Extents; under the caller's lease,
// if any, which must be live) and the client re-checks each extent's
// generation after copying, so a page reclaimed meanwhile is a miss;
// Reserve hands out extents of open reservations (DirectWrite); Commit
// verifies size and checksum before publishing. A connection remembers the
// reservations it was given and aborts those left when it closes (the
// client died, or the node stops): nothing a client took outlives it.
//
// Tenants: the arena is one memfd holding every tenant's pages, so only
// sessions that may see all of them map it: the admin, anyone on an open
// node, and the tenants ShmConfig.Tenants names (the operator's statement
// that they share the host). Other tenants are refused at hello and use
// the raw plane. Per-tenant arenas (a memfd per tenant in the host tier)
// would keep zero-copy for every tenant; they are not built.

// ShmConfig configures the shm listener.
type ShmConfig struct {
	// Path is the socket's path; a stale socket there is replaced.
	// Required.
	Path string
	// Link, if set, is a symbolic link made to point at Path (where
	// clients look by convention, transport.SocketLink). Default none.
	Link string
	// Host is the tier whose arena is shared. Required.
	Host *tiers.Host
	// MaxFrame bounds a request frame. Default frame.DefaultMaxFrame.
	MaxFrame int
	// HelloTimeout bounds the handshake. Default 5s.
	HelloTimeout time.Duration
	// Tenants are the tenants whose sessions may map the arena. The arena
	// holds the pages of every tenant of the node, so a session that maps
	// it can read them all: list only tenants that may see each other's
	// bytes (the one tenant of a dedicated node). Another tenant's hello
	// is refused (DENIED) and its client uses the raw plane. The admin,
	// and everyone on an open node, may always map it. Default none.
	Tenants []string
}

// ShmListener accepts shm connections until Close.
type ShmListener struct {
	frameListener
	cfg     ShmConfig
	arenaID uint64
}

// ListenShm starts serving same-host clients on cfg.Path.
func (s *Server) ListenShm(cfg ShmConfig) (*ShmListener, error) {
	if cfg.Path == "" || cfg.Host == nil {
		return nil, errors.New("shm: Path and Host are required")
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = frame.DefaultMaxFrame
	}
	if cfg.HelloTimeout <= 0 {
		cfg.HelloTimeout = 5 * time.Second
	}
	if err := removeStaleSocket(cfg.Path); err != nil {
		return nil, err
	}
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: cfg.Path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("shm: listening on %s: %w", cfg.Path, err)
	}
	lis.SetUnlinkOnClose(true)
	if err := os.Chmod(cfg.Path, 0o600); err != nil {
		lis.Close()
		return nil, fmt.Errorf("shm: %w", err)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	l := &ShmListener{frameListener: frameListener{s: s, name: "shm", lis: lis}, cfg: cfg,
		arenaID: binary.LittleEndian.Uint64(id[:])}
	if cfg.Link != "" {
		if err := l.link(); err != nil {
			s.log.Warn("shm: no conventional link; clients need the socket path", "link", cfg.Link, "err", err)
			l.cfg.Link = ""
		}
	}
	l.start(func(nc net.Conn) (*transport.Conn, *frameConn) {
		c := transport.NewConn(nc.(*net.UnixConn), l.cfg.MaxFrame)
		return c, &frameConn{s: s, c: c, host: l.cfg.Host, writes: map[uint64]heldWrite{},
			cfg: connConfig{plane: "shm", arenaID: l.arenaID, helloTimeout: l.cfg.HelloTimeout, shmTenants: l.cfg.Tenants}}
	})
	return l, nil
}

// removeStaleSocket removes a socket left by a node that died, refusing to
// touch anything else or a socket that still answers.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("shm: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("shm: %s exists and is not a socket", path)
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return fmt.Errorf("shm: %s is in use by another process", path)
	}
	return os.Remove(path)
}

// link points cfg.Link at the socket, replacing a link that points nowhere.
func (l *ShmListener) link() error {
	if err := os.MkdirAll(filepath.Dir(l.cfg.Link), 0o700); err != nil {
		return err
	}
	if old, err := os.Readlink(l.cfg.Link); err == nil {
		if _, serr := os.Stat(old); serr == nil && old != l.cfg.Path {
			if c, derr := net.Dial("unix", old); derr == nil {
				c.Close()
				return fmt.Errorf("%s points at %s, which is serving", l.cfg.Link, old)
			}
		}
		os.Remove(l.cfg.Link)
	}
	abs, err := filepath.Abs(l.cfg.Path)
	if err != nil {
		return err
	}
	return os.Symlink(abs, l.cfg.Link)
}

// Path is the socket's path.
func (l *ShmListener) Path() string { return l.cfg.Path }

// Close stops accepting, closes every connection (releasing their leases
// and aborting their reservations), waits for their goroutines and removes
// the socket and link.
func (l *ShmListener) Close() error {
	first, err := l.close()
	if first && l.cfg.Link != "" {
		if dst, lerr := os.Readlink(l.cfg.Link); lerr == nil {
			if abs, _ := filepath.Abs(l.cfg.Path); dst == abs {
				os.Remove(l.cfg.Link)
			}
		}
	}
	return err
}
