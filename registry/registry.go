// Package registry is a node's view of the cluster metadata held in etcd
// (docs/design.md §6.2): node registrations, namespaces, tenants, the eviction
// coordinator's election and the cutoffs it publishes. It never holds
// per-page metadata. It is the only package in strata that imports etcd, and
// it can run the single-member etcd that a stratad with no endpoints embeds
// (StartEmbedded).
//
// Key layout, under Config.Prefix (default "/strata"):
//
//	<prefix>/nodes/<node id>                 Node as JSON, attached to the registry's lease
//	<prefix>/namespaces/<tenant>/<id hex>    NamespaceRecord as JSON
//	<prefix>/namespace-ids/<id hex>          the namespace's tenant (an index for Namespace)
//	<prefix>/tenants/<name>                  Tenant as JSON
//	<prefix>/coordinator/<lease hex>         a coordinator candidate's node id, on its session's lease
//	                                         (the lowest create revision leads: Campaign, Coordinator)
//	<prefix>/cutoffs                         Cutoffs as JSON, written only by the leader (PublishCutoffs)
//
// Every call takes a context and is also bounded by Config.RequestTimeout;
// when etcd cannot be reached in time it fails with an error wrapping
// ErrUnavailable, never with ErrNotFound.
package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Config configures Open. Zero means default for every field but Endpoints.
type Config struct {
	// Endpoints are etcd's client URLs, e.g. Embedded.Endpoints(). Required.
	Endpoints []string
	// Prefix is prepended to every key, so that several clusters can share
	// one etcd. It starts with "/" and does not end with one. Default
	// "/strata".
	Prefix string
	// DialTimeout bounds Open's first round trip to etcd. Default 5s.
	DialTimeout time.Duration
	// RequestTimeout bounds every call whose context has no earlier
	// deadline, and Close's revocation of the node lease. Default 5s.
	RequestTimeout time.Duration
	// LeaseTTL is how long a node registration outlives the process that
	// made it, if that process dies without Close. Whole seconds, rounded
	// up; etcd raises values below its minimum (about 2s with default
	// timing). Default 10s.
	LeaseTTL time.Duration
	// Logger receives the registry's logs and the etcd client's
	// error-level logs. Default: discarded.
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultPrefix         = "/strata"
	DefaultDialTimeout    = 5 * time.Second
	DefaultRequestTimeout = 5 * time.Second
	DefaultLeaseTTL       = 10 * time.Second
)

func (cfg Config) withDefaults() (Config, error) {
	if len(cfg.Endpoints) == 0 {
		return cfg, fmt.Errorf("registry: no etcd endpoints: %w", ErrInvalid)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if !strings.HasPrefix(cfg.Prefix, "/") || strings.HasSuffix(cfg.Prefix, "/") {
		return cfg, fmt.Errorf("registry: prefix %q must start and must not end with /: %w", cfg.Prefix, ErrInvalid)
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.DialTimeout < 0 || cfg.RequestTimeout < 0 || cfg.LeaseTTL < 0 {
		return cfg, fmt.Errorf("registry: negative timeout or TTL: %w", ErrInvalid)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// Registry reads and writes strata's metadata in etcd. Its methods are safe
// for concurrent use. Close it to revoke the node registration and stop its
// keepalive goroutine.
type Registry struct {
	cfg Config
	cli *clientv3.Client
	log *slog.Logger

	// ctx is cancelled by Close; it is the parent of the keepalive
	// goroutine and aborts every in-flight call.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the keepalive goroutine

	// regLock serialises changes to the node registration: RegisterNode,
	// the keepalive goroutine's re-grant, Close. It is a channel of one
	// token so that waiting for it honours a context. It guards lease,
	// nodes and closed.
	regLock chan struct{}
	lease   clientv3.LeaseID // 0 until the first RegisterNode succeeds
	nodes   map[string]Node  // registered through this Registry; re-put on re-grant
	closed  bool
}

// Open connects to etcd and checks, within cfg.DialTimeout and ctx, that it
// answers a linearizable read; if not it fails with ErrUnavailable.
func Open(ctx context.Context, cfg Config) (*Registry, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		// Detect a dead etcd member behind a half-open connection and fail
		// over to another endpoint.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		// gRPC's default reconnect backoff grows to 2 minutes; after an
		// etcd outage nodes should be back (and re-registered) in seconds.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: cfg.DialTimeout,
		})},
		Logger: newZapLogger(cfg.Logger, etcdLogLevel, nil),
	})
	if err != nil {
		return nil, fmt.Errorf("registry: connecting to etcd %v: %w", cfg.Endpoints, err)
	}
	r := &Registry{
		cfg:     cfg,
		cli:     cli,
		log:     cfg.Logger.With("component", "registry"),
		regLock: make(chan struct{}, 1),
		nodes:   make(map[string]Node),
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())

	cctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := cli.Get(cctx, cfg.Prefix, clientv3.WithKeysOnly()); err != nil {
		err = classify(cctx, fmt.Sprintf("reaching etcd %v", cfg.Endpoints), err)
		r.cancel()
		cli.Close()
		return nil, err
	}
	return r, nil
}

