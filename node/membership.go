package node

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/stratakv/strata/membership"
	"github.com/stratakv/strata/registry"
)

// The node in the gossip cluster: joining it (through Config.Join, the
// nodes registered in etcd, or the local copy's peers when degraded),
// and the metadata it advertises there (addresses, tier usage),
// re-gossiped every few seconds. Its value summaries go to the
// coordinator when it asks (coord.Report, membership.Collect), not by
// gossip. The gossip keys are in
// security.go.

// startMembership joins the gossip cluster: through Join, or the nodes
// registered in etcd, or alone when there are none.
func (n *Node) startMembership(ctx context.Context) error {
	host, portStr, err := net.SplitHostPort(n.cfg.GossipAddr)
	if err != nil {
		return fmt.Errorf("gossip address %q: %w", n.cfg.GossipAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("gossip port %q: %w", portStr, err)
	}
	seeds := n.cfg.Join
	if len(seeds) == 0 {
		if reg := n.reg.Load(); reg != nil {
			if seeds, err = n.peers(ctx, reg); err != nil {
				return err
			}
		} else {
			seeds = n.copy.peers()
		}
	}
	keys, err := n.cfg.gossipKeys()
	if err != nil {
		return err
	}
	c := n.cfg
	n.members, err = membership.Start(ctx, membership.Config{NodeID: n.id, BindAddr: host, BindPort: port,
		Seeds: seeds, AllowAlone: len(c.Join) == 0, Meta: n.meta, Report: n.report, Keys: keys, Partition: c.Partition, Logger: n.log,
		Profile: c.GossipProfile, ProbeInterval: c.GossipProbeInterval, GossipInterval: c.GossipInterval,
		PushPullInterval: c.GossipPushPullInterval, GossipNodes: c.GossipNodes})
	if err != nil {
		return fmt.Errorf("joining the cluster: %w", err)
	}
	n.keys = keys
	return nil
}

// peers returns the gossip addresses of the other nodes registered in etcd.
func (n *Node) peers(ctx context.Context, reg *registry.Registry) ([]string, error) {
	nodes, err := reg.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("finding cluster members in etcd: %w", err)
	}
	var seeds []string
	for _, r := range nodes {
		if r.ID != n.id && r.GossipAddress != "" {
			seeds = append(seeds, r.GossipAddress)
		}
	}
	return seeds, nil
}

// meta is what this node advertises in gossip.
func (n *Node) meta() membership.Meta {
	m := membership.Meta{NodeID: n.id, GRPCAddress: n.addr}
	if a := n.rawAdv.Load(); a != nil {
		m.RawAddress = *a
	}
	if n.events != nil {
		m.EventsIncarnation = n.events.previous + 1
	}
	for _, t := range n.tiers {
		st := t.Stats()
		m.Tiers = append(m.Tiers, membership.TierMeta{Kind: st.Kind.String(), Capacity: st.Capacity, Used: st.Used})
	}
	return m
}

// advertise re-broadcasts the node's metadata (tier usage) every few
// seconds until Close, paced to its share of the cluster's metadata
// gossip (membership's UpdateMetaPaced: in a cluster of a thousand, every
// eight minutes or so; push-pull carries it meanwhile).
func (n *Node) advertise() {
	n.every(advertiseEvery, func() {
		ctx, cancel := context.WithTimeout(context.Background(), advertiseEvery)
		if err := n.members.UpdateMetaPaced(ctx); err != nil {
			n.log.Debug("advertising metadata", "err", err)
		}
		cancel()
	})
}

// advertiseEvery is how often tier usage is re-gossiped.
const advertiseEvery = 5 * time.Second

// ParseGossipProfile parses a gossip profile name: local, lan or wan
// (membership.Profile).
func ParseGossipProfile(s string) (membership.Profile, error) {
	switch p := membership.Profile(s); p {
	case "", membership.ProfileLocal, membership.ProfileLAN, membership.ProfileWAN: // "": the default, local
		return p, nil
	}
	return "", fmt.Errorf("gossip profile %q: want local, lan or wan", s)
}
