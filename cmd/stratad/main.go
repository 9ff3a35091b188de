// Command stratad runs a strata node. With no --etcd endpoints it starts an
// embedded single-member etcd in its data directory, so this one command is
// a working node:
//
//	go run ./cmd/stratad
//
// Every flag can also come from a YAML file (--config, see config.go and
// deploy/stratad.yaml); --print-config prints the effective configuration.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/stratakv/strata/node"
)

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if pr, ok := errors.AsType[*printRequest](err); ok {
		if err = pr.print(os.Stdout); err == nil {
			return
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "stratad:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := node.Run(ctx, cfg); err != nil {
		cfg.Logger.Error("stratad failed", "err", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (node.Config, error) {
	var (
		cfg      node.Config
		host     byteSize
		ssd      byteSize
		gpu      byteSize
		tierList string
		ssdSync  string
		etcd     string
		join     string
		tokens   pairs
		logLevel slog.Level
	)
	fs := flag.NewFlagSet("stratad", flag.ContinueOnError)
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:7070", "gRPC listen address")
	fs.StringVar(&cfg.Advertise, "advertise", "", "gRPC address other nodes and clients dial (default: --listen, an unspecified host replaced by the gossip host or the hostname)")
	fs.StringVar(&cfg.DataDir, "data-dir", "strata-data", "directory for the node id and the embedded etcd")
	fs.StringVar(&tierList, "tiers", "", "tier order, fastest first, from gpu,host,ssd (default: those with a capacity, in that order)")
	fs.Var(&host, "host-bytes", "host tier capacity, e.g. 512MiB, 8GiB (default 1GiB)")
	fs.BoolVar(&cfg.HostPrefault, "host-prefault", false, "commit the host tier's memory at start instead of as puts first touch it (a fresh page's first touch is dearer than a put; a host short of memory fails at start)")
	fs.Var(&ssd, "ssd-bytes", "SSD tier capacity (default 0: no SSD tier)")
	fs.StringVar(&cfg.SSDDir, "ssd-dir", "", "directory of the SSD tier's slot files (default <data-dir>/ssd)")
	fs.StringVar(&ssdSync, "ssd-sync", "every-page", "SSD durability: every-page (survives power loss), batch (group commit, same guarantee), none (survives a process crash only)")
	fs.Var(&gpu, "gpu-bytes", "GPU tier capacity (default 0: no GPU tier)")
	fs.IntVar(&cfg.GPUDevice, "gpu-device", 0, "CUDA device of the GPU tier")
	fs.StringVar(&etcd, "etcd", "", "comma-separated etcd endpoints; empty starts an embedded etcd")
	fs.StringVar(&cfg.EmbeddedEtcdURL, "embedded-etcd-url", "http://127.0.0.1:2379", "client URL of the embedded etcd (loopback only; port 0 = any free port)")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", 0, "default read-lease TTL (default 10s)")
	fs.DurationVar(&cfg.MaxLeaseTTL, "max-lease-ttl", 0, "maximum read-lease TTL (default 60s)")
	fs.DurationVar(&cfg.ReserveTTL, "reserve-ttl", 0, "default reservation deadline (default 30s)")
	fs.DurationVar(&cfg.Transfer.PinTTL, "transfer-pin-ttl", 0, "how long a transfer room's publish pins its pages for the consumer; an attempt not acknowledged by then expires and its pins go (default 60s)")
	fs.DurationVar(&cfg.Transfer.OpenTTL, "transfer-open-ttl", 0, "how long an opened transfer attempt waits for its producer's publish before it expires (default 30s)")
	fs.DurationVar(&cfg.MaxReserveTTL, "max-reserve-ttl", 0, "longest reservation deadline a client may ask for (default 5m; --reserve-ttl may not exceed it)")
	cfg.ReserveShare = node.DefaultReserveShare
	fs.Var(share{&cfg.ReserveShare}, "reserve-share", "the most of each tier (a `share` in (0, 1]) that one tenant's open reservations may hold, every tenant's alike (tokens from flags or etcd, quota or none); a page past it in every tier is refused as over quota")
	fs.StringVar(&cfg.AdminListen, "admin-listen", "127.0.0.1:0", "admin HTTP address for /metrics and /healthz (port 0 = a free port, logged)")
	fs.BoolVar(&cfg.Pprof, "pprof", false, "serve /debug/pprof on the admin address")
	fs.StringVar(&cfg.GossipAddr, "gossip-addr", "127.0.0.1:0", "gossip (memberlist) bind address; port 0 = a free port")
	fs.StringVar(&join, "join", "", "comma-separated gossip addresses to join (default: the nodes registered in etcd)")
	fs.Var(profileFlag{&cfg}, "gossip-profile", "memberlist's defaults: local (up to about 50 nodes), lan (50 and more in one datacenter; simulated to 1,000), wan (across sites) (default local)")
	fs.DurationVar(&cfg.GossipProbeInterval, "gossip-probe-interval", 0, "time between failure-detection probes (default: the profile's: local 500ms, lan 500ms, wan 5s)")
	fs.DurationVar(&cfg.GossipInterval, "gossip-interval", 0, "time between gossip rounds (default: the profile's: local 100ms, lan 200ms, wan 500ms)")
	fs.IntVar(&cfg.GossipNodes, "gossip-nodes", 0, "members each gossip round sends to (default: the profile's: 3, wan 4)")
	fs.DurationVar(&cfg.GossipPushPullInterval, "gossip-push-pull-interval", 0, "time between full state exchanges, stretched by memberlist past 32 members (default: the profile's: local 10s, lan 30s, wan 60s)")
	fs.Var(&tokens, "tenant-token", "tenant=token; repeat for more tenants (none: the node is open)")
	fs.StringVar(&cfg.AdminToken, "admin-token", "", "token that may see and use every namespace")
	fs.Var(eventsFlag{&cfg.Events}, "events", "tenant=PUB[,REPLAY]: the tenant's namespaces publish vLLM's KV event stream on a ZMQ PUB socket at PUB and a replay socket at REPLAY (host:port, port 0 a free one); subscribers give the tenant's name and token (PLAIN); repeatable")
	fs.DurationVar(&cfg.Events.Linger, "events-linger", 0, "the longest an event waits while events flow, so that a flow rides a few batches a second (an event after a quiet spell goes at once; at most 1s; negative: none) (default 10ms)")
	fs.Var(&pairsFile{into: &tokens}, "tenant-token-file", "file of tenant=token lines (# comments), besides any --tenant-token; repeatable")
	fs.Var(&secretFile{into: &cfg.AdminToken}, "admin-token-file", "file holding the admin token (instead of --admin-token, which shows on command lines)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM certificate chain of the node: gRPC and the raw plane serve TLS only (re-read when it changes)")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&cfg.TLSCA, "tls-ca", "", "PEM CA bundle peers' (and, with --tls-client-auth, clients') certificates are checked against (default: system roots for peers)")
	fs.BoolVar(&cfg.TLSClientAuth, "tls-client-auth", false, "require client certificates signed by --tls-ca (mTLS)")
	fs.StringVar(&cfg.GossipKeyFile, "gossip-key-file", "", "file of base64 gossip encryption keys, one per line, the first encrypting; re-read every 2s (rotation)")
	fs.BoolVar(&cfg.NoReflection, "no-reflection", false, "turn gRPC server reflection off")
	fs.IntVar(&cfg.MaxBatch, "max-batch", 0, "maximum keys or pages per request (default 16384)")
	fs.BoolVar(&cfg.NoCutoffFloor, "no-cutoff-floor", false, "do not refuse puts worth less than a quarter of the cluster's eviction cutoff (coordination still runs, for status)")
	fs.Float64Var(&cfg.LookupBookkeeping, "lookup-bookkeeping", 0, "the most of the node's CPU time (GOMAXPROCS × wall time) that lookups' eviction bookkeeping may take; past it lookups shed theirs and the policy samples them (default 0.25; negative: no limit)")
	fs.DurationVar(&cfg.OrphanGrace, "orphan-grace", 0, "how long after its last put a page whose parent another node dropped is only marked an orphan, not dropped at once (default 1s; negative: none)")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", 0, "how long shutdown waits for in-flight requests (default 10s)")
	fs.StringVar(&cfg.ShmSocket, "shm-socket", "", `Unix socket for same-host clients (shared memory); "off" disables (default <data-dir>/strata.sock)`)
	fs.Func("shm-tenants", "comma-separated tenants whose same-host clients may map the host arena, which holds every tenant's pages (default none: only the admin, or everyone on an open node)", func(v string) error {
		cfg.ShmTenants = append(cfg.ShmTenants, strings.Split(v, ",")...)
		return nil
	})
	fs.StringVar(&cfg.AuditLog, "audit-log", "", "append the audit log (admin actions, tenant changes) to this file as JSON lines (default: the node's log)")
	fs.DurationVar(&cfg.TenantPoll, "tenant-poll", 0, "how often tenants, tokens and quotas are re-read from etcd (default 1s)")
	fs.DurationVar(&cfg.StallTimeout, "stall-timeout", 0, "cut the connection of a gRPC get that has not sent a page, a gRPC put or write that has received nothing, or a raw-plane client that has not taken an answer, in this long (default 30s; negative: never on gRPC)")
	fs.DurationVar(&cfg.RawIdleTimeout, "raw-idle-timeout", 0, "close raw data-plane connections idle this long (default 2m; negative: never)")
	fs.StringVar(&cfg.RawListen, "raw-listen", "", `TCP address of the raw data plane for remote clients, advertised to them; "off" disables (default: a free port on the --listen host)`)
	fs.StringVar(&cfg.RDMADevice, "rdma-device", "", "serve the rdma plane on this RDMA device (as ibv_devices names it): remote clients of the admin and the shm tenants read host-arena pages with RDMA READ; needs a build with -tags rdma; registering the arena commits its memory (default off)")
	fs.IntVar(&cfg.RDMAGIDIndex, "rdma-gid-index", 0, "GID index the rdma plane addresses peers by (RoCE needs the right one)")
	fs.TextVar(&logLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn, error")
	if err := parseConfig(fs, args); err != nil {
		return cfg, err
	}
	cfg.HostBytes, cfg.SSDBytes, cfg.GPUBytes = int64(host), int64(ssd), int64(gpu)
	if cfg.ReserveTTL > 0 && cfg.MaxReserveTTL > 0 && cfg.ReserveTTL > cfg.MaxReserveTTL {
		return cfg, fmt.Errorf("--reserve-ttl %v exceeds --max-reserve-ttl %v", cfg.ReserveTTL, cfg.MaxReserveTTL)
	}
	if tierList != "" {
		cfg.Tiers = strings.Split(tierList, ",")
	}
	var err error
	if cfg.SSDSync, err = node.ParseSync(ssdSync); err != nil {
		return cfg, err
	}
	if join != "" {
		cfg.Join = strings.Split(join, ",")
	}
	if etcd != "" {
		cfg.EtcdEndpoints = strings.Split(etcd, ",")
	}
	cfg.TenantTokens = make(map[string]string, len(tokens))
	for _, p := range tokens {
		cfg.TenantTokens[p.v] = p.k
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel}))
	return cfg, nil
}

// profileFlag is --gossip-profile: a gossip profile name
// (node.ParseGossipProfile), which --print-config prints back.
type profileFlag struct{ cfg *node.Config }

func (f profileFlag) String() string {
	if f.cfg == nil {
		return ""
	}
	return string(f.cfg.GossipProfile)
}

func (f profileFlag) Set(v string) error {
	p, err := node.ParseGossipProfile(v)
	if err != nil {
		return err
	}
	f.cfg.GossipProfile = p
	return nil
}
