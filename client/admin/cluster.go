package admin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratakv/strata/internal/dial"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// Options configures Dial. Zero fields take their defaults.
type Options struct {
	// Token is sent to every node as "authorization: Bearer <token>".
	// Default none.
	Token string
	// CA, Cert and Key are PEM files: with any of them, nodes are dialed
	// with TLS, their certificates verified against CA (default the
	// system roots), Cert and Key offered to nodes that verify clients.
	// ServerName is the name node certificates must carry (default the
	// host dialed). Default plaintext.
	CA, Cert, Key, ServerName string
	// Timeout is the deadline of each call to a node. Default 5s.
	Timeout time.Duration
}

// DefaultTimeout is Options.Timeout's default.
const DefaultTimeout = 5 * time.Second

// Cluster is the connections to the members of a cluster, as one node's
// membership view names them. Close it when done.
type Cluster struct {
	view    *pb.MembersResponse
	members []*Member // every member in the view, by node ID
	conns   []*grpc.ClientConn
	timeout time.Duration
}

// Member is a member of the view, and the connection to it when it is
// asked.
type Member struct {
	*pb.Member
	Addr string // where it is dialled: its gRPC address (see dialTarget); the node asked, as its endpoint was given

	conn *nodeConn // nil when not asked: dead, left, or its address would not dial
	err  error     // why conn is nil for a member that should have been asked
}

// nodeConn is the services of one node.
type nodeConn struct {
	addr     string
	admin    pb.AdminClient
	cluster  pb.ClusterClient
	data     pb.StrataClient   // for DeleteKeys
	transfer pb.TransferClient // for Rooms
}

// Label names a member in messages: its ID and the address dialled.
func (m *Member) Label() string { return fmt.Sprintf("%s (%s)", m.GetNodeId(), m.Addr) }

// askable reports whether a member in state s is asked: alive or suspect.
func askable(s pb.MemberState) bool {
	return s == pb.MemberState_MEMBER_STATE_ALIVE || s == pb.MemberState_MEMBER_STATE_SUSPECT
}

// Dial asks endpoints in order for the membership view, until one
// answers, and prepares a connection to every askable member; the node
// that answered is reached through its endpoint as given. An endpoint
// that does not answer (or is shutting down) makes it try the next; any
// other failure (a refused token) ends the search, as the next node would
// say the same. The error is then that endpoint's *NodeError, or an
// *EndpointsError when several were tried and none answered. Nothing but
// Members is sent yet.
func Dial(ctx context.Context, endpoints []string, o Options) (*Cluster, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("no endpoints to dial")
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	var tried []*NodeError
	for _, ep := range endpoints {
		c, err := dialAt(ctx, ep, o)
		switch {
		case err == nil:
			return c, nil
		case len(endpoints) == 1 || !Unreachable(err):
			return nil, err
		}
		tried = append(tried, err)
	}
	return nil, &EndpointsError{Tried: tried}
}

// dialAt is Dial through one endpoint.
func dialAt(ctx context.Context, endpoint string, o Options) (*Cluster, *NodeError) {
	c := &Cluster{timeout: o.Timeout}
	first, err := c.connect(endpoint, o)
	if err != nil {
		return nil, &NodeError{Addr: endpoint, Err: err}
	}
	view, err := call(ctx, c, first.cluster.Members, &pb.MembersRequest{})
	if status.Code(err) == codes.Unimplemented || (err == nil && len(view.GetMembers()) == 0) {
		view, err = c.viewOfOne(ctx, first, endpoint)
	}
	if err != nil {
		c.Close()
		return nil, &NodeError{NodeID: view.GetNodeId(), Addr: endpoint, Err: err}
	}
	c.view = view
	for _, pm := range view.GetMembers() {
		m := &Member{Member: pm, Addr: dialTarget(pm)}
		switch {
		case pm.GetNodeId() == view.GetNodeId():
			m.conn, m.Addr = first, endpoint
		case askable(pm.GetState()):
			m.conn, m.err = c.connect(m.Addr, o)
		}
		c.members = append(c.members, m)
	}
	return c, nil
}

// connect prepares a connection to addr. Calls do not wait for the node
// to become ready, so an unreachable node fails the first call at once
// (or at the deadline).
func (c *Cluster) connect(addr string, o Options) (*nodeConn, error) {
	cc, err := dial.GRPC(addr, dial.Options{Token: o.Token,
		CA: o.CA, Cert: o.Cert, Key: o.Key, ServerName: o.ServerName})
	if err != nil {
		return nil, fmt.Errorf("bad endpoint %q: %w", addr, err)
	}
	c.conns = append(c.conns, cc)
	return &nodeConn{addr: addr, admin: pb.NewAdminClient(cc), cluster: pb.NewClusterClient(cc), data: pb.NewStrataClient(cc),
		transfer: pb.NewTransferClient(cc)}, nil
}

