package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/stratakv/strata/benchmarks/load"
)

// transferConfig is the transfer case's part of a run (--transfer): one
// prompt's KV moved from a producer process to a consumer process, instead
// of the put, get and lookup cases.
type transferConfig struct {
	on         bool
	tokens     int
	tokenBytes int
	pageTokens int
	streams    []int
}

// addTransferFlags registers the transfer case's flags; their defaults
// are an 8,192-token prompt of Llama-3-8B in bf16, 16-token pages.
func addTransferFlags(fs *flag.FlagSet, t *transferConfig) {
	t.tokenBytes, t.streams = 128<<10, []int{1}
	fs.BoolVar(&t.on, "transfer", false, "measure the transfer of one prompt's KV from a producer process to a consumer process "+
		"(strata: put, publish the room, await, get, ack; memcpy, tcp and mooncake: put, then get) instead of put, get and lookup")
	fs.IntVar(&t.tokens, "transfer-tokens", 8192, "the transferred prompt's tokens")
	fs.IntVar(&t.pageTokens, "page-tokens", 16, "tokens per page of the transfer")
	fs.Func("token-bytes", "KV bytes per token of the transfer (default 128K: Llama-3-8B in bf16)", func(s string) error {
		n, err := parseBytes(s)
		t.tokenBytes = int(n)
		return err
	})
	fs.Func("streams", "streams (connections, each with a goroutine) each side of a transfer moves its pages over, a case each (default 1)", func(s string) error {
		t.streams = nil
		for _, f := range split(s) {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				return fmt.Errorf("%q: want a positive count", f)
			}
			t.streams = append(t.streams, n)
		}
		return nil
	})
}

// runTransfer starts the transfer's systems, measures, and writes
// transfer.md into cfg.out and onto cfg.log.
func runTransfer(ctx context.Context, cfg config) (err error) {
	t := cfg.transfer
	switch {
	case t.tokens <= 0 || t.pageTokens <= 0 || t.tokens%t.pageTokens != 0:
		return fmt.Errorf("--transfer-tokens %d: want a positive multiple of --page-tokens %d", t.tokens, t.pageTokens)
	case cfg.oldNode != "":
		return errors.New("--old-node: not with --transfer")
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	tc := load.TransferConfig{Bytes: t.tokens * t.tokenBytes, PageBytes: t.pageTokens * t.tokenBytes, Streams: t.streams,
		Rounds: cfg.rounds, Progress: cfg.progress}
	systems, closeAll, err := startTransferSystems(ctx, cfg, tc)
	defer func() { err = errors.Join(err, closeAll()) }()
	if err != nil {
		return err
	}
	started := time.Now().UTC()
	results, err := load.RunTransfer(ctx, tc, systems)
	var h strings.Builder
	fmt.Fprintf(&h, "# strata-load --transfer\n\n- command: `strata-load %s`\n- started %s, %s, %d CPUs; ",
		strings.Join(cfg.args, " "), started.Format(time.RFC3339), runtime.Version(), runtime.NumCPU())
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(&h, "load average at the end: %s\n", strings.Join(strings.Fields(string(la))[:3], " "))
	}
	h.WriteString("- strata: the node, the producer and the consumer are processes of their own; " +
		"publish → loaded is from the producer's publish call to the consumer's last page in its buffers, " +
		"put+publish → loaded from the producer's first put; memcpy, tcp and mooncake have no publish: " +
		"their consumer starts when the puts returned; ÷ columns: the system's GB/s over the baseline's " +
		"(publish → loaded / put+publish → loaded)\n")
	var md strings.Builder
	if werr := load.WriteTransferMarkdown(&md, h.String(), results); werr != nil {
		return errors.Join(err, werr)
	}
	path := filepath.Join(cfg.out, "transfer.md")
	err = errors.Join(err, os.WriteFile(path, []byte(md.String()), 0o644))
	fmt.Fprintf(cfg.log, "%s\nstrata-load: wrote %s\n", md.String(), path)
	for _, r := range results {
		if r.Err != "" {
			err = errors.Join(err, fmt.Errorf("%s, %d stream(s): %s", r.System, r.Streams, r.Err))
		}
	}
	return err
}

// startTransferSystems starts what cfg names that has a transfer: a strata
// system per transport, memcpy, tcp, mooncake; the others are left out
// with a note on cfg.log. A strata node's host tier is at least eight
// times the transfer: its default quota of pinned bytes per tenant is an
// eighth of the tier (node.Config.Transfer). The returned func closes
// everything started, even on error.
func startTransferSystems(ctx context.Context, cfg config, tc load.TransferConfig) ([]load.TransferSystem, func() error, error) {
	var systems []load.TransferSystem
	closeAll := closeEach(&systems)
	p := tc.Params()
	for _, name := range cfg.systems {
		var s load.TransferSystem
		var err error
		switch name {
		case "strata":
			for _, tr := range cfg.transports {
				scfg := load.StrataConfig{Addr: cfg.addr, HostBytes: max(cfg.hostBytes, 8*int64(p.Bytes())),
					Token: cfg.token, Transport: tr, InProcess: cfg.inProcess, NodeProcs: cfg.nodeProcs}
				st, err := load.StartStrataTransfer(ctx, scfg, p)
				if err != nil {
					return systems, closeAll, fmt.Errorf("strata (%s): %w", tr, err)
				}
				systems = append(systems, st)
			}
			continue
		case "memcpy":
			s = load.NewMemcpyTransfer(p)
		case "tcp":
			s, err = load.StartTCPTransfer(ctx, p)
		case "mooncake":
			s, err = load.StartMooncakeTransfer(ctx, cfg.mooncakePython, p)
			if errors.Is(err, load.ErrNoMooncake) {
				fmt.Fprintln(cfg.log, "strata-load: skipping mooncake:", err)
				continue
			}
		default:
			fmt.Fprintf(cfg.log, "strata-load: skipping %s: no transfer case\n", name)
			continue
		}
		if err != nil {
			return systems, closeAll, fmt.Errorf("%s: %w", name, err)
		}
		systems = append(systems, s)
	}
	return systems, closeAll, nil
}
