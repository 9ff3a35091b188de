package admin

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

// SetTTL sets ns's idle TTL (0 clears it) on every member that knows it
// and returns each member's answer; the error is a *FanoutError when some
// failed, with the replies of all.
func (c *Cluster) SetTTL(ctx context.Context, ns *Found, ttl time.Duration) ([]Reply[*pb.SetNamespaceTTLResponse], error) {
	req := &pb.SetNamespaceTTLRequest{NamespaceId: ns.ID, TtlMs: uint64(ttl.Milliseconds())}
	return settleAll(gather(ctx, ns.nodes, func(ctx context.Context, n *nodeConn) (*pb.SetNamespaceTTLResponse, error) {
		return call(ctx, c, n.admin.SetNamespaceTTL, req)
	}))
}

// Dropped is what Drop did.
type Dropped struct {
	// Unregistered says the registration was deleted.
	Unregistered bool
	// CannotUnregister is set when the node asked to delete the
	// registration cannot (its registry lacks the call): the registration
	// stays, and the pages were dropped all the same.
	CannotUnregister *NodeError
	// Nodes is every askable member's answer, in member order; a member
	// that does not know the namespace answers an empty response.
	Nodes []Reply[*pb.DropNamespaceResponse]
}

// Drop removes ns from the cluster: with unregister, it first deletes its
// registration (etcd) through the first member that knows it, then drops
// its pages on every askable member. The registration goes first, so
// that a client request reaching a node after the node dropped the
// namespace fails instead of bringing it back from etcd.
//
// Deleting the registration failing ends it with an *UnregisterError:
// nothing was removed. A member that fails to drop the namespace makes
// the error a *FanoutError, with what the others did; dropping again
// when it answers finishes the job.
func (c *Cluster) Drop(ctx context.Context, ns *Found, unregister bool) (*Dropped, error) {
	d := &Dropped{}
	first := ns.nodes[0]
	var done *pb.DropNamespaceResponse
	if unregister {
		var err error
		done, err = call(ctx, c, first.conn.admin.DropNamespace, &pb.DropNamespaceRequest{NamespaceId: ns.ID, Unregister: true})
		switch {
		case status.Code(err) == codes.Unimplemented:
			d.CannotUnregister = first.nodeError(err)
		case err != nil:
			return nil, &UnregisterError{first.nodeError(err)}
		default:
			d.Unregistered = true
		}
	}
	var err error
	d.Nodes, err = settleAll(gather(ctx, c.asked(), func(ctx context.Context, n *nodeConn) (*pb.DropNamespaceResponse, error) {
		if done != nil && n == first.conn {
			return done, nil
		}
		resp, err := call(ctx, c, n.admin.DropNamespace, &pb.DropNamespaceRequest{NamespaceId: ns.ID})
		if status.Code(err) == codes.NotFound {
			return &pb.DropNamespaceResponse{}, nil
		}
		return resp, err
	}))
	return d, err
}
