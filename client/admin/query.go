package admin

import (
	"context"
	"errors"
	"io"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

// What a cache-aware router asks the cluster besides the nodes' KV event
// streams (docs/design.md §15): how much of a prompt the cluster holds,
// and a namespace's pages on one node at a point of its stream.

// Prompt names a prompt's pages: its page keys in order (32 bytes each),
// or, with Keys empty, its token ids, which the namespace's key format
// turns into keys (full pages only).
type Prompt struct {
	Keys   [][]byte
	Tokens []uint32
}

// QueryPrefix asks one member that knows ns (the first that answers, in
// member order) for the cluster's answer: how many of the prompt's pages,
// from the first, some member holds, in any tier (Longest) and in each
// (Tiers), and each member's own answer (Nodes; one that did not answer
// names why and counts as holding nothing). perKey adds KeyTiers, each
// key's fastest tier. It is not a use of the pages. The member asks the
// others with this cluster's token.
func (c *Cluster) QueryPrefix(ctx context.Context, ns *Found, p Prompt, perKey bool) (*pb.QueryPrefixResponse, error) {
	req := &pb.QueryPrefixRequest{NamespaceId: ns.ID, Keys: p.Keys, TokenIds: p.Tokens, Cluster: true, PerKey: perKey}
	var errs []error
	for _, m := range ns.nodes {
		if m.conn == nil {
			errs = append(errs, m.nodeError(m.err))
			continue
		}
		resp, err := call(ctx, c, m.conn.admin.QueryPrefix, req)
		if err == nil {
			return resp, nil
		}
		errs = append(errs, m.nodeError(err))
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return nil, ErrNoMembers
	}
	return nil, errors.Join(errs...)
}

// Snapshot dumps ns's pages on member m (one of ns.Members()) at a point
// of its tenant's KV event stream, calling fn with each message of the
// dump as it arrives (next_seq, incarnation and topic in each; pageSize
// keys a message, 0 the node's default). A consumer that applies the dump
// and then the stream from next_seq misses nothing and counts nothing
// twice. The dump is one stream: ctx bounds it, not the per-call timeout.
func (c *Cluster) Snapshot(ctx context.Context, ns *Found, m *Member, pageSize int, fn func(*pb.SnapshotKeysResponse) error) error {
	if m.conn == nil {
		return m.nodeError(m.err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := m.conn.admin.SnapshotKeys(ctx, &pb.SnapshotKeysRequest{NamespaceId: ns.ID, PageSize: uint32(pageSize)})
	if err != nil {
		return m.nodeError(err)
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return m.nodeError(err)
		}
		if err := fn(resp); err != nil {
			return err
		}
	}
}
