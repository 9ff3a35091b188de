package main

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/stratakv/strata/internal/dial"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// conn is one command's connection to a node's Admin, Cluster and Strata
// services.
type conn struct {
	cc       *grpc.ClientConn
	admin    pb.AdminClient
	cluster  pb.ClusterClient
	data     pb.StrataClient // for keys rm: Delete
	endpoint string
	token    string
	timeout  time.Duration
}

// dialAddr prepares a connection to a node, with the token and the
// deadline of g; nothing is sent until the first call. Calls do not wait
// for the node to become ready, so an unreachable node fails the first
// call at once (or at the deadline).
func (g *globals) dialAddr(addr string) (*conn, error) {
	cc, err := dial.GRPC(addr, dial.Options{Token: g.token})
	if err != nil {
		return nil, fmt.Errorf("bad endpoint %q: %w", addr, err)
	}
	return &conn{cc: cc, admin: pb.NewAdminClient(cc), cluster: pb.NewClusterClient(cc), data: pb.NewStrataClient(cc),
		endpoint: addr, token: g.token, timeout: g.timeout}, nil
}

// Close closes the connection.
func (c *conn) Close() error { return c.cc.Close() }

// invoke makes one call with the --timeout deadline and the token, and
// turns a failure into a sentence for an operator (see explain).
func invoke[Req, Resp any](ctx context.Context, c *conn,
	rpc func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) (Resp, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := rpc(ctx, req)
	if err != nil {
		var zero Resp
		return zero, c.explain(err)
	}
	return resp, nil
}
