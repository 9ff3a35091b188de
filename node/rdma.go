package node

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/stratakv/strata/rdma"
	"github.com/stratakv/strata/server"
	"github.com/stratakv/strata/tiers"
)

// rdmaPlane is what the node owns of the rdma plane (server/rdma.go): the
// device, the host arena's second mapping and its region on the device,
// and the server's plane.
type rdmaPlane struct {
	dev    *rdma.Device
	arena  []byte
	region *rdma.Region
	plane  *server.RDMAPlane
}

// startRDMA serves the rdma plane on Config.RDMADevice: it opens the
// device, maps the host arena once more and registers it (which commits
// its memory, as HostPrefault does), and has the server serve Rdma
// streams and advertise the plane. A node that cannot (built without the
// rdma tag, no such device, no host tier) runs without it, logged:
// clients use the next plane.
func (n *Node) startRDMA(srv *server.Server) {
	if n.cfg.RDMADevice == "" {
		return
	}
	p, err := n.openRDMA(srv)
	if err != nil {
		n.log.Warn("rdma: not serving the rdma plane; clients use the next plane", "device", n.cfg.RDMADevice, "err", err)
		return
	}
	n.rdma = p
	n.log.Info("rdma: serving the rdma plane", "device", p.dev.Name(), "arena_bytes", len(p.arena))
}

func (n *Node) openRDMA(srv *server.Server) (*rdmaPlane, error) {
	var host *tiers.Host
	for _, t := range n.tiers {
		if h, ok := t.(*tiers.Host); ok {
			host = h
		}
	}
	if host == nil {
		return nil, errors.New("no host tier to serve")
	}
	dev, err := rdma.Open(rdma.Config{Device: n.cfg.RDMADevice, GIDIndex: n.cfg.RDMAGIDIndex})
	if err != nil {
		return nil, err
	}
	p := &rdmaPlane{dev: dev}
	if p.arena, err = unix.Mmap(host.FD(), 0, int(host.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return nil, errors.Join(fmt.Errorf("mapping the host arena: %w", err), p.close())
	}
	if p.region, err = dev.Register(p.arena); err != nil {
		return nil, errors.Join(err, p.close())
	}
	if p.plane, err = srv.ServeRDMA(server.RDMAConfig{Device: dev, Host: host, Arena: p.region, Tenants: n.cfg.ShmTenants}); err != nil {
		return nil, errors.Join(err, p.close())
	}
	return p, nil
}

// server is the server's plane, nil when the node serves none: its
// Advertise then advertises nothing.
func (p *rdmaPlane) server() *server.RDMAPlane {
	if p == nil {
		return nil
	}
	return p.plane
}

// close releases the plane's parts, the queue pairs first: call it once
// the gRPC server has stopped (its Rdma streams ended).
func (p *rdmaPlane) close() error {
	var errs []error
	if p.plane != nil {
		errs = append(errs, p.plane.Close())
	}
	if p.region != nil {
		errs = append(errs, p.region.Deregister())
	}
	if p.arena != nil {
		errs = append(errs, unix.Munmap(p.arena))
	}
	errs = append(errs, p.dev.Close())
	return errors.Join(errs...)
}
