package transport

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
)

// TestFrameTooLong: a frame whose header claims more than the
// connection's limit is refused with frame.ErrTooLarge as soon as its
// header is read, by Recv and RecvBulk alike, on a real loopback socket:
// the receiver neither waits for a body the sender never sends nor reads
// one it does. Each receive gets a deadline and a watchdog, so a receiver
// that waits fails the test instead of hanging it.
func TestFrameTooLong(t *testing.T) {
	const limit = 4 << 10
	keys := make([]namespace.Key, 2*limit/len(namespace.Key{})) // a body past the limit
	whole := frame.Append(nil, 7, &frame.Lookup{Keys: keys})
	for _, c := range []struct {
		name string
		send []byte // what the sender writes; it then holds the connection open
		bulk bool   // receive with RecvBulk
		max  int    // the receiver's limit; 0: limit
	}{
		{name: "header alone", send: tooLongHeader(frame.OpGet, limit+1)},
		{name: "header alone, default limit", send: tooLongHeader(frame.OpGet, frame.DefaultMaxFrame+1), max: frame.DefaultMaxFrame},
		{name: "whole frame", send: whole},
		{name: "put header alone, bulk", send: tooLongHeader(frame.OpPut, limit+1), bulk: true},
		{name: "whole frame, bulk", send: whole, bulk: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := streamPair(t)
			b.maxFrame = limit
			if c.max > 0 {
				b.maxFrame = c.max
			}
			if err := b.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
				t.Fatal(err)
			}
			go a.Net().Write(c.send)
			done := make(chan error, 1)
			go func() {
				var err error
				if c.bulk {
					_, _, err = b.RecvBulk()
				} else {
					_, _, err = b.Recv()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, frame.ErrTooLarge) {
					t.Fatalf("receiving a frame over the %d-byte limit: %v, want frame.ErrTooLarge", b.maxFrame, err)
				}
				t.Logf("refused: %v", err)
			case <-time.After(5 * time.Second):
				a.Close()
				b.Close()
				<-done
				t.Fatal("receiving a frame over the limit hung")
			}
		})
	}
}

// tooLongHeader is a frame header for op whose length claims a body of
// body bytes.
func tooLongHeader(op uint8, body int) []byte {
	h := make([]byte, frame.HeaderSize)
	binary.LittleEndian.PutUint32(h, uint32(body+frame.HeaderSize-4))
	h[4] = op
	binary.LittleEndian.PutUint64(h[8:], 7)
	return h
}
