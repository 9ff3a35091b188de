package load

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// The baselines of a transfer, each moving the same pages in the same two
// steps as strata's producer and consumer: the producer's pages into a
// store, then from the store into the consumer's buffers. A baseline has
// no publish: its consumer starts when the puts returned.

// MemcpyTransfer is the memory limit: the producer's pages copied into a
// store buffer, then from it into the consumer's buffers, a goroutine per
// stream, in this process.
type MemcpyTransfer struct {
	src, store, dst [][]byte
}

// NewMemcpyTransfer allocates and touches the three buffers of p's bytes.
func NewMemcpyTransfer(p TransferParams) *MemcpyTransfer {
	m := &MemcpyTransfer{src: splitPages(RandomBytes(p.Bytes(), 7), p.PageBytes)}
	m.store, m.dst = splitPages(RandomBytes(p.Bytes(), 8), p.PageBytes), splitPages(RandomBytes(p.Bytes(), 9), p.PageBytes)
	return m
}

// Name is "memcpy".
func (*MemcpyTransfer) Name() string { return "memcpy" }

// Close does nothing.
func (*MemcpyTransfer) Close() error { return nil }

// Move copies the pages in, then out.
func (m *MemcpyTransfer) Move(_ context.Context, _, streams int) (Timing, error) {
	return timeSteps(streams, len(m.src), func(_, i int) error {
		copy(m.store[i], m.src[i])
		return nil
	}, func(_, i int) error {
		copy(m.dst[i], m.store[i])
		return nil
	})
}

// timeSteps runs put, then load, on each of n pages, the pages split over
// streams goroutines per step, and times them.
func timeSteps(streams, n int, put, load func(s, i int) error) (Timing, error) {
	each := func(fn func(s, i int) error) error {
		return eachStream(streams, n, func(s, from, to int) error {
			for i := from; i < to; i++ {
				if err := fn(s, i); err != nil {
					return fmt.Errorf("page %d: %w", i, err)
				}
			}
			return nil
		})
	}
	t0 := time.Now()
	if err := each(put); err != nil {
		return Timing{}, fmt.Errorf("put: %w", err)
	}
	t1 := time.Now()
	if err := each(load); err != nil {
		return Timing{}, fmt.Errorf("load: %w", err)
	}
	return Timing{Put: t1.Sub(t0), Loaded: time.Since(t1)}, nil
}

// TCPTransfer is the loopback limit: the producer's pages stored on a page
// server of its own process (as LoopbackTCP's puts), then fetched from it
// into the consumer's buffers (as its gets), a connection per stream.
type TCPTransfer struct {
	srv      *child
	conns    []net.Conn
	socks    []sock
	src, dst [][]byte
}

// StartTCPTransfer starts the page server over p's bytes and dials a
// connection per stream.
func StartTCPTransfer(ctx context.Context, p TransferParams) (*TCPTransfer, error) {
	c, err := startChild(ctx, rolePages, fmt.Sprintf("%s=%d", childBytesEnv, p.Bytes()), childSeedEnv+"=4")
	if err != nil {
		return nil, err
	}
	t := &TCPTransfer{srv: c, src: splitPages(RandomBytes(p.Bytes(), 7), p.PageBytes),
		dst: splitPages(RandomBytes(p.Bytes(), 9), p.PageBytes)}
	for range p.Streams {
		nc, err := net.Dial("tcp", c.addr)
		if err != nil {
			return nil, errors.Join(err, t.Close())
		}
		t.conns, t.socks = append(t.conns, nc), append(t.socks, newSock(nc))
	}
	return t, nil
}

// Name is "tcp".
func (*TCPTransfer) Name() string { return "tcp" }

// Close closes the connections and ends the page server.
func (t *TCPTransfer) Close() error { return errors.Join(closeAll(t.conns), t.srv.Close()) }

// Move stores the pages, then fetches them.
func (t *TCPTransfer) Move(_ context.Context, _, streams int) (Timing, error) {
	acks := make([][]byte, len(t.socks))
	for s := range acks {
		acks[s] = make([]byte, 1)
	}
	return timeSteps(streams, len(t.src), func(s, i int) error {
		return storePage(t.socks[s], uint32(i), t.src[i], acks[s])
	}, func(s, i int) error {
		return fetchPage(t.socks[s], uint32(i), t.dst[i])
	})
}

// MooncakeTransfer moves the pages through Mooncake Store (the mooncake
// system's deployment: a master and a store server holding the segment):
// producer workers put them (put_from), a key each, then consumer workers
// get them (get_into), a Python worker process per stream a side. Each
// worker puts from one reused page and gets into one reused page, where
// strata's peers move every page from and into memory of its own.
type MooncakeTransfer struct {
	sys   *pySystem
	wl    *pyWorkload
	procs int // producers; as many consumers follow them in wl.procs
}

// StartMooncakeTransfer starts the deployment for p and warms its segment
// with a transfer's bytes (pySystem.Prepare); ErrNoMooncake when python
// lacks the wheel.
func StartMooncakeTransfer(ctx context.Context, python string, p TransferParams) (*MooncakeTransfer, error) {
	sys, err := StartMooncake(ctx, python)
	if err != nil {
		return nil, err
	}
	m := &MooncakeTransfer{sys: sys.(*pySystem), procs: p.Streams}
	wl, err := m.sys.Prepare(ctx, Params{PageBytes: p.PageBytes, Pages: 1, Workers: 2 * p.Streams, PutBytes: p.Bytes()})
	if err != nil {
		return nil, errors.Join(err, m.sys.Close())
	}
	m.wl = wl.(*pyWorkload)
	return m, nil
}

// Name is "mooncake".
func (*MooncakeTransfer) Name() string { return "mooncake" }

// Close ends the workers and the deployment.
func (m *MooncakeTransfer) Close() error {
	return errors.Join(m.wl.Close(context.Background()), m.sys.Close())
}

// Move puts fresh keys, gets them, and removes them (off the clock).
func (m *MooncakeTransfer) Move(ctx context.Context, _, streams int) (Timing, error) {
	pages, base := m.wl.p.PutBytes/m.wl.p.PageBytes, m.wl.putBase
	step := func(cmd string, first int) func(s, from, to int) error {
		return func(s, from, to int) error {
			return m.wl.procs[first+s].call("%s %d %d", cmd, base+uint64(from), base+uint64(to))
		}
	}
	t0 := time.Now()
	if err := eachStream(streams, pages, step("put-range", 0)); err != nil {
		return Timing{}, errors.Join(fmt.Errorf("put: %w", err), m.wl.After(ctx, Put, pages))
	}
	t1 := time.Now()
	err := eachStream(streams, pages, step("get-range", m.procs))
	tm := Timing{Put: t1.Sub(t0), Loaded: time.Since(t1)}
	if err != nil {
		err = fmt.Errorf("get: %w", err)
	}
	return tm, errors.Join(err, m.wl.After(ctx, Put, pages))
}
