package server

import (
	"context"

	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
)

// The operator's write side of the Admin service: dropping a namespace,
// its idle TTL, and the list of read leases. Every call acts on this node
// only; the strata CLI asks every node and merges. A tenant's token may
// only touch its own namespaces; the admin token (or an open node) all.

// namespaceDeleter is the part of a Registry that removes registrations.
// A Registry without it cannot unregister: DropNamespace with unregister
// then fails with errNoUnregister (codes.Unimplemented: asking again will
// not help) and drops nothing.
type namespaceDeleter interface {
	// DeleteNamespace removes the registration of id so that no node
	// learns the namespace again. It should return nil when id is not
	// registered; an error then is taken for "not registered" when the
	// registry is healthy and Lookup finds no record.
	DeleteNamespace(ctx context.Context, id namespace.ID) error
}

// DropNamespace removes a namespace's pages from this node and forgets it
// here; with unregister it first deletes the registration, so that neither
// this node nor another learns the namespace again from the registry.
// Leased pages vanish from lookups at once; their memory returns when their
// leases end. Engines that still use the namespace open it again and start
// it afresh.
func (s *Server) DropNamespace(ctx context.Context, req *pb.DropNamespaceRequest) (resp *pb.DropNamespaceResponse, err error) {
	defer func() {
		s.audit(ctx, "drop namespace", err, "ns", shortHex(req.GetNamespaceId()), "unregister", req.GetUnregister(),
			"pages", resp.GetPagesDropped())
	}()
	c, err := s.callerOf(ctx)
	if err != nil {
		return nil, err
	}
	id, err := namespace.IDFromBytes(req.GetNamespaceId())
	if err != nil {
		return nil, err
	}
	n, known := s.known(id)
	tenant := n.Tenant
	if !known && !req.GetUnregister() {
		return nil, errorf(store.ErrNamespaceNotFound, "namespace %s is not on this node", id.Short())
	}
	if !known {
		if tenant, err = s.registeredTenant(ctx, c, id); err != nil {
			return nil, err
		}
	}
	if err := c.mayUse(tenant); err != nil {
		return nil, err
	}
	resp = &pb.DropNamespaceResponse{NodeId: s.cfg.NodeID, Known: known}
	if req.GetUnregister() {
		if err := s.unregister(ctx, id); err != nil {
			return nil, err
		}
		resp.Unregistered = true
	}
	if known {
		dropped, err := s.dropNamespace(id)
		if err != nil {
			return nil, err
		}
		resp.PagesDropped = uint64(dropped)
	}
	s.logger(ctx).Info("namespace dropped", "ns", id.Short(), "tenant", tenant, "pages", resp.PagesDropped,
		"unregistered", resp.Unregistered)
	return resp, nil
}

// registeredTenant is the tenant of a namespace this node does not hold,
// from the registry. The admin need not know it: an unreadable record
// must not keep the admin from deleting it.
func (s *Server) registeredTenant(ctx context.Context, c caller, id namespace.ID) (string, error) {
	if s.cfg.Registry == nil {
		return "", errorf(store.ErrNamespaceNotFound, "namespace %s is not on this node and there is no registry", id.Short())
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RegistryTimeout)
	defer cancel()
	d, err := s.cfg.Registry.Lookup(rctx, id)
	switch {
	case err == nil:
		return d.Tenant, nil
	case c.admin:
		return "", nil
	}
	return "", errorf(errRegistry, "looking up the tenant of namespace %s: %v", id.Short(), err)
}

// unregister deletes id's registration; with no registry there is none.
func (s *Server) unregister(ctx context.Context, id namespace.ID) error {
	if s.cfg.Registry == nil {
		return nil
	}
	del, ok := s.cfg.Registry.(namespaceDeleter)
	if !ok {
		return errNoUnregister
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RegistryTimeout)
	defer cancel()
	err := del.DeleteNamespace(rctx, id)
	if err == nil {
		return nil
	}
	// A registry may report "not registered" as an error. If it answers
	// and has no record, there is nothing to delete: running ns rm again
	// after a node failed must not stop here.
	if _, lerr := s.cfg.Registry.Lookup(rctx, id); lerr != nil && s.cfg.Registry.Health(rctx) == nil {
		s.logger(ctx).Debug("namespace not registered", "ns", id.Short(), "delete", err, "lookup", lerr)
		return nil
	}
	return errorf(errRegistry, "deleting the registration of namespace %s: %v", id.Short(), err)
}

// SetNamespaceTTL sets how long a page of the namespace may go without a
// lookup before this node removes it (0: forever). Leased pages stay until
// their leases end. The TTL lives in this node's memory.
func (s *Server) SetNamespaceTTL(ctx context.Context, req *pb.SetNamespaceTTLRequest) (_ *pb.SetNamespaceTTLResponse, err error) {
	defer func() {
		s.audit(ctx, "set namespace ttl", err, "ns", shortHex(req.GetNamespaceId()), "ttl_ms", req.GetTtlMs())
	}()
	n, err := s.namespaceOf(ctx, req.GetNamespaceId())
	if err != nil {
		return nil, err
	}
	before, after, err := s.setTTL(n, req.GetTtlMs())
	if err != nil {
		return nil, err
	}
	s.logger(ctx).Info("namespace ttl set", "ns", n.ID.Short(), "ttl", after.TTL, "previous", before)
	return &pb.SetNamespaceTTLResponse{NodeId: s.cfg.NodeID, PreviousTtlMs: uint64(before.Milliseconds()),
		Namespace: s.namespaceInfo(after)}, nil
}

// defaultLeaseLimit is how many leases ListLeases answers when the request
// names no limit.
const defaultLeaseLimit = 10000

// ListLeases lists this node's active read leases that the caller may see,
// soonest expiry first, up to the request's limit; total counts them all.
func (s *Server) ListLeases(ctx context.Context, req *pb.ListLeasesRequest) (*pb.ListLeasesResponse, error) {
	c, err := s.callerOf(ctx)
	if err != nil {
		return nil, err
	}
	limit := int(req.GetLimit())
	if limit == 0 {
		limit = defaultLeaseLimit
	}
	resp := &pb.ListLeasesResponse{NodeId: s.cfg.NodeID}
	for _, l := range s.leases(c, req.GetTenant()) {
		if resp.Total++; len(resp.Leases) < limit {
			resp.Leases = append(resp.Leases, &pb.LeaseInfo{LeaseId: l.ID, NamespaceId: l.Namespace[:],
				Tenant: l.Tenant, Pages: uint64(l.Pages), ExpiresUnixMs: l.Expires.UnixMilli()})
		}
	}
	return resp, nil
}
