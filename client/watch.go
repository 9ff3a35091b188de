package client

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

// Watching the view.
//
// One goroutine, owned by the Client, holds a WatchMembers stream on one
// node and installs every view it sends. When the stream fails (the node
// went away, or a data call quarantined it, which kicks the stream), the
// watcher re-subscribes to another known address: the alive members of the
// last view, then the dialed address and the seeds, in turn. Attempts are
// spaced by an exponential backoff with jitter, capped at watchBackoffMax,
// and reset once a stream has stayed up for watchHealthy. The first message
// of a stream must arrive within NodeTimeout, so a node that accepts and
// never answers costs one NodeTimeout. Between streams, calls keep routing
// by the last view.

const (
	watchBackoffMin = 50 * time.Millisecond
	watchBackoffMax = 2 * time.Second
	watchHealthy    = 10 * time.Second
)

// watch runs until Close. It owns cl, the connection to addr.
func (c *Client) watch(addr string, cl *nodeClient) {
	defer c.bg.Done()
	backoff := watchBackoffMin
	for {
		start := time.Now()
		err := c.watchOnce(cl)
		cl.Close()
		if c.ctx.Err() != nil {
			return
		}
		if time.Since(start) > watchHealthy {
			backoff = watchBackoffMin
		}
		c.log.Debug("membership watch ended", "addr", addr, "err", err)
		for {
			t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
			select {
			case <-c.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, watchBackoffMax)
			addr = c.nextSource(addr)
			if cl, err = dialNode(addr, c.opts); err == nil {
				break
			}
			c.log.Debug("dialing for the membership watch", "addr", addr, "err", err)
		}
	}
}

// watchOnce holds one WatchMembers stream until it fails or is kicked.
func (c *Client) watchOnce(cl *nodeClient) error {
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	stream, err := pb.NewClusterClient(cl.conn).WatchMembers(ctx, &pb.MembersRequest{})
	if err != nil {
		return fromRPC("watch members", err)
	}
	first := time.AfterFunc(c.opts.NodeTimeout, cancel) // the view "now" must come at once
	defer first.Stop()
	defer c.setWatch("", nil)
	for got := false; ; got = true {
		resp, err := stream.Recv()
		if err != nil {
			return fromRPC("watch members", err)
		}
		if !got && !first.Stop() {
			return fmt.Errorf("watch members: no view within %v: %w", c.opts.NodeTimeout, ErrUnavailable)
		}
		c.setWatch(resp.GetNodeId(), cancel)
		if err := c.apply(resp, cl.addr); err != nil {
			c.log.Warn("ignoring membership view", "err", err)
		}
	}
}

// setWatch records which node the stream is on, so that quarantining that
// node moves the stream elsewhere.
func (c *Client) setWatch(id string, kick context.CancelFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watchNode, c.watchKick = id, kick
}

// nextSource picks the address to watch after prev failed: the next one
// in the list of alive members' addresses (not in quarantine) followed by
// the dialed address and the seeds.
func (c *Client) nextSource(prev string) string {
	r := c.routing()
	var list []string
	for i, a := range r.view.addrs {
		if !r.down[i] && a != "" && !slices.Contains(list, a) {
			list = append(list, a)
		}
	}
	for _, a := range c.sources {
		if !slices.Contains(list, a) {
			list = append(list, a)
		}
	}
	i := slices.Index(list, prev)
	return list[(i+1)%len(list)]
}
