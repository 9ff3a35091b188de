//go:build !(rdma && linux && cgo)

package transport

import (
	"context"
	"fmt"
)

// Verbs is the verbs backend; this build has none.
type Verbs struct{}

// VerbsDevices returns 0: this build does not link libibverbs.
func VerbsDevices() int { return 0 }

// OpenVerbs fails with ErrNoVerbs: build with -tags rdma (cgo, Linux,
// libibverbs-dev) for the verbs backend.
func OpenVerbs(VerbsConfig) (*Verbs, error) {
	return nil, fmt.Errorf("built without the rdma tag: %w", ErrNoVerbs)
}

func (*Verbs) Register([]byte) error             { return ErrNoVerbs }
func (*Verbs) Local() (Endpoint, error)          { return Endpoint{}, ErrNoVerbs }
func (*Verbs) Connect(Endpoint) error            { return ErrNoVerbs }
func (*Verbs) Read(context.Context, []Op) error  { return ErrNoVerbs }
func (*Verbs) Write(context.Context, []Op) error { return ErrNoVerbs }
func (*Verbs) Close() error                      { return nil }
