package transport

import (
	"io"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RawSocket reads and writes a stream socket with raw system calls,
// waiting through the runtime's poller only when the socket would block.
// Stream connections (NewStreamConn) use it; the load generator's TCP
// limit uses it too, so that the limit pays what strata's data plane pays.
//
// Why: a plain net.Conn read or write enters the system call through the
// runtime's blocking-call path (entersyscall), which wakes the runtime's
// monitor thread whenever it was parked, and the process of a node serving
// one client parks it between every two requests. On a VM where every
// context switch is dear, those wake-ups and the monitor's 20 µs sleeps
// that follow cost the node about an eighth of its CPU per 256 KiB get
// (perf, runtime.sysmon and entersyscallWakeSysmon). A non-blocking socket
// never blocks in read or writev, so the raw call is safe; the copy of a
// page (tens of µs) holds the goroutine's P, which the blocking path would
// not hand off that soon anyway. Deadlines and Close still work: they act
// on the poller waits (syscall.RawConn).
type RawSocket struct {
	rc   syscall.RawConn
	iov  []unix.Iovec
	poll *ReadPoll // nil: reads sleep as soon as nothing is there
	lend lender    // Conn.SendFramesLent's pipe (splice_linux.go)
	// idle, if set, runs when a read finds nothing to read, before it
	// polls or waits (the Conn's queued answers are sent then).
	idle func() error
}

// NewRawSocket is the raw path for nc, or nil where nc has no file
// descriptor (or the platform no raw path). A RawSocket is for one reader
// and one writer at a time, like the net.Conn under it.
func NewRawSocket(nc net.Conn) *RawSocket {
	rc, err := rawConn(nc)
	if rc == nil || err != nil {
		return nil
	}
	return &RawSocket{rc: rc, lend: lender{r: -1, w: -1}}
}

// rawConn is nc's raw connection, or nil where nc has no file descriptor;
// an error is SyscallConn's (nc is closed).
func rawConn(nc net.Conn) (syscall.RawConn, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil, nil
	}
	return sc.SyscallConn()
}

// callErr is the error of a system call made through a RawConn: the
// RawConn's own (the connection closed), else errno as op's, else nil.
func callErr(op string, err error, errno syscall.Errno) error {
	switch {
	case err != nil:
		return err
	case errno != 0:
		return os.NewSyscallError(op, errno)
	}
	return nil
}

// Read implements io.Reader: one read(2) of what is there, waiting for
// bytes only when none are: polling for them first, yielding the CPU
// between polls, for as long as the socket's ReadPoll allows.
func (r *RawSocket) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var poll time.Duration
	if r.poll != nil {
		poll = r.poll.begin()
		defer r.poll.end()
	}
	var n uintptr
	var errno syscall.Errno
	var idleErr error
	idle := r.idle
	var until int64 // when polling ends (unix ns); 0: not polling
	err := r.rc.Read(func(fd uintptr) bool {
		for {
			n, _, errno = unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch {
			case errno == unix.EINTR:
				continue
			case errno == unix.EAGAIN && idle != nil && poll > 0:
				if idleErr, idle = idle(), nil; idleErr != nil {
					return true
				}
				continue
			case errno == unix.EAGAIN && idle != nil && poll == 0:
				// Nothing to read: run idle (it writes, under the write
				// lock, which this read does not hold), then wait. No
				// second look is needed: bytes that came since the
				// read(2) made the socket ready, which the wait sees (the
				// runtime's poller records readiness from before the
				// wait, as of the RawConn's Read).
				idleErr = idle()
				return idleErr != nil
			case errno != unix.EAGAIN:
				if until != 0 {
					r.poll.hit()
				}
				return true
			case poll > 0:
				now := time.Now().UnixNano()
				if until == 0 {
					until = now + int64(poll)
				}
				if now < until {
					unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
					continue
				}
				poll, until = 0, 0 // the window is over
				r.poll.miss()
			}
			return false // wait until readable
		}
	})
	if idleErr != nil {
		return 0, idleErr
	}
	if err := callErr("read", err, errno); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, io.EOF
	}
	return int(n), nil
}

// Writev writes every byte of bufs, with as few writev(2) calls as the
// socket's buffer allows.
func (r *RawSocket) Writev(bufs ...[]byte) error {
	r.iov = r.iov[:0]
	for _, b := range bufs {
		if len(b) > 0 {
			v := unix.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			r.iov = append(r.iov, v)
		}
	}
	iov := r.iov
	var errno syscall.Errno
	err := r.rc.Write(func(fd uintptr) bool {
		for len(iov) > 0 {
			cnt := min(len(iov), 1024) // IOV_MAX
			var n uintptr
			n, _, errno = unix.RawSyscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(cnt))
			switch errno {
			case 0:
			case unix.EINTR:
				errno = 0
				continue
			case unix.EAGAIN:
				errno = 0
				return false // wait until writable, then go on
			default:
				return true
			}
			iov = advance(iov, int(n))
		}
		return true
	})
	clear(r.iov) // drop the references to the caller's bytes
	return callErr("writev", err, errno)
}

// advance drops the first n bytes of iov.
func advance(iov []unix.Iovec, n int) []unix.Iovec {
	for n > 0 && len(iov) > 0 {
		if l := int(iov[0].Len); n < l {
			iov[0].Base = (*byte)(unsafe.Add(unsafe.Pointer(iov[0].Base), n))
			iov[0].SetLen(l - n)
			return iov
		} else {
			n -= l
			iov = iov[1:]
		}
	}
	return iov
}
