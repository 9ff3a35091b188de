package events

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/go-zeromq/zmq4"
)

// The two things zmq4 leaves to its user when a socket faces peers it does
// not trust: checking PLAIN credentials (its security/plain accepts any)
// and bounding what a peer may make it allocate (it allocates a frame's
// declared length, up to 2^63, before reading it). Both sit under zmq4's
// framing, which stays the library's: plainServer implements its Security
// interface with its Conn's command calls, guard only watches the bytes go
// by.

// plainServer is the server side of ZMTP PLAIN (rfc.zeromq.org/spec/24) whose
// credentials auth checks: a peer it refuses gets an ERROR command and the
// connection ends.
type plainServer struct {
	auth func(user, password string) bool
}

func (plainServer) Type() zmq4.SecurityType { return zmq4.PlainSecurity }

func (p plainServer) Handshake(conn *zmq4.Conn, server bool) error {
	if !server {
		return errors.New("events: PLAIN client side not implemented")
	}
	cmd, err := conn.RecvCmd()
	if err != nil {
		return fmt.Errorf("receiving HELLO: %w", err)
	}
	if cmd.Name != zmq4.CmdHello {
		return fmt.Errorf("expected HELLO, got %q", cmd.Name)
	}
	user, pass, err := parseHello(cmd.Body)
	if err != nil || !p.auth(user, pass) {
		_ = conn.SendCmd(zmq4.CmdError, errorReason("authentication failed"))
		if err == nil {
			err = ErrAuth
		}
		return err
	}
	if err := conn.SendCmd(zmq4.CmdWelcome, nil); err != nil {
		return err
	}
	if cmd, err = conn.RecvCmd(); err != nil {
		return fmt.Errorf("receiving INITIATE: %w", err)
	}
	if cmd.Name != zmq4.CmdInitiate {
		return fmt.Errorf("expected INITIATE, got %q", cmd.Name)
	}
	if err := conn.Peer.Meta.UnmarshalZMTP(cmd.Body); err != nil {
		return fmt.Errorf("peer metadata: %w", err)
	}
	meta, err := conn.Meta.MarshalZMTP()
	if err != nil {
		return err
	}
	return conn.SendCmd(zmq4.CmdReady, meta)
}

func (plainServer) Encrypt(w io.Writer, data []byte) (int, error) { return w.Write(data) }
func (plainServer) Decrypt(w io.Writer, data []byte) (int, error) { return w.Write(data) }

// parseHello splits a PLAIN HELLO body: a length-prefixed user name and a
// length-prefixed password, nothing after.
func parseHello(b []byte) (user, pass string, err error) {
	field := func() (string, bool) {
		if len(b) == 0 || len(b) < 1+int(b[0]) {
			return "", false
		}
		s := string(b[1 : 1+b[0]])
		b = b[1+b[0]:]
		return s, true
	}
	u, ok1 := field()
	p, ok2 := field()
	if !ok1 || !ok2 || len(b) != 0 {
		return "", "", errors.New("malformed PLAIN HELLO")
	}
	return u, p, nil
}

func errorReason(s string) []byte { return append([]byte{byte(len(s))}, s...) }

// Bounds on what a peer sends: subscriptions, replay requests and the
// handshake's commands are all small.
const (
	maxFrame   = 4 << 10
	maxMessage = 16 << 10
	greeting   = 64 // ZMTP 3 greeting, before the first frame
)

// errTooLarge ends a connection whose peer declared a frame or message
// past the bounds.
var errTooLarge = errors.New("events: peer frame too large")

// guard is a connection whose reads fail, before zmq4 sees the length, as
// soon as the peer declares a frame longer than maxFrame or a multi-frame
// message longer than maxMessage. It follows ZMTP 3's framing (a 64-byte
// greeting, then frames of a flags byte, a 1- or 8-byte big-endian length
// and the body) byte by byte, whatever sizes the reads come in.
type guard struct {
	net.Conn
	skip    int64 // bytes of the greeting or of a body still to pass
	flags   byte
	size    []byte // length bytes gathered so far
	want    int    // length bytes expected (1 or 8); 0: a flags byte is next
	message int64  // bytes of the message's earlier frames
}

func newGuard(c net.Conn) *guard { return &guard{Conn: c, skip: greeting} }

func (g *guard) Read(p []byte) (int, error) {
	n, err := g.Conn.Read(p)
	if ferr := g.feed(p[:n]); ferr != nil {
		return 0, ferr
	}
	return n, err
}

// feed advances the framing state over b.
func (g *guard) feed(b []byte) error {
	for len(b) > 0 {
		switch {
		case g.skip > 0:
			k := min(g.skip, int64(len(b)))
			g.skip -= k
			b = b[k:]
		case g.want == 0:
			g.flags, g.want, g.size = b[0], 1, g.size[:0]
			if g.flags&0x02 != 0 { // LONG
				g.want = 8
			}
			b = b[1:]
		default:
			k := min(g.want-len(g.size), len(b))
			g.size = append(g.size, b[:k]...)
			b = b[k:]
			if len(g.size) < g.want {
				continue
			}
			var size uint64
			for _, c := range g.size {
				size = size<<8 | uint64(c)
			}
			if size > maxFrame || g.message+int64(size) > maxMessage {
				return errTooLarge
			}
			g.want, g.skip = 0, int64(size)
			if g.flags&0x01 != 0 && g.flags&0x04 == 0 { // MORE, not a command
				g.message += int64(size)
			} else {
				g.message = 0
			}
		}
	}
	return nil
}
