package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/tiers"
)

// The prefix query (docs/design.md §15): how much of a prompt, from its
// first page, a node holds, in any tier and in each, and with cluster how
// much the cluster holds. A prompt's pages are spread over the members by
// placement (and spills), so no member's own prefix says what the
// cluster holds: the node asks every other live member about every key
// (per_key), in parallel, with the caller's token, and merges the answers
// key by key. A page counts when some member holds it, in a tier when some
// member holds it there; a member that does not answer holds nothing.

// PrefixPeers asks another member a prefix query: the node, over its
// connections to the other members.
type PrefixPeers interface {
	// QueryPrefix sends req to the member at addr (its gRPC address) as
	// the caller whose bearer token is token ("" none).
	QueryPrefix(ctx context.Context, addr, token string, req *pb.QueryPrefixRequest) (*pb.QueryPrefixResponse, error)
}

// peerQueryTimeout bounds a member's answer to a cluster query.
const peerQueryTimeout = 5 * time.Second

// QueryPrefix reports how many of a prompt's pages, from the first, this
// node (or the cluster) holds, in any tier and in each.
func (s *Server) QueryPrefix(ctx context.Context, req *pb.QueryPrefixRequest) (*pb.QueryPrefixResponse, error) {
	n, err := s.namespaceOf(ctx, req.GetNamespaceId())
	if err != nil {
		return nil, toStatus(err)
	}
	var keys []namespace.Key
	if len(req.GetKeys()) > 0 {
		keys, err = s.keysOf(req.GetKeys())
	} else {
		keys, err = s.tokenKeys(n, req.GetTokenIds())
	}
	if err != nil {
		return nil, toStatus(err)
	}
	var resp *pb.QueryPrefixResponse
	switch {
	case req.GetCluster():
		resp, err = s.queryCluster(ctx, n, keys, bearerOf(ctx), req.GetPerKey())
	case req.GetPerKey():
		resp, err = s.queryKeys(n, keys)
	default:
		var p prefix
		if p, err = s.queryPrefix(n, keys); err == nil {
			resp = &pb.QueryPrefixResponse{Longest: uint32(p.longest), Tiers: p.proto()}
		}
	}
	if err != nil {
		return nil, toStatus(err)
	}
	resp.PageTokens, resp.Pages, resp.NodeId = n.PageTokens, uint32(len(keys)), s.cfg.NodeID
	return resp, nil
}

// bearerOf is a gRPC call's bearer token; "" none.
func bearerOf(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("authorization"); len(v) > 0 {
		tok, _ := strings.CutPrefix(v[0], "Bearer ")
		return tok
	}
	return ""
}

// tokenKeys is the page keys of tokens in n, by its key format (full pages
// only).
func (s *Server) tokenKeys(n store.Namespace, tokens []uint32) ([]namespace.Key, error) {
	d, ok := s.descriptor(n.ID)
	if !ok {
		return nil, badRequest("namespace %s: no descriptor to compute keys from tokens", n.ID.Short())
	}
	if err := s.checkBatch(len(tokens)/int(d.PageTokens), "full pages of tokens"); err != nil {
		return nil, err
	}
	return d.PageKeys(n.ID, tokens), nil
}

// prefix is a QueryPrefix answer: pages from the first held in any tier,
// and per tier those all in it.
type prefix struct {
	longest int
	tiers   []tierPrefix
}

type tierPrefix struct {
	kind  tiers.Kind
	pages int
}

func (p prefix) proto() []*pb.TierPrefix {
	out := make([]*pb.TierPrefix, len(p.tiers))
	for i, t := range p.tiers {
		out[i] = &pb.TierPrefix{Tier: TierProto(t.kind), Pages: uint32(t.pages)}
	}
	return out
}

// queryPrefix finds how much of keys n holds, per tier.
func (s *Server) queryPrefix(n store.Namespace, keys []namespace.Key) (prefix, error) {
	if err := s.checkLimit(len(keys), "keys"); err != nil {
		return prefix{}, err
	}
	longest, tier, err := s.prefixTiers(n, keys)
	if err != nil {
		return prefix{}, err
	}
	kinds := s.tierKinds()
	p := prefix{longest: longest, tiers: make([]tierPrefix, len(kinds))}
	for t, k := range kinds {
		p.tiers[t].kind = k
		for p.tiers[t].pages < longest && int(tier[p.tiers[t].pages]) == t {
			p.tiers[t].pages++
		}
	}
	return p, nil
}

// queryKeys answers for every key: its tier's number, 0 not held.
func (s *Server) queryKeys(n store.Namespace, keys []namespace.Key) (*pb.QueryPrefixResponse, error) {
	if err := s.checkLimit(len(keys), "keys"); err != nil {
		return nil, err
	}
	tier, err := s.keyTiers(n, keys)
	if err != nil {
		return nil, err
	}
	kinds := s.tierKinds()
	for i, t := range tier {
		if t > 0 {
			tier[i] = uint8(TierProto(kinds[t-1]))
		}
	}
	p := prefixOf(tier, kinds)
	return &pb.QueryPrefixResponse{Longest: uint32(p.longest), Tiers: p.proto(), KeyTiers: tier}, nil
}