// viewOfOne is the view of a node without the Cluster service (or without
// members): itself alone.
func (c *Cluster) viewOfOne(ctx context.Context, n *nodeConn, endpoint string) (*pb.MembersResponse, error) {
	info, err := call(ctx, c, n.admin.NodeInfo, &pb.NodeInfoRequest{})
	if err != nil {
		return nil, err
	}
	return &pb.MembersResponse{NodeId: info.GetNodeId(), Members: []*pb.Member{{NodeId: info.GetNodeId(),
		GrpcAddress: endpoint, State: pb.MemberState_MEMBER_STATE_ALIVE, Tiers: info.GetTiers()}}}, nil
}

// Close closes every connection.
func (c *Cluster) Close() error {
	var errs []error
	for _, cc := range c.conns {
		errs = append(errs, cc.Close())
	}
	return errors.Join(errs...)
}

// View is the membership view of the node asked.
func (c *Cluster) View() *pb.MembersResponse { return c.view }

// NodeID is the ID of the node asked.
func (c *Cluster) NodeID() string { return c.view.GetNodeId() }

// Members is every member of the view, by node ID.
func (c *Cluster) Members() []*Member { return c.members }

// Multi reports whether the view has more than one member.
func (c *Cluster) Multi() bool { return len(c.members) > 1 }

// asked is the members a cluster-wide call goes to: the askable ones. (A
// call to one whose address would not dial fails with that error.)
func (c *Cluster) asked() []*Member {
	var out []*Member
	for _, m := range c.members {
		if m.conn != nil || m.err != nil {
			out = append(out, m)
		}
	}
	return out
}

// dialTarget is where to reach a member's gRPC service: its address, but
// with an unspecified host (a node listening on ":7070" advertises
// "[::]:7070", which names whichever host dials it) replaced by the host
// of its gossip address, which the other members reach it on.
func dialTarget(m *pb.Member) string {
	addr := m.GetGrpcAddress()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return addr
	}
	gossipHost, _, err := net.SplitHostPort(m.GetGossipAddress())
	if err != nil || gossipHost == "" {
		return addr
	}
	if ip := net.ParseIP(gossipHost); ip != nil && ip.IsUnspecified() {
		return addr
	}
	return net.JoinHostPort(gossipHost, port)
}

// call makes one call under the cluster's per-call timeout.
func call[Req, Resp any](ctx context.Context, c *Cluster,
	rpc func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) (Resp, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return rpc(ctx, req)
}

// Reply is one member's answer to a call made on several.
type Reply[T any] struct {
	Member *Member
	Val    T
	Err    *NodeError // nil when it answered
}

// gather makes do on every member in ms in parallel and returns their
// replies in the same order. do should use call, so that each call has
// the timeout.
func gather[T any](ctx context.Context, ms []*Member, do func(context.Context, *nodeConn) (T, error)) []Reply[T] {
	out := make([]Reply[T], len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		out[i].Member = m
		if m.conn == nil {
			out[i].Err = m.nodeError(m.err)
			continue
		}
		wg.Go(func() {
			var err error
			if out[i].Val, err = do(ctx, m.conn); err != nil {
				out[i].Err = m.nodeError(err)
			}
		})
	}
	wg.Wait()
	return out
}

func (m *Member) nodeError(err error) *NodeError {
	return &NodeError{NodeID: m.GetNodeId(), Addr: m.Addr, Err: err}
}

// failures is the errors of rs, in order.
func failures[T any](rs []Reply[T]) []*NodeError {
	var out []*NodeError
	for _, r := range rs {
		if r.Err != nil {
			out = append(out, r.Err)
		}
	}
	return out
}

// settle is how a listing ends: the replies that answered and the
// members that failed; an error only when every member failed (or none
// was asked), as there is then nothing to show.
func settle[T any](rs []Reply[T]) (answered []Reply[T], failed []*NodeError, err error) {
	failed = failures(rs)
	switch {
	case len(rs) == 0:
		return nil, nil, ErrNoMembers
	case len(failed) == len(rs):
		return nil, failed, &FanoutError{Asked: len(rs), Failed: failed}
	}
	for _, r := range rs {
		if r.Err == nil {
			answered = append(answered, r)
		}
	}
	return answered, failed, nil
}

// settleAll is how a change ends: every member asked must have made it,
// so any failure is a *FanoutError; rs are returned whole.
func settleAll[T any](rs []Reply[T]) ([]Reply[T], error) {
	if failed := failures(rs); len(failed) > 0 {
		return rs, &FanoutError{Asked: len(rs), Failed: failed}
	}
	return rs, nil
}
