package server

import (
	"context"
	"time"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/store"
)

// The request layer: what every transport's handler calls once it has
// decoded a request. The gRPC handlers (grpc_*.go, admin.go, ops.go,
// cluster.go) and the frame handlers of the raw tcp and shm listeners
// (frame_*.go) only decode, call these and encode; who the caller is
// (auth.go), which namespace a request may use, the validation of sizes,
// batches, keys and page specs, the operations on the store and their
// metrics are written here once, and the errors they return are mapped to
// each wire in one table (errors.go). A new field of a page spec is
// checked in checkSpec. The layer is this file (namespaces and batch
// limits), requests_read.go (lookups, reads, leases), requests_write.go
// (publication) and requests_admin.go (the operator's and the cluster's
// calls); no other file of the package calls the store.

// resolve finds the namespace id for caller c: one this node holds, or one
// another node registered since (adopt); the caller's tenant must own it.
func (s *Server) resolve(ctx context.Context, c caller, id namespace.ID) (store.Namespace, error) {
	n, ok := s.known(id)
	if !ok {
		if n, ok = s.adopt(ctx, id); !ok {
			return store.Namespace{}, errorf(store.ErrNamespaceNotFound, "namespace %s is not registered (open it first)", id.Short())
		}
	}
	return n, c.mayUse(n.Tenant)
}

// adopt makes known a namespace that another node registered after this
// one started, so that its clients need not open it here first.
func (s *Server) adopt(ctx context.Context, id namespace.ID) (store.Namespace, bool) {
	if s.cfg.Registry == nil {
		return store.Namespace{}, false
	}
	now := time.Now()
	s.mu.RLock()
	until, known := s.unknown[id]
	s.mu.RUnlock()
	if known && now.Before(until) {
		return store.Namespace{}, false
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RegistryTimeout)
	defer cancel()
	d, err := s.cfg.Registry.Lookup(rctx, id)
	if err != nil || d.ID() != id || s.addNamespace(d) != nil {
		s.mu.Lock()
		if len(s.unknown) >= maxUnknown {
			clear(s.unknown)
		}
		s.unknown[id] = now.Add(unknownTTL)
		s.mu.Unlock()
		return store.Namespace{}, false
	}
	return s.known(id)
}

// unknownTTL is how long a namespace ID the registry did not have is
// answered as unknown without asking again: a namespace another node
// registers meanwhile is served here at most this much later.
const unknownTTL = time.Second

// maxUnknown bounds the unknown IDs remembered; past it they are forgotten
// at once.
const maxUnknown = 4096

// addNamespace makes descriptor d's namespace known to the store and
// remembers d.
func (s *Server) addNamespace(d namespace.Descriptor) error {
	id := d.ID()
	lin, quad := d.PrefillCoefficients()
	if err := s.cfg.Store.AddNamespace(store.Namespace{ID: id, Tenant: d.Tenant,
		PageBytes: int64(d.PageSize()), Checksum: d.Checksum,
		PageTokens: d.PageTokens, FLOPsLinear: lin, FLOPsQuadratic: quad}); err != nil {
		return err
	}
	s.mu.Lock()
	s.descriptors[id] = d
	s.mu.Unlock()
	return nil
}

// descriptor is the descriptor namespace id was opened with.
func (s *Server) descriptor(id namespace.ID) (namespace.Descriptor, bool) {
	s.mu.RLock()
	d, ok := s.descriptors[id]
	s.mu.RUnlock()
	return d, ok
}

// checkBatch refuses an empty batch of what, or one over Config.MaxBatch.
func (s *Server) checkBatch(n int, what string) error {
	if n == 0 {
		return badRequest("no %s", what)
	}
	return s.checkLimit(n, what)
}

// checkLimit refuses a batch of what over Config.MaxBatch.
func (s *Server) checkLimit(n int, what string) error {
	if n > s.cfg.MaxBatch {
		return errorf(errBatchTooLarge, "%d %s, the limit is %d", n, what, s.cfg.MaxBatch)
	}
	return nil
}

// known finds a namespace this node holds, without asking the registry.
func (s *Server) known(id namespace.ID) (store.Namespace, bool) {
	return s.cfg.Store.Namespace(id)
}