// clusterKinds are the kinds of tier a cluster answer reports, fastest
// first.
var clusterKinds = []tiers.Kind{tiers.KindGPU, tiers.KindHost, tiers.KindSSD}

// prefixOf is the prefix of keys whose tiers (by Tier number, 0 not held)
// are keyTiers, for the tier kinds given.
func prefixOf(keyTiers []byte, kinds []tiers.Kind) prefix {
	masks := make([]uint8, len(keyTiers))
	for i, t := range keyTiers {
		if t > 0 && t < 8 {
			masks[i] = 1 << t
		}
	}
	return prefixOfMasks(masks, kinds)
}

// prefixOfMasks is the prefix of keys held, per key, in the tiers whose
// numbers' bits masks[i] sets.
func prefixOfMasks(masks []uint8, kinds []tiers.Kind) prefix {
	p := prefix{tiers: make([]tierPrefix, len(kinds))}
	for p.longest < len(masks) && masks[p.longest] != 0 {
		p.longest++
	}
	for i, k := range kinds {
		bit := uint8(1) << uint8(TierProto(k))
		p.tiers[i].kind = k
		for p.tiers[i].pages < len(masks) && masks[p.tiers[i].pages]&bit != 0 {
			p.tiers[i].pages++
		}
	}
	return p
}

// queryCluster asks this node and every other live member about every key
// and merges the answers key by key.
func (s *Server) queryCluster(ctx context.Context, n store.Namespace, keys []namespace.Key, token string, perKey bool) (*pb.QueryPrefixResponse, error) {
	self, err := s.queryKeys(n, keys)
	if err != nil {
		return nil, err
	}
	self.NodeId = s.cfg.NodeID
	var peers []*pb.Member
	for _, m := range s.view().GetMembers() {
		st := m.GetState()
		if m.GetNodeId() != s.cfg.NodeID && m.GetGrpcAddress() != "" &&
			(st == pb.MemberState_MEMBER_STATE_ALIVE || st == pb.MemberState_MEMBER_STATE_SUSPECT) {
			peers = append(peers, m)
		}
	}
	answers := make([]*pb.QueryPrefixResponse, len(peers))
	errs := make([]error, len(peers))
	if len(peers) > 0 && s.cfg.Peers != nil {
		req := &pb.QueryPrefixRequest{NamespaceId: n.ID[:], PerKey: true, Keys: make([][]byte, len(keys))}
		for i := range keys {
			req.Keys[i] = keys[i][:]
		}
		qctx, cancel := context.WithTimeout(ctx, peerQueryTimeout)
		defer cancel()
		var wg sync.WaitGroup
		for i, m := range peers {
			wg.Go(func() { answers[i], errs[i] = s.cfg.Peers.QueryPrefix(qctx, m.GetGrpcAddress(), token, req) })
		}
		wg.Wait()
	}
	masks := make([]uint8, len(keys))
	addMasks := func(kt []byte) {
		for i, t := range kt {
			if t > 0 && t < 8 {
				masks[i] |= 1 << t
			}
		}
	}
	addMasks(self.KeyTiers)
	resp := &pb.QueryPrefixResponse{Nodes: []*pb.NodePrefix{nodePrefix(self)}}
	for i, m := range peers {
		a, err := answers[i], errs[i]
		switch {
		case s.cfg.Peers == nil:
			err = errors.New("this node asks no other member")
		case err == nil && len(a.GetKeyTiers()) != len(keys):
			err = fmt.Errorf("answered for %d keys of %d", len(a.GetKeyTiers()), len(keys))
		}
		if err != nil {
			resp.Nodes = append(resp.Nodes, &pb.NodePrefix{NodeId: m.GetNodeId(), Error: err.Error()})
			continue
		}
		addMasks(a.GetKeyTiers())
		np := nodePrefix(a)
		np.NodeId = m.GetNodeId()
		resp.Nodes = append(resp.Nodes, np)
	}
	p := prefixOfMasks(masks, clusterKinds)
	resp.Longest, resp.Tiers = uint32(p.longest), p.proto()
	if perKey {
		resp.KeyTiers = make([]byte, len(keys))
		for i, m := range masks {
			for t := uint8(1); t < 8; t++ {
				if m&(1<<t) != 0 {
					resp.KeyTiers[i] = t // the fastest: the smallest Tier number
					break
				}
			}
		}
	}
	return resp, nil
}

// nodePrefix is a member's per-key answer as the cluster answer lists it.
func nodePrefix(a *pb.QueryPrefixResponse) *pb.NodePrefix {
	np := &pb.NodePrefix{NodeId: a.GetNodeId(), Longest: a.GetLongest(), Tiers: a.GetTiers()}
	for _, t := range a.GetKeyTiers() {
		if t != 0 {
			np.Held++
		}
	}
	return np
}
