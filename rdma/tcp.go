package rdma

import (
	"context"
	"fmt"

	"github.com/stratakv/strata/namespace"
)

// TCP is the tcp backend: the client's gRPC streams (which own chunking,
// window sizes and buffer reuse), named by page key. Get reads keys into
// bufs and reports which arrived verified; Put publishes pages. It is an
// adapter: the functions do the work.
type TCP struct {
	Get func(ctx context.Context, keys []namespace.Key, bufs [][]byte) (found []bool, err error)
	Put func(ctx context.Context, keys []namespace.Key, bufs [][]byte) (stored []bool, err error)
}

var _ Transport = TCP{}

// Read gets the ops' pages by key.
func (t TCP) Read(ctx context.Context, ops []Op) error {
	return t.run(ctx, ops, t.Get, "read")
}

// Write puts the ops' pages by key.
func (t TCP) Write(ctx context.Context, ops []Op) error {
	return t.run(ctx, ops, t.Put, "write")
}

func (t TCP) run(ctx context.Context, ops []Op, fn func(context.Context, []namespace.Key, [][]byte) ([]bool, error), what string) error {
	if fn == nil {
		return fmt.Errorf("tcp %s: no function: %w", what, ErrClosed)
	}
	keys, bufs := make([]namespace.Key, len(ops)), make([][]byte, len(ops))
	for i := range ops {
		keys[i], bufs[i] = ops[i].Key, ops[i].Buf
	}
	ok, err := fn(ctx, keys, bufs)
	for i := range ops {
		ops[i].OK = i < len(ok) && ok[i] // results stand beside an error that has them
	}
	if err != nil {
		return fmt.Errorf("tcp %s: %w", what, err)
	}
	return nil
}

// Close does nothing: the client owns the connection.
func (TCP) Close() error { return nil }
