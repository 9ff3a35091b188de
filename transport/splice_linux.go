package transport

import (
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Lending page bytes to the kernel (Conn.SendFramesLent): a bulk of 64 KiB
// up to the pipe's capacity (256 KiB) is not copied into the socket's
// buffers by writev but moved there by reference, vmsplice(2) of the
// caller's memory into a pipe and splice(2) of the pipe into the socket.
// The kernel then reads the bytes when the peer does: on loopback the
// receiver's read copies them straight from the caller's memory, which
// takes one of a page's two copies off the path. On the VM of
// benchmarks/README.md, eight strata-load workers' 256 KiB raw puts cost
// 126 CPU-µs each lent against 158 written (client and node, four
// alternating pairs), and went 1.31 × Redis against 1.05; in one process
// (BenchmarkPutSend) the difference was smaller, 84–87 µs against 90–96.
// Measured again later (BenchmarkPutSend, 2026-12-07, a loaded VM) a
// single page cost 87–93 µs lent against 78–106 written, and a batch of
// 32 pages in one call 125–133 µs a page lent against 81–86 written (a
// lent page reaches the socket as 4 KiB fragments, up to 17 to a packet,
// where a written one fills 32 KiB ones): a call carrying more than one
// bulk is written (stream.go, SendFramesLent).
//
// The price is that the bytes are lent, not handed over: the kernel reads
// them after the call returns, until the peer has read them. So only a
// sender that waits for the peer's answer to every frame before the bytes
// may change lends them (a put: the node answers a page only once it has
// read it). A sender that gives up early (the connection broke) must not
// change them either, but if it does, what the peer reads no longer
// matches the checksum sent with it, and the node publishes nothing.
//
// Memory that cannot be lent (vmsplice fails: a device mapping, say), or a
// pipe that cannot be made or sized, turns lending off for the socket,
// which then writes as Writev does.

// lendMin is the smallest bulk that is lent; smaller ones are written.
const lendMin = 64 << 10

// lendPipe is the pipe capacity asked for: a 256 KiB page in one pass,
// 64 pages of the user's pipe quota (fs.pipe-user-pages-soft). A bulk
// larger than the pipe is written, not lent: lent in passes of the pipe's
// size, 4 MiB pages went slower than written (benchmarks/README.md, "Put,
// 256 KiB": three pairs, one worker 0.83 → 0.58 × Redis, eight 1.05 →
// 0.93).
const lendPipe = 256 << 10

// lender is a RawSocket's pipe for lending bulks (Conn.SendFramesLent).
type lender struct {
	mu   sync.Mutex // the pipe against Close
	r, w int        // the pipe's ends; -1 before it is made
	size int        // its capacity
	off  bool       // lending failed once: write instead
	shut bool       // closed
	lent int        // bulks lent whole
}

// writevLent writes bufs as Writev does, lending those of lendMin bytes up
// to the pipe's capacity.
func (r *RawSocket) writevLent(bufs ...[]byte) error {
	l := &r.lend
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.off || l.shut || !l.ready() {
		return r.Writev(bufs...)
	}
	start := 0
	for i, b := range bufs {
		if len(b) < lendMin || len(b) > l.size {
			continue
		}
		if i > start {
			if err := r.Writev(bufs[start:i]...); err != nil {
				return err
			}
		}
		if err := r.lendBulk(b); err != nil {
			return err
		}
		if !l.off {
			l.lent++
		}
		start = i + 1
	}
	if start == len(bufs) { // a put frame ends with its bulk
		return nil
	}
	return r.Writev(bufs[start:]...)
}

// ready makes the pipe if there is none yet; false turns lending off.
func (l *lender) ready() bool {
	if l.r >= 0 {
		return true
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		l.off = true
		return false
	}
	size, err := unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, lendPipe)
	if err != nil { // over the user's pipe quota: keep the default, if large enough
		size, err = unix.FcntlInt(uintptr(p[1]), unix.F_GETPIPE_SZ, 0)
	}
	if err != nil || size < lendMin {
		unix.Close(p[0])
		unix.Close(p[1])
		l.off = true
		return false
	}
	l.r, l.w, l.size = p[0], p[1], size
	return true
}

// lendBulk sends b through the pipe, at most its capacity at a time
// (writevLent lends only bulks that fit in one). The pipe is empty before
// and after.
func (r *RawSocket) lendBulk(b []byte) error {
	l := &r.lend
	for len(b) > 0 {
		iov := unix.Iovec{Base: &b[0]}
		iov.SetLen(min(len(b), l.size))
		n, _, errno := unix.RawSyscall6(unix.SYS_VMSPLICE, uintptr(l.w), uintptr(unsafe.Pointer(&iov)), 1, 0, 0, 0)
		switch {
		case errno == unix.EINTR:
			continue
		case errno != 0:
			// Not lendable: write this bulk's rest, and every later one.
			l.off = true
			return r.Writev(b)
		}
		if err := r.drainPipe(int(n)); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// drainPipe splices the n bytes in the pipe into the socket, waiting for
// room in the socket's buffer through the runtime's poller.
func (r *RawSocket) drainPipe(n int) error {
	l := &r.lend
	var errno syscall.Errno
	err := r.rc.Write(func(fd uintptr) bool {
		for n > 0 {
			var k uintptr
			k, _, errno = unix.RawSyscall6(unix.SYS_SPLICE, uintptr(l.r), 0, fd, 0, uintptr(n), unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			switch errno {
			case 0:
				n -= int(k)
			case unix.EINTR:
				errno = 0
			case unix.EAGAIN:
				errno = 0
				return false // wait until writable
			default:
				return true
			}
		}
		return true
	})
	return callErr("splice", err, errno)
}

// closeLend closes the lending pipe, after any write under way (Conn.Close
// closes the socket first, which ends a write waiting for room).
func (r *RawSocket) closeLend() {
	l := &r.lend
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.r >= 0 {
		unix.Close(l.r)
		unix.Close(l.w)
		l.r, l.w = -1, -1
	}
	l.shut = true
}
