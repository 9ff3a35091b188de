package load

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/stratakv/strata/transport"
)

// Memcpy is the memory limit: a get copies one page of the working set
// into a reused buffer, a put copies a page into the working set. It has
// no lookup.
type Memcpy struct{}

// Name is "memcpy".
func (Memcpy) Name() string { return "memcpy" }

// Close does nothing.
func (Memcpy) Close() error { return nil }

// Prepare allocates the working set and one buffer per worker.
func (Memcpy) Prepare(_ context.Context, p Params) (Workload, error) {
	w := &memcpyWorkload{p: p, ws: RandomBytes(p.Pages*p.PageBytes, 5), data: RandomBytes(p.PageBytes, 1)}
	for range p.Workers {
		w.bufs = append(w.bufs, make([]byte, p.PageBytes))
	}
	return w, nil
}

type memcpyWorkload struct {
	p    Params
	ws   []byte
	data []byte
	bufs [][]byte
}

func (*memcpyWorkload) Supports(op Op) bool { return op == Put || op == Get }

// Batches is true: a put or get copies Params.Batch pages.
func (*memcpyWorkload) Batches() bool { return true }

func (w *memcpyWorkload) Do(_ context.Context, op Op, wk, i int) error {
	n, b := w.p.PageBytes, max(1, w.p.Batch)
	for k := i * b; k < (i+1)*b; k++ {
		switch op {
		case Get:
			j := k % w.p.Pages
			copy(w.bufs[wk], w.ws[j*n:(j+1)*n])
		case Put:
			j := putSlot(w.p, wk, k)
			copy(w.ws[j*n:(j+1)*n], w.data)
		default:
			return fmt.Errorf("memcpy: no %s", op)
		}
	}
	return nil
}

func (*memcpyWorkload) After(context.Context, Op, int) error { return nil }
func (*memcpyWorkload) Close(context.Context) error          { return nil }

// LoopbackTCP is the network limit: a get sends a 12-byte request over a
// raw TCP connection to a page server, which writes the page straight from
// the working set; a put sends the request and the page, which the server
// reads straight into the working set and acknowledges with one byte. One
// connection per worker. It has no lookup. The server is a process of its
// own (child.go) unless InProcess.
type LoopbackTCP struct {
	// InProcess runs the page server in this process.
	InProcess bool
	cur       *child // the current workload's server process
}

// Name is "tcp".
func (*LoopbackTCP) Name() string { return "tcp" }

// Close does nothing; each workload owns its server.
func (*LoopbackTCP) Close() error { return nil }

// ServerCPU is the current page server process's CPU time (0 in process:
// this process's own is counted).
func (l *LoopbackTCP) ServerCPU() time.Duration {
	if l.cur == nil {
		return 0
	}
	return l.cur.CPUTime()
}

// Prepare starts a page server over a fresh working set and dials Workers
// connections.
func (l *LoopbackTCP) Prepare(ctx context.Context, p Params) (Workload, error) {
	w := &tcpWorkload{p: p, data: RandomBytes(p.PageBytes, 1)}
	if l.InProcess {
		srv, err := StartPageServer(RandomBytes(p.Pages*p.PageBytes, 4))
		if err != nil {
			return nil, err
		}
		w.srv, w.addr = srv, srv.Addr()
	} else {
		c, err := startChild(ctx, rolePages, fmt.Sprintf("%s=%d", childBytesEnv, p.Pages*p.PageBytes), childSeedEnv+"=4")
		if err != nil {
			return nil, err
		}
		w.child, w.addr, l.cur = c, c.addr, c
	}
	for range p.Workers {
		c, err := net.Dial("tcp", w.addr)
		if err != nil {
			w.Close(ctx)
			return nil, err
		}
		w.conns, w.socks = append(w.conns, c), append(w.socks, newSock(c))
		w.bufs = append(w.bufs, make([]byte, p.PageBytes))
	}
	return w, nil
}

type tcpWorkload struct {
	p     Params
	srv   *PageServer // in process, or
	child *child      // its own process
	addr  string
	data  []byte
	conns []net.Conn
	socks []sock // one per conn
	bufs  [][]byte
}

func (*tcpWorkload) Supports(op Op) bool { return op == Put || op == Get }

