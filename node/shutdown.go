package node

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
)

// Stopping a node: Close drains in-flight requests, demotes the volatile
// tiers' pages to the durable tier, and closes every part; closeParts
// also undoes a Start that failed half-way.

// Close drains in-flight requests, demotes the pages of the volatile tiers
// to the SSD tier (most valuable first; both within DrainTimeout of the
// call), then releases every reservation and lease, deregisters and stops
// etcd.
func (n *Node) Close() error {
	began := time.Now()
	n.health.Shutdown()
	close(n.stop)
	n.cancel()
	if n.admin != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = n.admin.Shutdown(ctx)
		cancel()
	}
	n.wg.Wait()
	n.closeCoord() // resign first: another node takes over at once
	if err := n.members.Leave(2 * time.Second); err != nil {
		n.log.Warn("leaving the cluster", "err", err)
	}
	n.srv.Stop()
	n.closeTransfer() // waiting consumers hear of it before the drain
	done := make(chan struct{})
	go func() {
		n.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(n.cfg.DrainTimeout):
		n.log.Warn("drain timeout passed; closing remaining requests")
		n.grpc.Stop()
		<-done
	}
	err := <-n.served
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	n.demoteVolatile(began.Add(n.cfg.DrainTimeout))
	return errors.Join(err, n.closeParts())
}

// demoteVolatile moves what the volatile tiers hold to the durable one
// (store.DemoteAll), most valuable first, until deadline: a planned
// restart keeps those pages.
func (n *Node) demoteVolatile(deadline time.Time) {
	if len(durableTiers(n.tiers)) == 0 || len(durableTiers(n.tiers)) == len(n.tiers) {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	began := time.Now()
	moved, err := n.store.DemoteAll(ctx)
	if err != nil {
		n.log.Warn("shutdown: drain timeout passed before every volatile page was demoted", "moved", moved,
			"took", time.Since(began).Round(time.Millisecond))
		return
	}
	n.log.Info("shutdown: volatile pages demoted to the durable tier", "moved", moved,
		"took", time.Since(began).Round(time.Millisecond))
}

// closeCoord stops coordination and the hint sender; it is idempotent.
func (n *Node) closeCoord() {
	if c := n.coord.Load(); c != nil {
		c.Close()
	}
	if n.hints != nil {
		n.hints.Close()
	}
	if n.handoff != nil {
		n.handoff.Close()
	}
}

func (n *Node) closeParts() error {
	var errs []error
	n.closeCoord()
	n.closeTransfer()
	if n.shm != nil {
		errs = append(errs, n.shm.Close())
	}
	if n.raw != nil {
		errs = append(errs, n.raw.Close())
	}
	if n.rdma != nil {
		errs = append(errs, n.rdma.close())
	}
	if n.members != nil {
		errs = append(errs, n.members.Close())
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	errs = append(errs, n.closeEvents(), n.queries.close())
	if reg := n.reg.Load(); reg != nil {
		errs = append(errs, reg.Close())
	}
	if n.etcd != nil {
		n.etcd.Close()
	}
	if n.auditF != nil {
		errs = append(errs, n.auditF.Close())
	}
	for _, t := range n.tiers {
		errs = append(errs, t.Close())
	}
	if n.lis != nil && n.grpc == nil {
		errs = append(errs, n.lis.Close())
	}
	return errors.Join(errs...)
}
