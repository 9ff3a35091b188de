// Package grpcbuf is the buffer pool of strata's gRPC servers and clients.
//
// gRPC takes the buffer for each message it receives, and for the frames
// it reads, from a pool, and clears the buffer's whole capacity when it
// hands it out. Its default pool has tiers of 256 B, 4, 16 and 32 KiB and
// 1 MiB, so every message between 32 KiB and 1 MiB (a 1,000-key Lookup is
// 34 KB; a 256 KiB page is 256 KiB and some) gets a 1 MiB buffer and pays
// for clearing all of it: 7.6% of the CPU of a 1,000-key lookup against an
// in-process node (pprof of BenchmarkLookup). Pool has a tier for every
// power of two from 256 B to 8 MiB, so a buffer is at most twice its
// message; larger messages get buffers of their own size. Buffers are
// still cleared: a message never sees bytes of another.
//
// The proto codec takes its buffers from gRPC's default pool and from no
// other, so Install makes Pool the process's default
// (experimental.SetDefaultBufferPool). Importing the package changes
// nothing: node.Start calls Install first thing, and a client program opts
// in through the client's option for it. gRPC wants the default set before
// its first use and does not guard it, so call Install before the process
// starts any gRPC client or server (a test binary that does gRPC before
// starting a node calls it in TestMain). Only the first call sets the pool.
// Installing in a program embedding the client gives its other gRPC
// connections the finer tiers too, which changes nothing but how much each
// buffer is cleared.
package grpcbuf

import (
	"sync"

	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
)

// Pool is the shared pool.
var Pool = newPool()

func newPool() mem.BufferPool {
	var exps []uint8
	for e := uint8(8); e <= 23; e++ {
		exps = append(exps, e)
	}
	p, err := mem.NewBinaryTieredBufferPool(exps...)
	if err != nil {
		panic("grpcbuf: " + err.Error()) // the exponents are constant and valid
	}
	return p
}

var install sync.Once

// Install makes Pool gRPC's default buffer pool. Calls after the first do
// nothing.
func Install() { install.Do(func() { experimental.SetDefaultBufferPool(Pool) }) }

// Installed reports whether Pool is gRPC's default pool.
func Installed() bool { return mem.DefaultBufferPool() == Pool }