// Close revokes the node registration, so that the node disappears from
// Nodes at once, stops the keepalive goroutine and waits for it, and closes
// the etcd client. Calls in flight fail with ErrClosed. If etcd cannot be
// reached within Config.RequestTimeout the registration is left to expire
// after LeaseTTL and Close returns an error wrapping ErrUnavailable. Close
// is idempotent.
func (r *Registry) Close() error {
	r.cancel()
	r.regLock <- struct{}{}
	already := r.closed
	r.closed = true
	lease := r.lease
	<-r.regLock
	if already {
		return nil
	}
	r.wg.Wait()

	var err error
	if lease != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.RequestTimeout)
		if _, rerr := r.cli.Revoke(ctx, lease); rerr != nil && !errors.Is(rerr, rpctypes.ErrLeaseNotFound) {
			err = classify(ctx, "revoking node lease", rerr)
		}
		cancel()
	}
	if cerr := r.cli.Close(); cerr != nil && !errors.Is(cerr, context.Canceled) {
		err = errors.Join(err, fmt.Errorf("registry: closing etcd client: %w", cerr))
	}
	return err
}

// call derives the context of one call: bounded by RequestTimeout and
// cancelled, with cause ErrClosed, by Close.
func (r *Registry) call(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	ctx, cancelCause := context.WithCancelCause(ctx)
	stop := context.AfterFunc(r.ctx, func() { cancelCause(ErrClosed) })
	return ctx, func() {
		stop()
		cancelCause(nil)
		cancel()
	}
}

// fail wraps err, returned by etcd for a call of r whose context is ctx:
// ErrClosed once Close has begun (the client may fail before ctx notices),
// otherwise as classify.
func (r *Registry) fail(ctx context.Context, op string, err error) error {
	if r.ctx.Err() != nil {
		return fmt.Errorf("registry: %s: %w", op, ErrClosed)
	}
	return classify(ctx, op, err)
}

// classify wraps err, returned by etcd for the call whose context is ctx,
// naming op: ErrClosed if Close interrupted it, ErrUnavailable if etcd
// could not be reached or answer in time, the context's error if the caller
// cancelled.
func classify(ctx context.Context, op string, err error) error {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, ErrClosed):
		return fmt.Errorf("registry: %s: %w", op, ErrClosed)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("registry: %s: %w: %w", op, ErrUnavailable, err)
		}
		return fmt.Errorf("registry: %s: %w: %w (%v)", op, ErrUnavailable, ctx.Err(), err)
	case errors.Is(ctx.Err(), context.Canceled):
		return fmt.Errorf("registry: %s: %w", op, ctx.Err())
	case unavailable(err):
		return fmt.Errorf("registry: %s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("registry: %s: %w", op, err)
}

// unavailable reports whether err says etcd could not serve the request
// (no connection, no leader, timeout) rather than refused it.
func unavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, clientv3.ErrNoAvailableEndpoints) {
		return true
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable || ee.Code() == codes.DeadlineExceeded
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// Keys.

func (r *Registry) nodesDir() string                { return r.cfg.Prefix + "/nodes/" }
func (r *Registry) nodeKey(id string) string        { return r.nodesDir() + id }
func (r *Registry) namespacesDir() string           { return r.cfg.Prefix + "/namespaces/" }
func (r *Registry) namespaceIDsDir() string         { return r.cfg.Prefix + "/namespace-ids/" }
func (r *Registry) namespaceIDKey(id string) string { return r.namespaceIDsDir() + id }
func (r *Registry) tenantsDir() string              { return r.cfg.Prefix + "/tenants/" }
func (r *Registry) tenantKey(name string) string    { return r.tenantsDir() + name }
func (r *Registry) namespaceKey(tenant, id string) string {
	return r.namespacesDir() + tenant + "/" + id
}

// validName checks a node ID or tenant name used as one key segment.
func validName(what, s string) error {
	if s == "" || len(s) > 253 {
		return fmt.Errorf("registry: %s %q must be 1 to 253 bytes: %w", what, s, ErrInvalid)
	}
	for _, c := range s {
		if c <= ' ' || c == '/' || c == 0x7f {
			return fmt.Errorf("registry: %s %q must not contain '/', spaces or control characters: %w", what, s, ErrInvalid)
		}
	}
	return nil
}

// validHex checks a 64-digit lower-case hex string (a SHA-256).
func validHex(what, s string) error {
	if len(s) != 64 {
		return fmt.Errorf("registry: %s %q is not 64 hex digits: %w", what, s, ErrInvalid)
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("registry: %s %q is not lower-case hex: %w", what, s, ErrInvalid)
		}
	}
	return nil
}

// Health checks that etcd answers a linearizable read within ctx (or
// RequestTimeout); it returns an error wrapping ErrUnavailable otherwise.
func (r *Registry) Health(ctx context.Context) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	if _, err := r.cli.Get(ctx, r.cfg.Prefix+"/health", clientv3.WithCountOnly()); err != nil {
		return r.fail(ctx, "checking etcd health", err)
	}
	return nil
}

// Endpoints are the etcd endpoints the registry talks to.
func (r *Registry) Endpoints() []string { return r.cfg.Endpoints }
