package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratakv/strata/benchmarks/load"
)

// closeEach is a func that closes every system *systems holds when it is
// called (those appended after closeEach included), joining their errors.
func closeEach[S interface{ Close() error }](systems *[]S) func() error {
	return func() error {
		var err error
		for _, s := range *systems {
			err = errors.Join(err, s.Close())
		}
		return err
	}
}

// startSystems starts what cfg names, in order: one strata system per
// transport (each followed by its strata-old with --old-node), then the
// baselines. Redis is left out, with a note on
// cfg.log, when redis-server is not installed. The returned func closes
// everything started, even on error.
func startSystems(ctx context.Context, cfg config) ([]load.System, func() error, error) {
	var systems []load.System
	closeAll := closeEach(&systems)
	for _, name := range cfg.systems {
		switch name {
		case "strata":
			for _, tr := range cfg.transports {
				scfg := load.StrataConfig{Addr: cfg.addr, HostBytes: cfg.hostBytes,
					Token: cfg.token, Transport: tr, InProcess: cfg.inProcess, NodeProcs: cfg.nodeProcs}
				s, err := load.StartStrata(ctx, scfg)
				if err != nil {
					return systems, closeAll, fmt.Errorf("strata (%s): %w", tr, err)
				}
				systems = append(systems, s)
				if cfg.events {
					ecfg := scfg
					ecfg.Events, ecfg.Label = true, "events"
					if s, err = load.StartStrata(ctx, ecfg); err != nil {
						return systems, closeAll, fmt.Errorf("strata-events (%s): %w", tr, err)
					}
					systems = append(systems, s)
				}
				if cfg.oldNode == "" {
					continue
				}
				scfg.NodeBinary, scfg.Label = cfg.oldNode, "old"
				if s, err = load.StartStrata(ctx, scfg); err != nil {
					return systems, closeAll, fmt.Errorf("strata-old (%s): %w", tr, err)
				}
				systems = append(systems, s)
			}
		case "redis":
			s, err := load.StartRedisSystem(ctx)
			if errors.Is(err, load.ErrNoRedis) {
				fmt.Fprintln(cfg.log, "strata-load: skipping redis:", err)
				continue
			}
			if err != nil {
				return systems, closeAll, err
			}
			systems = append(systems, s)
		case "mooncake", "redis-py":
			start := load.StartMooncake
			if name == "redis-py" {
				start = load.StartPyRedis
			}
			s, err := start(ctx, cfg.mooncakePython)
			if errors.Is(err, load.ErrNoMooncake) || errors.Is(err, load.ErrNoRedis) {
				fmt.Fprintf(cfg.log, "strata-load: skipping %s: %v\n", name, err)
				continue
			}
			if err != nil {
				return systems, closeAll, fmt.Errorf("%s: %w", name, err)
			}
			systems = append(systems, s)
		case "tcp":
			systems = append(systems, &load.LoopbackTCP{InProcess: cfg.inProcess})
		case "memcpy":
			systems = append(systems, load.Memcpy{})
		default:
			return systems, closeAll, fmt.Errorf("unknown system %q (strata, redis, tcp, memcpy, mooncake, redis-py)", name)
		}
	}
	return systems, closeAll, nil
}
