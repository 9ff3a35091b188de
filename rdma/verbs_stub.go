//go:build !(rdma && linux && cgo)

package rdma

import (
	"context"
	"fmt"
)

// The verbs backend in builds without it: Open says why there is none.
// Nothing else here can be reached, as no Device is ever returned; the
// methods exist so that callers build the same either way.

// Device is an open RDMA device; this build opens none.
type Device struct{}

// Devices returns 0: this build does not link libibverbs.
func Devices() int { return 0 }

// Open fails with ErrUnavailable: the verbs backend needs a build with
// -tags rdma, cgo, Linux and libibverbs-dev.
func Open(Config) (*Device, error) {
	return nil, fmt.Errorf("built without the rdma tag (go build -tags rdma, with cgo and libibverbs-dev): %w", ErrUnavailable)
}

func (*Device) Name() string                     { return "" }
func (*Device) Alloc(int) (*Region, error)       { return nil, ErrUnavailable }
func (*Device) Register([]byte) (*Region, error) { return nil, ErrUnavailable }
func (*Device) Memory() *Memory                  { return newMemory(nil) }
func (*Device) Pair() (*Pair, error)             { return nil, ErrUnavailable }
func (*Device) Close() error                     { return nil }

// Pair is a queue pair; this build makes none.
type Pair struct{}

func (*Pair) Local(*Region) (Endpoint, error)            { return Endpoint{}, ErrUnavailable }
func (*Pair) Connect(Endpoint) error                     { return ErrUnavailable }
func (*Pair) Read(context.Context, *Region, []Op) error  { return ErrUnavailable }
func (*Pair) Write(context.Context, *Region, []Op) error { return ErrUnavailable }
func (*Pair) Close() error                               { return nil }
