package admin

import (
	"bytes"
	"cmp"
	"context"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

// Namespaces asks every askable member for its namespaces (of tenant, or
// all the token may see; "" for all) and sums them by ID, ordered by
// tenant, model, revision, adapter, then ID, so that forks of one model
// sit together. failed is the members that failed, left out of the sums.
func (c *Cluster) Namespaces(ctx context.Context, tenant string) (nss []*Namespace, failed []*NodeError, err error) {
	rs := gather(ctx, c.asked(), func(ctx context.Context, n *nodeConn) (*pb.ListNamespacesResponse, error) {
		return call(ctx, c, n.admin.ListNamespaces, &pb.ListNamespacesRequest{Tenant: tenant})
	})
	answered, failed, err := settle(rs)
	if err != nil {
		return nil, failed, err
	}
	var parts []NodeNamespace
	for _, r := range answered {
		for _, n := range r.Val.GetNamespaces() {
			parts = append(parts, NodeNamespace{Node: r.Member.GetNodeId(), Info: n})
		}
	}
	nss = sumNamespaces(parts)
	slices.SortFunc(nss, func(a, b *Namespace) int { return compareNamespaces(a.Info, b.Info) })
	return nss, failed, nil
}

// compareNamespaces orders by tenant, model, revision, adapter, then ID.
func compareNamespaces(a, b *pb.NamespaceInfo) int {
	da, db := a.GetDescriptor_(), b.GetDescriptor_()
	return cmp.Or(
		cmp.Compare(da.GetTenant(), db.GetTenant()),
		cmp.Compare(da.GetModel(), db.GetModel()),
		cmp.Compare(da.GetModelRevision(), db.GetModelRevision()),
		cmp.Compare(da.GetAdapter(), db.GetAdapter()),
		bytes.Compare(a.GetId(), b.GetId()),
	)
}

// Found is a namespace found on the cluster: its ID, and the members that
// know it with what each says about it. The calls about its keys and the
// changes to it go to those members.
type Found struct {
	ID    []byte
	Total *Namespace // summed over the members that know it, in member order
	nodes []*Member
}

// Members is the members that know the namespace.
func (f *Found) Members() []*Member { return f.nodes }

// Namespace finds the one namespace whose ID is or starts with prefix (in
// lowercase hex) on every askable member. A member that does not know it
// holds none of its pages and is left out; one that fails is in failed.
// A member that refuses the prefix (InvalidArgument: too short to be
// unique on that node) ends it with that *NodeError; the prefix matching
// two namespaces is an *AmbiguousError, none a *NotFoundError.
func (c *Cluster) Namespace(ctx context.Context, prefix string) (ns *Found, failed []*NodeError, err error) {
	rs := gather(ctx, c.asked(), func(ctx context.Context, n *nodeConn) (*pb.GetNamespaceResponse, error) {
		resp, err := call(ctx, c, n.admin.GetNamespace, &pb.GetNamespaceRequest{IdPrefix: prefix})
		if status.Code(err) == codes.NotFound {
			return nil, nil
		}
		return resp, err
	})
	for _, r := range rs {
		if r.Err != nil && status.Code(r.Err.Err) == codes.InvalidArgument {
			return nil, nil, r.Err
		}
	}
	answered, failed, err := settle(rs)
	if err != nil {
		return nil, failed, err
	}
	ns = &Found{}
	var parts []NodeNamespace
	for _, r := range answered {
		if r.Val == nil {
			continue
		}
		id := r.Val.GetNamespace().GetId()
		if ns.ID != nil && !bytes.Equal(id, ns.ID) {
			return nil, failed, &AmbiguousError{Prefix: prefix, IDs: [2][]byte{ns.ID, id}}
		}
		ns.ID = id
		ns.nodes = append(ns.nodes, r.Member)
		parts = append(parts, NodeNamespace{Node: r.Member.GetNodeId(), Info: r.Val.GetNamespace()})
	}
	if ns.ID == nil {
		nf := &NotFoundError{Prefix: prefix, Asked: len(rs)}
		for _, r := range answered {
			nf.Answered = append(nf.Answered, r.Member.Addr)
		}
		return nil, failed, nf
	}
	ns.Total = sumNamespaces(parts)[0]
	return ns, failed, nil
}
