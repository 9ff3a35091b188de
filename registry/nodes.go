package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Node is a node's registration: what other nodes, clients and the admin
// CLI learn about it from etcd. Gossip carries the fast-changing view;
// this is the durable one.
type Node struct {
	ID            string     `json:"id"`
	GRPCAddress   string     `json:"grpc_address"`
	AdminAddress  string     `json:"admin_address,omitempty"`
	GossipAddress string     `json:"gossip_address,omitempty"`
	StartedUnixMs int64      `json:"started_unix_ms"`
	Version       string     `json:"version"`
	Tiers         []TierInfo `json:"tiers,omitempty"`
}

// TierInfo is one tier of a node, as registered.
type TierInfo struct {
	Kind     string `json:"kind"` // "gpu", "host" or "ssd"
	Capacity int64  `json:"capacity"`
	Used     int64  `json:"used"`
}

// Lease design.
//
// All nodes registered through one Registry hang off one etcd lease of
// Config.LeaseTTL, granted by the first RegisterNode. A goroutine owned by
// the Registry keeps it alive; Close revokes it, so the registration
// vanishes at once, while a crashed process's registration expires after
// the TTL.
//
// The lease is lost when etcd stays unreachable for longer than the TTL
// (the client's keepalive channel closes after TTL without an answer) or
// when the lease is revoked or expired behind our back (the channel closes
// on a TTL<=0 answer). The goroutine then grants a new lease and re-puts
// every registered node on it in one transaction, retrying with jittered
// exponential backoff (100ms doubling to 5s) until it succeeds or Close is
// called; then it keeps the new lease alive. The old lease, if etcd still
// has it, is revoked: the keys have already moved to the new one.
//
// Races: RegisterNode may itself find the lease gone (ErrLeaseNotFound on
// put) and re-grant first. Both paths hold regLock and record the current
// lease in r.lease, and a re-grant only happens if r.lease is still the
// lease that was lost, so one loss yields one new lease. Close cancels
// r.ctx (which aborts any re-grant in flight and closes the keepalive
// channel), then takes regLock and marks the Registry closed, so no
// RegisterNode can start the goroutine after Close waits for it.

const (
	regrantMinBackoff = 100 * time.Millisecond
	regrantMaxBackoff = 5 * time.Second
)

// RegisterNode stores n under <prefix>/nodes/<n.ID>, attached to the
// Registry's lease (granting it, and starting its keepalive, on first use).
// Calling it again with the same ID updates the record (e.g. tier usage);
// with another ID it registers one more node on the same lease.
func (r *Registry) RegisterNode(ctx context.Context, n Node) error {
	if err := validName("node id", n.ID); err != nil {
		return err
	}
	val, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("registry: encoding node %s: %w", n.ID, err)
	}
	op := "registering node " + n.ID
	ctx, cancel := r.call(ctx)
	defer cancel()
	if err := r.lockReg(ctx); err != nil {
		return r.fail(ctx, op, err)
	}
	defer r.unlockReg()
	if r.closed {
		return fmt.Errorf("registry: %s: %w", op, ErrClosed)
	}

	if r.lease != 0 {
		_, err := r.cli.Put(ctx, r.nodeKey(n.ID), string(val), clientv3.WithLease(r.lease))
		if err == nil {
			r.nodes[n.ID] = n
			return nil
		}
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return r.fail(ctx, op, err)
		}
		r.log.Warn("node lease lost; granting a new one", "lease", fmt.Sprintf("%x", int64(r.lease)))
	}

	nodes := maps.Clone(r.nodes)
	nodes[n.ID] = n
	lease, err := r.grantAndPut(ctx, nodes)
	if err != nil {
		return r.fail(ctx, op, err)
	}
	first := r.lease == 0
	r.lease = lease
	r.nodes = nodes
	if first {
		r.wg.Add(1)
		go r.keepAlive()
	}
	return nil
}

