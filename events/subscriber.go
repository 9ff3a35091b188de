package events

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
	"github.com/go-zeromq/zmq4/security/plain"
)

// Subscriber is a consumer's end of a stream: a SUB socket, and requests
// to the replay socket.
type Subscriber struct {
	sock zmq4.Socket
	user string
	pass string
}

// Message is one batch as received.
type Message struct {
	Topic string
	Seq   uint64
	Batch Batch
}

// Subscribe connects a SUB socket to a publisher's address (host:port),
// subscribed to topics starting with prefix, with PLAIN credentials when
// user is not empty. The handshake happens here: refused credentials are
// an error.
func Subscribe(ctx context.Context, addr, user, pass, prefix string) (*Subscriber, error) {
	sec := null.Security()
	if user != "" {
		sec = plain.Security(user, pass)
	}
	sock := zmq4.NewSub(ctx, zmq4.WithSecurity(sec), zmq4.WithDialerMaxRetries(0), zmq4.WithAutomaticReconnect(false))
	if err := sock.SetOption(zmq4.OptionSubscribe, prefix); err != nil {
		_ = sock.Close()
		return nil, err
	}
	if err := sock.Dial("tcp://" + addr); err != nil {
		_ = sock.Close()
		return nil, err
	}
	return &Subscriber{sock: sock, user: user, pass: pass}, nil
}

// Recv waits for the next batch.
func (s *Subscriber) Recv() (Message, error) {
	m, err := s.sock.Recv()
	if err != nil {
		return Message{}, err
	}
	return parseMessage(m.Frames)
}

// Close closes the socket.
func (s *Subscriber) Close() error { return s.sock.Close() }

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
	m, err := s.sock.Recv()
	if err != nil {
		return 0, err
	}
	if len(m.Frames) != 3 || len(m.Frames[1]) != 8 {
		return 0, fmt.Errorf("message of %d frames, want topic, seq, payload", len(m.Frames))
	}
	return countEvents(m.Frames[2])
}
