package node

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/grpc"

	"github.com/stratakv/strata/internal/dial"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// peerQueries is the cluster prefix query's side on this node
// (server.PrefixPeers): a connection to each other member it has asked,
// kept until the node closes, and each call made with the caller's own
// token, so that a member answers for the namespaces the caller may see
// and no more.
type peerQueries struct {
	opts dial.Options // as the node dials its peers (its token is not sent)

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn // guarded by mu: by gRPC address
	closed bool                        // guarded by mu
}

// QueryPrefix sends req to the member at addr as the caller whose token is
// token.
func (q *peerQueries) QueryPrefix(ctx context.Context, addr, token string, req *pb.QueryPrefixRequest) (*pb.QueryPrefixResponse, error) {
	cc, err := q.conn(addr)
	if err != nil {
		return nil, err
	}
	var opts []grpc.CallOption
	if token != "" {
		opts = append(opts, grpc.PerRPCCredentials(dial.Bearer(token)))
	}
	return pb.NewAdminClient(cc).QueryPrefix(ctx, req, opts...)
}

func (q *peerQueries) conn(addr string) (*grpc.ClientConn, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, errors.New("the node is closing")
	}
	if cc := q.conns[addr]; cc != nil {
		return cc, nil
	}
	o := q.opts
	o.Token = "" // the caller's goes with each call
	cc, err := dial.GRPC(addr, o)
	if err != nil {
		return nil, err
	}
	if q.conns == nil {
		q.conns = map[string]*grpc.ClientConn{}
	}
	q.conns[addr] = cc
	return cc, nil
}

// close closes the connections.
func (q *peerQueries) close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	var errs []error
	for _, cc := range q.conns {
		errs = append(errs, cc.Close())
	}
	q.conns = nil
	return errors.Join(errs...)
}