// Nodes returns every registered node, in ID order.
func (r *Registry) Nodes(ctx context.Context) ([]Node, error) {
	return list(ctx, r, r.nodesDir(), "node", decodeJSON[Node])
}

// grantAndPut grants a lease of LeaseTTL and puts every node on it in one
// transaction. If the put fails the lease is left to expire.
func (r *Registry) grantAndPut(ctx context.Context, nodes map[string]Node) (clientv3.LeaseID, error) {
	ttl := int64((r.cfg.LeaseTTL + time.Second - 1) / time.Second)
	g, err := r.cli.Grant(ctx, ttl)
	if err != nil {
		return 0, err
	}
	ops := make([]clientv3.Op, 0, len(nodes))
	for id, n := range nodes {
		val, err := json.Marshal(n)
		if err != nil {
			return 0, fmt.Errorf("encoding node %s: %w", id, err)
		}
		ops = append(ops, clientv3.OpPut(r.nodeKey(id), string(val), clientv3.WithLease(g.ID)))
	}
	if _, err := r.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		return 0, err
	}
	return g.ID, nil
}

// keepAlive keeps the node lease alive until Close, re-granting it when it
// is lost (see "Lease design").
func (r *Registry) keepAlive() {
	defer r.wg.Done()
	backoff := regrantMinBackoff
	for {
		lease, ok := r.currentLease()
		if !ok {
			return
		}
		if r.watchLease(lease) {
			backoff = regrantMinBackoff
		}
		if r.ctx.Err() != nil {
			return
		}
		r.log.Warn("node lease lost; re-registering", "lease", fmt.Sprintf("%x", int64(lease)))
		for {
			if !r.sleep(backoff) {
				return
			}
			backoff = min(2*backoff, regrantMaxBackoff)
			err := r.regrant(lease)
			if err == nil {
				break
			}
			if r.ctx.Err() != nil {
				return
			}
			r.log.Warn("re-registering node failed; will retry", "err", err, "retry_in", backoff)
		}
	}
}

// watchLease keeps lease alive until the keepalive channel closes, and
// reports whether etcd answered at least once.
func (r *Registry) watchLease(lease clientv3.LeaseID) (answered bool) {
	ch, err := r.cli.KeepAlive(r.ctx, lease)
	if err != nil {
		return false
	}
	for range ch {
		answered = true
	}
	return answered
}

// regrant replaces lost with a new lease carrying every registered node,
// unless RegisterNode already did.
func (r *Registry) regrant(lost clientv3.LeaseID) error {
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.RequestTimeout)
	defer cancel()
	if err := r.lockReg(ctx); err != nil {
		return err
	}
	defer r.unlockReg()
	if r.lease != lost || r.closed {
		return nil
	}
	lease, err := r.grantAndPut(ctx, r.nodes)
	if err != nil {
		return classify(ctx, "re-registering nodes", err)
	}
	r.lease = lease
	r.log.Info("nodes re-registered", "lease", fmt.Sprintf("%x", int64(lease)), "nodes", len(r.nodes))
	// The keys have moved; drop the old lease if etcd kept it.
	if _, err := r.cli.Revoke(ctx, lost); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		r.log.Debug("revoking lost node lease", "err", err)
	}
	return nil
}

// currentLease returns the lease to keep alive; false once closed.
func (r *Registry) currentLease() (clientv3.LeaseID, bool) {
	if err := r.lockReg(r.ctx); err != nil {
		return 0, false
	}
	defer r.unlockReg()
	return r.lease, !r.closed
}

// sleep waits d ±20%, or until Close; it reports whether the full wait
// elapsed.
func (r *Registry) sleep(d time.Duration) bool {
	d = time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.ctx.Done():
		return false
	}
}

func (r *Registry) lockReg(ctx context.Context) error {
	select {
	case r.regLock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Registry) unlockReg() { <-r.regLock }