func (w *tcpWorkload) Do(_ context.Context, op Op, wk, i int) error {
	switch op {
	case Get:
		return fetchPage(w.socks[wk], uint32(i%w.p.Pages), w.bufs[wk])
	case Put:
		return storePage(w.socks[wk], uint32(putSlot(w.p, wk, i)), w.data, w.bufs[wk][:1])
	}
	return fmt.Errorf("tcp: no %s", op)
}

func (*tcpWorkload) After(context.Context, Op, int) error { return nil }

func (w *tcpWorkload) Close(context.Context) error {
	err := closeAll(w.conns)
	if w.srv != nil {
		w.srv.Close()
	}
	if w.child != nil {
		err = errors.Join(err, w.child.Close())
	}
	return err
}

// Page server requests: op, page index, page size, little-endian uint32s.
const (
	opFetch = 1
	opStore = 2
)

// sock is one end of a page-server connection, or the client end of a
// Redis connection: its reads and writes go through transport.RawSocket where
// the platform has it (the raw system calls of strata's tcp data plane, so
// that neither the limit nor Redis pays more per call than strata does),
// else through the net.Conn.
type sock struct {
	nc  net.Conn
	raw *transport.RawSocket
}

func newSock(nc net.Conn) sock { return sock{nc: nc, raw: transport.NewRawSocket(nc)} }

func (s sock) Read(p []byte) (int, error) {
	if s.raw != nil {
		return s.raw.Read(p)
	}
	return s.nc.Read(p)
}

func (s sock) writev(bufs ...[]byte) error {
	if s.raw != nil {
		return s.raw.Writev(bufs...)
	}
	nb := net.Buffers(bufs)
	_, err := nb.WriteTo(s.nc)
	return err
}

// FetchPage asks for page idx of len(buf) bytes and reads it into buf.
func FetchPage(conn net.Conn, idx uint32, buf []byte) error {
	return fetchPage(newSock(conn), idx, buf)
}

func fetchPage(s sock, idx uint32, buf []byte) error {
	var req [12]byte
	binary.LittleEndian.PutUint32(req[0:], opFetch)
	binary.LittleEndian.PutUint32(req[4:], idx)
	binary.LittleEndian.PutUint32(req[8:], uint32(len(buf)))
	if err := s.writev(req[:]); err != nil {
		return err
	}
	_, err := io.ReadFull(s, buf)
	return err
}

// storePage sends page idx in one writev and waits for the server's
// one-byte acknowledgement, read into ack (one byte long).
func storePage(s sock, idx uint32, data, ack []byte) error {
	var req [12]byte
	binary.LittleEndian.PutUint32(req[0:], opStore)
	binary.LittleEndian.PutUint32(req[4:], idx)
	binary.LittleEndian.PutUint32(req[8:], uint32(len(data)))
	if err := s.writev(req[:], data); err != nil {
		return err
	}
	_, err := io.ReadFull(s, ack[:1])
	return err
}

// PageServer answers FetchPage and StorePage over a byte slice. Close
// closes the listener and every connection and waits for its goroutines.
type PageServer struct {
	ln  net.Listener
	src []byte
	wg  sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn // guarded by mu
}

// StartPageServer listens on a free loopback port.
func StartPageServer(src []byte) (*PageServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &PageServer{ln: ln, src: src}
	s.wg.Go(s.accept)
	return s, nil
}

// Addr is the server's host:port.
func (s *PageServer) Addr() string { return s.ln.Addr().String() }

func (s *PageServer) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		s.wg.Go(func() { s.serve(c) })
	}
}

// serve answers requests on c until it closes. A request past the end of
// src, or an unknown one, closes the connection.
func (s *PageServer) serve(c net.Conn) {
	var req [12]byte
	sk := newSock(c)
	for {
		if _, err := io.ReadFull(sk, req[:]); err != nil {
			return
		}
		op := binary.LittleEndian.Uint32(req[0:])
		idx, n := int(binary.LittleEndian.Uint32(req[4:])), int(binary.LittleEndian.Uint32(req[8:]))
		if (idx+1)*n > len(s.src) {
			c.Close()
			return
		}
		page := s.src[idx*n : (idx+1)*n]
		var err error
		switch op {
		case opFetch:
			err = sk.writev(page)
		case opStore:
			if _, err = io.ReadFull(sk, page); err == nil {
				err = sk.writev([]byte{1})
			}
		default:
			c.Close()
			return
		}
		if err != nil {
			return
		}
	}
}

// Close stops the server.
func (s *PageServer) Close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
