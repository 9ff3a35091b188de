package registry

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/server/v3/embed"
)

// EmbeddedConfig configures StartEmbedded. Zero means default for every
// field but Dir.
type EmbeddedConfig struct {
	// Dir holds etcd's data (WAL, snapshots and the bbolt backend), e.g.
	// <data-dir>/etcd. Required; created (0700) if missing. Starting again
	// on the same Dir keeps the data.
	Dir string
	// ClientURL is where etcd serves clients: an http URL whose host is a
	// loopback address (127.0.0.0/8, ::1 or localhost), never a routable
	// one. Port 0 binds a free port without a race; Endpoints reports it.
	// Default "http://127.0.0.1:2379".
	ClientURL string
	// PeerURL is where etcd listens for raft peers; a single member never
	// talks to any, but etcd insists on listening. Loopback only, as
	// ClientURL. Default "http://127.0.0.1:0" (a free port).
	PeerURL string
	// Name is the etcd member name. Default "strata".
	Name string
	// Logger receives etcd's error-level logs with component=etcd; lower
	// levels are dropped. Default: discarded.
	Logger *slog.Logger
}

// Defaults of EmbeddedConfig.
const (
	DefaultEmbeddedClientURL = "http://127.0.0.1:2379"
	DefaultEmbeddedPeerURL   = "http://127.0.0.1:0"
	DefaultEmbeddedName      = "strata"
)

// Embedded is a single-member etcd running inside this process, the default
// metadata store of a stratad started without etcd endpoints (docs/design.md §6.3).
type Embedded struct {
	etcd      *embed.Etcd
	endpoints []string
	closeOnce sync.Once
	closing   *atomic.Bool // demotes etcd's shutdown errors in the log
}

// StartEmbedded starts a single-member etcd with its data in cfg.Dir and
// waits, until ctx is done, for it to elect itself and serve. On error
// nothing is left running.
//
// Settings beyond EmbeddedConfig: the gRPC gateway (etcd's HTTP/JSON API) and
// metrics listener are off, and the keyspace is compacted periodically,
// keeping one hour of history, so that registration updates do not grow the
// backend without bound.
func StartEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Embedded, error) {
	closing := new(atomic.Bool)
	ec, err := cfg.etcdConfig(closing.Load)
	if err != nil {
		return nil, err
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("registry: starting embedded etcd in %s: %w", cfg.Dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		closing.Store(true)
		e.Close()
		return nil, fmt.Errorf("registry: starting embedded etcd in %s: %w", cfg.Dir, err)
	case <-ctx.Done():
		closing.Store(true)
		e.Close()
		return nil, fmt.Errorf("registry: waiting for embedded etcd in %s to be ready: %w", cfg.Dir, ctx.Err())
	}
	em := &Embedded{etcd: e, closing: closing}
	for _, l := range e.Clients {
		em.endpoints = append(em.endpoints, "http://"+l.Addr().String())
	}
	return em, nil
}

// etcdConfig validates cfg, fills in defaults and returns etcd's config;
// etcd's log is demoted to debug while quiet returns true.
func (cfg EmbeddedConfig) etcdConfig(quiet func() bool) (*embed.Config, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("registry: embedded etcd needs a data dir: %w", ErrInvalid)
	}
	if cfg.ClientURL == "" {
		cfg.ClientURL = DefaultEmbeddedClientURL
	}
	if cfg.PeerURL == "" {
		cfg.PeerURL = DefaultEmbeddedPeerURL
	}
	if cfg.Name == "" {
		cfg.Name = DefaultEmbeddedName
	}
	curl, err := loopbackURL("client", cfg.ClientURL)
	if err != nil {
		return nil, err
	}
	purl, err := loopbackURL("peer", cfg.PeerURL)
	if err != nil {
		return nil, err
	}

	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.Dir
	ec.ListenClientUrls = []url.URL{*curl}
	ec.AdvertiseClientUrls = []url.URL{*curl}
	ec.ListenPeerUrls = []url.URL{*purl}
	ec.AdvertisePeerUrls = []url.URL{*purl}
	ec.InitialCluster = ec.InitialClusterFromName(cfg.Name)
	ec.ClusterState = embed.ClusterStateFlagNew
	// With port 0 the advertised URLs keep ":0"; the gateway dials the
	// advertised address, so it could not work. strata only speaks gRPC.
	ec.EnableGRPCGateway = false
	ec.AutoCompactionMode = "periodic"
	ec.AutoCompactionRetention = "1h"
	ec.Logger = "zap"
	ec.LogLevel = "error"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(newZapLogger(cfg.Logger, etcdLogLevel, quiet))
	return ec, nil
}

// loopbackURL parses an http URL and insists that its host is loopback.
func loopbackURL(what, s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("registry: embedded etcd %s url %q: %w: %w", what, s, ErrInvalid, err)
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("registry: embedded etcd %s url %q: scheme must be http: %w", what, s, ErrInvalid)
	}
	host, _, err := net.SplitHostPort(u.Host)
	if err != nil {
		return nil, fmt.Errorf("registry: embedded etcd %s url %q: %w: %w", what, s, ErrInvalid, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("registry: embedded etcd %s url %q: host must be loopback: %w", what, s, ErrInvalid)
	}
	return u, nil
}

// Endpoints returns the client URLs to pass in Config.Endpoints, with the
// port actually bound.
func (e *Embedded) Endpoints() []string {
	return append([]string(nil), e.endpoints...)
}

// Err delivers an error if the running etcd fails (a listener or server
// dies); the node should then shut down. It is closed once etcd has
// stopped, after Close.
func (e *Embedded) Err() <-chan error {
	return e.etcd.Err()
}

// Close stops etcd and waits for it: in-flight requests get up to etcd's
// request timeout to finish, then every listener, the raft loop and the
// backend are shut down. Close is idempotent.
func (e *Embedded) Close() {
	e.closeOnce.Do(func() {
		e.closing.Store(true)
		e.etcd.Close()
	})
}
