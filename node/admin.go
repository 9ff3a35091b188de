package node

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// startAdmin serves the admin HTTP endpoints: /metrics (Prometheus),
// /healthz, /query and /query_by_hash (server.IndexerHandler), and /debug/pprof/ when Config.Pprof is set. It uses its own mux,
// never the default one.
func (n *Node) startAdmin() error {
	lis, err := net.Listen("tcp", n.cfg.AdminListen)
	if err != nil {
		return fmt.Errorf("admin listener on %s: %w", n.cfg.AdminListen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", n.srv.Metrics().Handler())
	indexer := n.srv.IndexerHandler() // the prefix query, in Mooncake's Indexer API's shape
	mux.Handle("POST /query", indexer)
	mux.Handle("POST /query_by_hash", indexer)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, n.healthText()) })
	if n.cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	n.admin = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	n.adminLis = lis
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.admin.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("admin http server", "err", err)
		}
	}()
	return nil
}

// AdminAddr is the address of the admin HTTP server (/metrics).
func (n *Node) AdminAddr() string { return n.adminLis.Addr().String() }
