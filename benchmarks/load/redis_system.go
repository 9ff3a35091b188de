package load

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// Redis is the reference system: a redis-server this process starts on
// loopback (persistence off). A put is SET of a page-sized string over the
// working set's keys (replacing a value of the same size, so nothing is
// evicted), a get is GET into a reused buffer, a lookup is EXISTS of
// LookupKeys keys.
type Redis struct {
	srv *RedisServer
	dir string
}

// StartRedisSystem starts the server; ErrNoRedis without redis-server.
func StartRedisSystem(ctx context.Context) (*Redis, error) {
	dir, err := os.MkdirTemp("", "strata-load-redis-")
	if err != nil {
		return nil, err
	}
	srv, err := StartRedis(ctx, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &Redis{srv: srv, dir: dir}, nil
}

// Name is "redis".
func (*Redis) Name() string { return "redis" }

// ServerCPU is redis-server's CPU time so far.
func (r *Redis) ServerCPU() time.Duration { return r.srv.CPUTime() }

// Close kills the server and removes its directory.
func (r *Redis) Close() error {
	err := r.srv.Close()
	return errors.Join(err, os.RemoveAll(r.dir))
}

// Prepare dials Workers connections and stores the working set.
func (r *Redis) Prepare(ctx context.Context, p Params) (Workload, error) {
	w := &redisWorkload{p: p, keys: RedisKeys(p.Pages), data: RandomBytes(p.PageBytes, 1)}
	for range p.Workers {
		c, err := net.Dial("tcp", r.srv.Addr())
		if err != nil {
			w.Close(ctx)
			return nil, err
		}
		w.conns = append(w.conns, NewRedisConn(c))
		bufs := make([][]byte, max(1, p.Batch))
		for k := range bufs {
			bufs[k] = make([]byte, p.PageBytes)
		}
		w.bufs = append(w.bufs, bufs)
		w.batch = append(w.batch, make([]string, len(bufs)))
		w.scratch = append(w.scratch, make([]string, p.LookupKeys))
	}
	if err := PopulateRedis(w.conns[0], p.Pages, w.data); err != nil {
		w.Close(ctx)
		return nil, err
	}
	return w, nil
}

type redisWorkload struct {
	p       Params
	keys    []string
	data    []byte
	conns   []*RedisConn
	bufs    [][][]byte // per worker, Batch page buffers
	batch   [][]string // per worker, a batch's keys
	scratch [][]string
}

// Batches is true: a put or get pipelines Params.Batch SETs or GETs.
func (*redisWorkload) Batches() bool { return true }

func (*redisWorkload) Supports(Op) bool { return true }

func (w *redisWorkload) Do(_ context.Context, op Op, wk, i int) error {
	switch op {
	case Get:
		keys := w.batch[wk]
		for k := range keys {
			keys[k] = w.keys[(i*len(keys)+k)%w.p.Pages]
		}
		return w.conns[wk].Gets(keys, w.bufs[wk])
	case Put:
		keys := w.batch[wk]
		for k := range keys {
			keys[k] = w.keys[putSlot(w.p, wk, i*len(keys)+k)]
		}
		return w.conns[wk].Sets(keys, w.data)
	case Lookup:
		keys := w.scratch[wk]
		for j := range keys {
			keys[j] = w.keys[(i*len(keys)+j)%w.p.Pages]
		}
		n, err := w.conns[wk].Exists(keys)
		if err == nil && n != len(keys) {
			err = fmt.Errorf("EXISTS: %d of %d", n, len(keys))
		}
		return err
	}
	return fmt.Errorf("redis: no %s", op)
}

func (*redisWorkload) After(context.Context, Op, int) error { return nil }

func (w *redisWorkload) Close(context.Context) error { return closeAll(w.conns) }

// putSlot is the working-set page that put number i of worker wk
// overwrites, for systems that overwrite rather than write fresh pages:
// each worker owns the slots wk, wk+Workers, ..., so no two workers write
// one slot at once (Pages >= Workers).
func putSlot(p Params, wk, i int) int {
	per := max(1, p.Pages/p.Workers)
	return wk + p.Workers*(i%per)
}
