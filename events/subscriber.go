package events

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
	"github.com/go-zeromq/zmq4/security/plain"
)

// Subscriber is a consumer's end of a stream: a SUB connection, and
// requests to the replay socket. zmq4 frames the messages and runs the
// handshake (zmq4.Open over a connection dialled here, as the publisher's
// side does), whose reads go through a buffer: zmq4 reads a frame's
// header and its body apart, each a read of the socket unbuffered, where
// one read takes whatever batches have arrived.
type Subscriber struct {
	conn net.Conn
	zc   *zmq4.Conn
}

// Message is one batch as received.
type Message struct {
	Topic string
	Seq   uint64
	Batch Batch
}

// subscribeTimeout bounds Subscribe's dial and handshake when ctx has no
// deadline.
const subscribeTimeout = 10 * time.Second

// Subscribe connects a SUB socket to a publisher's address (host:port),
// subscribed to topics starting with prefix, with PLAIN credentials when
// user is not empty. The handshake happens here: refused credentials are
// an error.
func Subscribe(ctx context.Context, addr, user, pass, prefix string) (*Subscriber, error) {
	sec := null.Security()
	if user != "" {
		sec = &dataPhase{Security: plain.Security(user, pass)}
	}
	ctx, cancel := context.WithTimeout(ctx, subscribeTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("events: dialing %s: %w", addr, err)
	}
	dl, _ := ctx.Deadline()
	_ = c.SetDeadline(dl)
	zc, err := zmq4.Open(&bufferedConn{Conn: c, r: bufio.NewReaderSize(c, 64<<10)}, sec, zmq4.Sub, nil, false, nil)
	if err == nil {
		err = zc.SendMsg(zmq4.NewMsg(append([]byte{1}, prefix...)))
	}
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("events: subscribing at %s: %w", addr, err)
	}
	_ = c.SetDeadline(time.Time{})
	return &Subscriber{conn: c, zc: zc}, nil
}

// dataPhase is a security mechanism that, once its handshake is done,
// reports itself to zmq4 as NULL, so that zmq4 takes each frame it reads
// as it is. The mechanisms here do not encrypt (ZMTP PLAIN sends frames as
// they are after its handshake), but zmq4 copies every frame of a
// mechanism other than NULL through a bytes.Buffer of its own (Decrypt),
// a second copy of every batch on the subscriber's side. zmq4 asks the
// type only in the greeting (before the handshake) and for each frame.
type dataPhase struct {
	zmq4.Security
	done bool // the handshake succeeded; set on the goroutine of zmq4.Open
}

func (d *dataPhase) Type() zmq4.SecurityType {
	if d.done {
		return zmq4.NullSecurity
	}
	return d.Security.Type()
}

func (d *dataPhase) Handshake(c *zmq4.Conn, server bool) error {
	err := d.Security.Handshake(c, server)
	d.done = err == nil
	return err
}

// bufferedConn is a connection whose reads go through a buffer.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// Recv waits for the next batch.
func (s *Subscriber) Recv() (Message, error) {
	m, err := s.zc.RecvMsg()
	if err != nil {
		return Message{}, err
	}
	return parseMessage(m.Frames)
}

// Close closes the connection; a Recv waiting returns an error.
func (s *Subscriber) Close() error { return s.conn.Close() }

func parseMessage(f [][]byte) (Message, error) {
	if len(f) != 3 || len(f[1]) != 8 {
		return Message{}, fmt.Errorf("message of %d frames, want topic, seq, payload", len(f))
	}
	b, err := DecodeBatch(f[2])
	if err != nil {
		return Message{}, err
	}
	return Message{Topic: string(f[0]), Seq: binary.BigEndian.Uint64(f[1]), Batch: b}, nil
}

// Replay asks a publisher's replay socket for its batches from sequence
// number start on, and returns them.
func Replay(ctx context.Context, addr, user, pass string, start uint64) ([]Message, error) {
	sec := null.Security()
	if user != "" {
		sec = plain.Security(user, pass)
	}
	sock := zmq4.NewDealer(ctx, zmq4.WithSecurity(sec), zmq4.WithDialerMaxRetries(0), zmq4.WithAutomaticReconnect(false))
	defer sock.Close()
	if err := sock.Dial("tcp://" + addr); err != nil {
		return nil, err
	}
	if err := sock.Send(zmq4.NewMsgFrom([]byte{}, seqBytes(start))); err != nil {
		return nil, err
	}
	var out []Message
	for {
		m, err := sock.Recv()
		if err != nil {
			return out, err
		}
		f := m.Frames
		if len(f) > 0 && len(f[0]) == 0 {
			f = f[1:] // the delimiter
		}
		if len(f) == 3 && string(f[1]) == string(endSeq) {
			return out, nil
		}
		msg, err := parseMessage(f)
		if err != nil {
			return out, err
		}
		out = append(out, msg)
	}
}

// RecvCount waits for the next batch and returns how many events it
// carries, without decoding them: a consumer that only counts (a load
// generator draining the stream) then costs little more than the socket.
func (s *Subscriber) RecvCount() (int, error) {
	m, err := s.zc.RecvMsg()
	if err != nil {
		return 0, err
	}
	if len(m.Frames) != 3 || len(m.Frames[1]) != 8 {
		return 0, fmt.Errorf("message of %d frames, want topic, seq, payload", len(m.Frames))
	}
	return countEvents(m.Frames[2])
}
