package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

// A cluster-wide command asks the first of --endpoints that answers for the
// membership view (Cluster.Members), then every member that may answer —
// alive or suspect: a suspect often refutes, and asking it costs at most
// --timeout — in parallel, each call under --timeout, and merges what came
// back. A member that fails is reported on stderr and left out; a listing
// fails only when every member asked failed (settle), a command that
// changes the cluster when any did (settleAll). A node that predates the
// Cluster service is a cluster of one.

// fleet is one command's connections to the members of a cluster.
type fleet struct {
	view    *pb.MembersResponse
	members []*member // every member in the view, by node ID
	conns   []*conn   // to close
}

// member is one member of the view, and the connection to it when it is
// asked.
type member struct {
	*pb.Member
	addr string // where it is dialled: see dialTarget
	c    *conn  // nil when not asked: dead, left, or its address would not dial
	err  error  // why c is nil for a member that should have been asked
}

// askable reports whether a member in state s is asked: alive or suspect.
func askable(s pb.MemberState) bool {
	return s == pb.MemberState_MEMBER_STATE_ALIVE || s == pb.MemberState_MEMBER_STATE_SUSPECT
}

// dialFleet asks g.endpoints in order for the membership view, until one
// answers, and prepares a connection to every askable member; the node
// that answered is reached through its endpoint as given. An endpoint that
// does not answer (or is shutting down) makes it try the next; any other
// failure (a refused token) ends the search: the next node would say the
// same. Nothing but Members is sent yet.
func (g *globals) dialFleet(ctx context.Context) (*fleet, error) {
	var tried []error
	for _, ep := range g.endpoints {
		f, err := g.dialFleetAt(ctx, ep)
		switch {
		case err == nil:
			return f, nil
		case len(g.endpoints) == 1 || !unreachable(err):
			return nil, err
		}
		tried = append(tried, fmt.Errorf("%s: %s", ep, brief(err)))
	}
	return nil, noEndpointAnswered(tried)
}

// dialFleetAt is dialFleet through one endpoint.
func (g *globals) dialFleetAt(ctx context.Context, endpoint string) (*fleet, error) {
	c, err := g.dialAddr(endpoint)
	if err != nil {
		return nil, err
	}
	f := &fleet{conns: []*conn{c}}
	view, err := invoke(ctx, c, c.cluster.Members, &pb.MembersRequest{})
	if status.Code(err) == codes.Unimplemented || (err == nil && len(view.GetMembers()) == 0) {
		view, err = viewOfOne(ctx, c)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	f.view = view
	for _, pm := range view.GetMembers() {
		m := &member{Member: pm, addr: dialTarget(pm)}
		switch {
		case pm.GetNodeId() == view.GetNodeId():
			m.c, m.addr = c, endpoint
		case !askable(pm.GetState()):
		default:
			if m.c, m.err = g.dialAddr(m.addr); m.err == nil {
				f.conns = append(f.conns, m.c)
			}
		}
		f.members = append(f.members, m)
	}
	return f, nil
}

// viewOfOne is the view of a node without the Cluster service (or without
// members): itself alone.
func viewOfOne(ctx context.Context, c *conn) (*pb.MembersResponse, error) {
	info, err := invoke(ctx, c, c.admin.NodeInfo, &pb.NodeInfoRequest{})
	if err != nil {
		return nil, err
	}
	return &pb.MembersResponse{NodeId: info.GetNodeId(), Members: []*pb.Member{{NodeId: info.GetNodeId(),
		GrpcAddress: c.endpoint, State: pb.MemberState_MEMBER_STATE_ALIVE, Tiers: info.GetTiers()}}}, nil
}

// Close closes every connection.
func (f *fleet) Close() error {
	var errs []error
	for _, c := range f.conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// multi reports whether the view has more than one member: tables then
// say which node each row comes from. A single-node deployment prints
// exactly what it did before the cluster existed.
func (f *fleet) multi() bool { return len(f.members) > 1 }

// asked is the members a cluster-wide call goes to: the askable ones. (A
// call to one whose address would not dial fails with that error.)
func (f *fleet) asked() []*member {
	var out []*member
	for _, m := range f.members {
		if m.c != nil || m.err != nil {
			out = append(out, m)
		}
	}
	return out
}

// label names a member in messages: its ID and the address dialled.
func (m *member) label() string {
	return fmt.Sprintf("%s (%s)", m.GetNodeId(), m.addr)
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

// reply is one member's answer to a call made on several.
type reply[T any] struct {
	*member
	val T
	err error
}

// gather makes call on every member in ms in parallel and returns their
// replies in the same order. call should use invoke, so that each call
// has the --timeout deadline.
func gather[T any](ctx context.Context, ms []*member, call func(context.Context, *conn) (T, error)) []reply[T] {
	out := make([]reply[T], len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		out[i].member = m
		if m.c == nil {
			out[i].err = m.err
			continue
		}
		wg.Go(func() { out[i].val, out[i].err = call(ctx, m.c) })
	}
	wg.Wait()
	return out
}

// settle reports on w each member whose call failed, and returns an error
// only when every member failed (or none was asked): the command then has
// nothing to print. One member's failure is its error as it was.
func settle[T any](w io.Writer, rs []reply[T]) error {
	var failed []reply[T]
	for _, r := range rs {
		if r.err != nil {
			failed = append(failed, r)
		}
	}
	switch {
	case len(rs) == 0:
		return errors.New("no member of the cluster is alive")
	case len(failed) == 1 && len(rs) == 1:
		return failed[0].err
	case len(failed) == len(rs):
		var b strings.Builder
		fmt.Fprintf(&b, "none of the %d nodes answered:", len(rs))
		for _, r := range failed {
			fmt.Fprintf(&b, "\n  node %s: %s", r.label(), brief(r.err))
		}
		return errors.New(b.String())
	}
	for _, r := range failed {
		what := "failed"
		if unreachable(r.err) {
			what = "unreachable"
		}
		fmt.Fprintf(w, "node %s %s: %s; results may be incomplete\n", r.label(), what, brief(r.err))
	}
	return nil
}

// answered is the replies without an error.
func answered[T any](rs []reply[T]) []reply[T] {
	var out []reply[T]
	for _, r := range rs {
		if r.err == nil {
			out = append(out, r)
		}
	}
	return out
}

// settleAll is settle for commands that change the cluster, where every
// member asked must have done it: it reports on w each member whose call
// failed and returns an error naming how many did (one member's failure
// is its error as it was). what says what was not done: "the TTL was not
// set".
func settleAll[T any](w io.Writer, rs []reply[T], what string) error {
	var failed []reply[T]
	for _, r := range rs {
		if r.err != nil {
			failed = append(failed, r)
		}
	}
	switch {
	case len(failed) == 0:
		return nil
	case len(rs) == 1:
		return failed[0].err
	}
	for _, r := range failed {
		state := "failed"
		if unreachable(r.err) {
			state = "unreachable"
		}
		fmt.Fprintf(w, "node %s %s: %s\n", r.label(), state, brief(r.err))
	}
	return fmt.Errorf("%s on %d of the %d nodes asked; run the command again when they answer", what, len(failed), len(rs))
}
