package node

import (
	"net"
	"path/filepath"
	"strconv"

	"github.com/stratakv/strata/server"
	"github.com/stratakv/strata/tiers"
	"github.com/stratakv/strata/transport"
)

// startShm serves the host tier's arena to same-host clients on
// Config.ShmSocket, and links transport.SocketLink(gRPC port) to it so clients
// that know only the node's address find it. A node without a host tier,
// or whose socket cannot be bound, runs without shm (logged): clients use
// tcp. Every node, with shm or not, first removes the links that nodes
// killed before they could (SIGKILL, a crash) left in its user's link
// directory.
func (n *Node) startShm(srv *server.Server) {
	n.removeStaleLinks()
	path := n.cfg.ShmSocket
	if path == "off" {
		return
	}
	if path == "" {
		path = filepath.Join(n.cfg.DataDir, "strata.sock")
	}
	var host *tiers.Host
	for _, t := range n.tiers {
		if h, ok := t.(*tiers.Host); ok {
			host = h
		}
	}
	if host == nil {
		n.log.Info("shm: no host tier; same-host clients use tcp")
		return
	}
	link := ""
	if _, port, err := net.SplitHostPort(n.lis.Addr().String()); err == nil {
		if p, err := strconv.Atoi(port); err == nil {
			link = transport.SocketLink(p)
		}
	}
	l, err := srv.ListenShm(server.ShmConfig{Path: path, Link: link, Host: host, Tenants: n.cfg.ShmTenants})
	if err != nil {
		n.log.Warn("shm: not serving same-host clients", "err", err)
		return
	}
	n.shm = l
	n.log.Info("shm: serving same-host clients", "socket", path, "link", link)
}

// removeStaleLinks removes the socket links of nodes gone
// (transport.RemoveStaleLinks), never a live node's.
func (n *Node) removeStaleLinks() {
	removed, err := transport.RemoveStaleLinks(transport.SocketLinkDir())
	if err != nil {
		n.log.Warn("shm: not removing stale socket links", "err", err)
	}
	if len(removed) > 0 {
		n.log.Info("shm: removed the socket links of nodes gone", "links", removed)
	}
}

// startRaw serves the raw data plane (server/raw.go) on Config.RawListen;
// a node whose address cannot be bound runs without it (logged): clients
// use gRPC.
func (n *Node) startRaw(srv *server.Server) {
	addr := n.cfg.RawListen
	if addr == "off" {
		return
	}
	if addr == "" {
		host, _, err := net.SplitHostPort(n.lis.Addr().String())
		if err != nil {
			n.log.Warn("raw: not serving", "err", err)
			return
		}
		addr = net.JoinHostPort(host, "0")
	}
	l, err := srv.ListenRaw(server.RawConfig{Listen: addr, TLS: n.tls, IdleTimeout: n.cfg.RawIdleTimeout,
		WriteTimeout: max(n.cfg.StallTimeout, 0)})
	if err != nil {
		n.log.Warn("raw: not serving the tcp data plane; clients use gRPC", "err", err)
		return
	}
	n.raw = l
	n.log.Info("raw: serving the tcp data plane", "addr", l.Addr())
}

// RawAddr is the raw data plane's address, "" when it is off.
func (n *Node) RawAddr() string {
	if n.raw == nil {
		return ""
	}
	return n.raw.Addr()
}
