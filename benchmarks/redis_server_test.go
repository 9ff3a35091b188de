package benchmarks

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// redisServer is a redis-server process the benchmark started on
// 127.0.0.1; cleanup kills it.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
	// clockTick is the length of one clock tick of /proc/<pid>/stat.
	clockTick time.Duration
}

// redisMaxMemory caps the server's memory, well above the workingSet it
// holds and below 1 GiB: a run that would pass it fails rather than grows.
const redisMaxMemory = 768 << 20

// startRedis starts redis-server on a free loopback port, persistence off,
// protected mode on, and waits until it answers PING. It skips the
// benchmark if redis-server is not installed.
func startRedis(tb testing.TB) *redisServer {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Skip("redis-server not installed: apt-get install redis-server")
	}
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	logFile := filepath.Join(dir, "redis.log")
	cmd := exec.Command(bin,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--protected-mode", "yes",
		"--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", logFile, "--daemonize", "no",
		"--maxmemory", strconv.Itoa(redisMaxMemory), "--maxmemory-policy", "noeviction")
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting redis-server: %v", err)
	}
	s := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, clockTick: clockTick()}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			rc := newRedisConn(c)
			err = rc.simple("PONG", "PING")
			c.Close()
			if err == nil {
				return s
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logFile)
			tb.Fatalf("redis-server on %s did not answer: %v\n%s", s.addr, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// clockTick is the unit of utime and stime in /proc/<pid>/stat: 1/CLK_TCK
// seconds. CLK_TCK is read from getconf when it is there, else taken as 100
// (its value on Linux on every common architecture).
func clockTick() time.Duration {
	hz := 100
	if out, err := exec.Command("getconf", "CLK_TCK").Output(); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && n > 0 {
			hz = n
		}
	}
	return time.Second / time.Duration(hz)
}

// cpuTime is the CPU time (user and system, all threads) the server has
// used, from /proc/<pid>/stat: 0 where there is no /proc, and at the
// resolution of one clock tick (10 ms at 100 Hz).
func (s *redisServer) cpuTime() time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime field 14, stime field 15.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * s.clockTick
}

// dialRedis opens k connections to s, each warmed by reading redisWarmBytes
// (kernel buffer autotuning, as BenchmarkLoopbackTCP warms its
// connections), and closes them with tb.
func dialRedis(tb testing.TB, s *redisServer, k int) []*redisConn {
	tb.Helper()
	const redisWarmBytes = 64 << 20
	warm := randomBytes(2<<20, 6)
	conns := make([]*redisConn, k)
	for i := range conns {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { c.Close() })
		conns[i] = newRedisConn(c)
	}
	if err := conns[0].set("warm", warm); err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, len(warm))
	for _, c := range conns {
		for range redisWarmBytes / len(warm) {
			if err := c.get("warm", buf); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return conns
}

// redisConn speaks just enough RESP for the benchmarks, one request in
// flight at a time.
type redisConn struct {
	c   net.Conn
	r   *bufio.Reader
	hdr []byte // request header scratch
}

func newRedisConn(c net.Conn) *redisConn {
	return &redisConn{c: c, r: bufio.NewReaderSize(c, 64<<10)}
}

// appendBulk appends the RESP bulk string header of an n-byte string.
func appendBulkHeader(dst []byte, n int) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\r', '\n')
}

// get reads the value of key, which must be len(buf) bytes long, into buf.
func (rc *redisConn) get(key string, buf []byte) error {
	h := append(rc.hdr[:0], "*2\r\n$3\r\nGET\r\n"...)
	h = appendBulkHeader(h, len(key))
	h = append(h, key...)
	h = append(h, '\r', '\n')
	rc.hdr = h
	if _, err := rc.c.Write(h); err != nil {
		return err
	}
	line, err := rc.line()
	if err != nil {
		return err
	}
	if len(line) == 0 || line[0] != '$' {
		return fmt.Errorf("GET %s: unexpected reply %q", key, line)
	}
	n, err := strconv.Atoi(string(line[1:]))
	if err != nil {
		return fmt.Errorf("GET %s: bad length %q", key, line)
	}
	if n != len(buf) {
		return fmt.Errorf("GET %s: value of %d bytes, want %d", key, n, len(buf))
	}
	if _, err := io.ReadFull(rc.r, buf); err != nil {
		return err
	}
	if _, err := rc.r.Discard(2); err != nil { // the trailing CRLF
		return err
	}
	return nil
}

// set stores data under key.
func (rc *redisConn) set(key string, data []byte) error {
	if err := rc.sendSet(key, data); err != nil {
		return err
	}
	return rc.expectSimple("OK")
}

// sendSet sends SET key data in one writev, without reading the reply.
func (rc *redisConn) sendSet(key string, data []byte) error {
	h := append(rc.hdr[:0], "*3\r\n$3\r\nSET\r\n"...)
	h = appendBulkHeader(h, len(key))
	h = append(h, key...)
	h = append(h, '\r', '\n')
	h = appendBulkHeader(h, len(data))
	rc.hdr = h
	bufs := net.Buffers{h, data, []byte("\r\n")}
	_, err := bufs.WriteTo(rc.c)
	return err
}

// simple sends a command of bare words and expects the simple string want.
func (rc *redisConn) simple(want string, words ...string) error {
	h := append(rc.hdr[:0], '*')
	h = strconv.AppendInt(h, int64(len(words)), 10)
	h = append(h, '\r', '\n')
	for _, w := range words {
		h = appendBulkHeader(h, len(w))
		h = append(h, w...)
		h = append(h, '\r', '\n')
	}
	rc.hdr = h
	if _, err := rc.c.Write(h); err != nil {
		return err
	}
	return rc.expectSimple(want)
}

// expectSimple reads one reply and fails unless it is +want.
func (rc *redisConn) expectSimple(want string) error {
	line, err := rc.line()
	if err != nil {
		return err
	}
	if len(line) == 0 || line[0] != '+' || string(line[1:]) != want {
		return fmt.Errorf("reply %q, want +%s", line, want)
	}
	return nil
}

// line reads one CRLF-terminated reply line, without the CRLF. The slice
// is valid until the next read.
func (rc *redisConn) line() ([]byte, error) {
	line, err := rc.r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, errors.New("malformed reply line")
	}
	return line[:len(line)-2], nil
}
