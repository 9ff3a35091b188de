package load

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrNoRedis is returned by StartRedis when redis-server is not on the
// PATH.
var ErrNoRedis = errors.New("redis-server not installed (apt-get install redis-server)")

// RedisMaxMemory caps a started server's memory: a run that would pass it
// fails rather than grows.
const RedisMaxMemory = 768 << 20

// RedisServer is a redis-server process started on 127.0.0.1 with
// persistence off; Close kills it.
type RedisServer struct {
	addr string
	cmd  *exec.Cmd
	// clockTick is the length of one clock tick of /proc/<pid>/stat.
	clockTick time.Duration
}

// StartRedis starts redis-server on a free loopback port, persistence off,
// protected mode on, maxmemory RedisMaxMemory with noeviction, its files in
// dir, and waits until it answers PING. Without redis-server on the PATH it
// returns ErrNoRedis.
func StartRedis(ctx context.Context, dir string) (*RedisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNoRedis
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logFile := filepath.Join(dir, "redis.log")
	cmd := exec.Command(bin,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--protected-mode", "yes",
		"--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", logFile, "--daemonize", "no",
		"--maxmemory", strconv.Itoa(RedisMaxMemory), "--maxmemory-policy", "noeviction")
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	s := &RedisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, clockTick: clockTick()}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			err = NewRedisConn(c).Simple("PONG", "PING")
			c.Close()
			if err == nil {
				return s, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			log, _ := os.ReadFile(logFile)
			s.Close()
			return nil, fmt.Errorf("redis-server on %s did not answer: %v\n%s", s.addr, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Addr is the server's host:port.
func (s *RedisServer) Addr() string { return s.addr }

// Close kills the server and waits for it.
func (s *RedisServer) Close() error {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	return nil
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
// seconds, from getconf when it is there, else 100 Hz.
func clockTick() time.Duration {
	hz := 100
	if out, err := exec.Command("getconf", "CLK_TCK").Output(); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && n > 0 {
			hz = n
		}
	}
	return time.Second / time.Duration(hz)
}

// CPUTime is the CPU time the server has used (procCPU).
func (s *RedisServer) CPUTime() time.Duration { return procCPU(s.cmd.Process.Pid, s.clockTick) }

// procCPU is the CPU time (user and system, all threads) process pid has
// used, from /proc/<pid>/stat: 0 where there is no /proc, and at the
// resolution of one clock tick (10 ms at 100 Hz).
func procCPU(pid int, tick time.Duration) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
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
	return time.Duration(utime+stime) * tick
}

// RedisConn speaks just enough RESP for the benchmarks, one request in
// flight at a time. It reads and writes through the same raw system calls
// as strata's tcp data plane and the tcp limit (sock), and its read buffer
// is small: a reply's header lines go through it, while a value longer
// than the buffer is read straight into the caller's buffer (bufio reads
// into the destination when that is larger than the buffer), so a GET pays
// one kernel copy of the value, as a strata get does.
type RedisConn struct {
	s   sock
	r   *bufio.Reader
	hdr []byte // request header scratch
}

// redisReadBuffer is the reply buffer: room for the header lines and
// EXISTS answers.
const redisReadBuffer = 4 << 10

// NewRedisConn wraps a connection to a Redis server.
func NewRedisConn(c net.Conn) *RedisConn {
	s := newSock(c)
	return &RedisConn{s: s, r: bufio.NewReaderSize(s, redisReadBuffer)}
}

// Close closes the connection.
func (rc *RedisConn) Close() error { return rc.s.nc.Close() }

// appendBulkHeader appends the RESP bulk string header of an n-byte string.
func appendBulkHeader(dst []byte, n int) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\r', '\n')
}

func appendBulk(dst []byte, s string) []byte {
	dst = appendBulkHeader(dst, len(s))
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

// Get reads the value of key, which must be len(buf) bytes long, into buf.
func (rc *RedisConn) Get(key string, buf []byte) error {
	return rc.Gets([]string{key}, [][]byte{buf})
}

// Gets pipelines a GET of each key, in one write, then reads each value
// (which must be len(bufs[i]) bytes long) into bufs[i].
func (rc *RedisConn) Gets(keys []string, bufs [][]byte) error {
	h := rc.hdr[:0]
	for _, key := range keys {
		h = append(h, "*2\r\n$3\r\nGET\r\n"...)
		h = appendBulk(h, key)
	}
	rc.hdr = h
	if err := rc.s.writev(h); err != nil {
		return err
	}
	for i, key := range keys {
		if err := rc.readValue(key, bufs[i]); err != nil {
			return err
		}
	}
	return nil
}

// readValue reads a GET's reply, a value of len(buf) bytes, into buf.
func (rc *RedisConn) readValue(key string, buf []byte) error {
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
	_, err = rc.r.Discard(2) // the trailing CRLF
	return err
}

var crlf = []byte("\r\n")

// Set stores data under key.
func (rc *RedisConn) Set(key string, data []byte) error {
	if err := rc.SendSet(key, data); err != nil {
		return err
	}
	return rc.ExpectSimple("OK")
}

// SendSet sends SET key data in one writev, without reading the reply.
func (rc *RedisConn) SendSet(key string, data []byte) error {
	h := append(rc.hdr[:0], "*3\r\n$3\r\nSET\r\n"...)
	h = appendBulk(h, key)
	h = appendBulkHeader(h, len(data))
	rc.hdr = h
	return rc.s.writev(h, data, crlf)
}

// Sets pipelines a SET of data under each key, in one writev, then reads
// the replies.
func (rc *RedisConn) Sets(keys []string, data []byte) error {
	h := rc.hdr[:0]
	ends := make([]int, len(keys))
	for i, key := range keys {
		h = append(h, "*3\r\n$3\r\nSET\r\n"...)
		h = appendBulk(h, key)
		h = appendBulkHeader(h, len(data))
		ends[i] = len(h)
	}
	rc.hdr = h
	iov := make([][]byte, 0, 3*len(keys))
	start := 0
	for _, end := range ends {
		iov = append(iov, h[start:end], data, crlf)
		start = end
	}
	if err := rc.s.writev(iov...); err != nil {
		return err
	}
	for range keys {
		if err := rc.ExpectSimple("OK"); err != nil {
			return err
		}
	}
	return nil
}

// Exists sends EXISTS keys... and returns the count the server answers
// (a key named twice counts twice).
func (rc *RedisConn) Exists(keys []string) (int, error) {
	h := append(rc.hdr[:0], '*')
	h = strconv.AppendInt(h, int64(len(keys)+1), 10)
	h = append(h, "\r\n$6\r\nEXISTS\r\n"...)
	for _, k := range keys {
		h = appendBulk(h, k)
	}
	rc.hdr = h
	if err := rc.s.writev(h); err != nil {
		return 0, err
	}
	line, err := rc.line()
	if err != nil {
		return 0, err
	}
	if len(line) == 0 || line[0] != ':' {
		return 0, fmt.Errorf("EXISTS: unexpected reply %q", line)
	}
	return strconv.Atoi(string(line[1:]))
}

// Simple sends a command of bare words and expects the simple string want.
func (rc *RedisConn) Simple(want string, words ...string) error {
	h := append(rc.hdr[:0], '*')
	h = strconv.AppendInt(h, int64(len(words)), 10)
	h = append(h, '\r', '\n')
	for _, w := range words {
		h = appendBulk(h, w)
	}
	rc.hdr = h
	if err := rc.s.writev(h); err != nil {
		return err
	}
	return rc.ExpectSimple(want)
}

// ExpectSimple reads one reply and fails unless it is +want.
func (rc *RedisConn) ExpectSimple(want string) error {
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
func (rc *RedisConn) line() ([]byte, error) {
	line, err := rc.r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, errors.New("malformed reply line")
	}
	return line[:len(line)-2], nil
}

// RedisKeys names the values of a working set of n pages.
func RedisKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("page:%d", i)
	}
	return keys
}

// PopulateRedis empties the server and stores n values holding data under
// RedisKeys(n), pipelined in batches.
func PopulateRedis(c *RedisConn, n int, data []byte) error {
	if err := c.Simple("OK", "FLUSHALL"); err != nil {
		return fmt.Errorf("FLUSHALL: %w", err)
	}
	keys := RedisKeys(n)
	per := max(1, (16<<20)/len(data))
	for start := 0; start < n; start += per {
		end := min(n, start+per)
		for _, k := range keys[start:end] {
			if err := c.SendSet(k, data); err != nil {
				return err
			}
		}
		for _, k := range keys[start:end] {
			if err := c.ExpectSimple("OK"); err != nil {
				return fmt.Errorf("SET %s: %w", k, err)
			}
		}
	}
	return nil
}
