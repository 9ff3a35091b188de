package node

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/server"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/tiers"
)

// ParseSync parses an SSD sync mode name: every-page, batch or none.
func ParseSync(s string) (tiers.SyncMode, error) {
	for _, m := range []tiers.SyncMode{tiers.SyncEveryPage, tiers.SyncBatch, tiers.SyncNone} {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("ssd sync mode %q: want every-page, batch or none", s)
}

// openTiers opens the configured tiers in order. A GPU tier that is
// unavailable (no driver, no device) is left out with a log line; any other
// failure is an error.
func (n *Node) openTiers() error {
	order := n.cfg.Tiers
	if len(order) == 0 {
		order = []string{"gpu", "host", "ssd"}
	}
	seen := map[string]bool{}
	for _, name := range order {
		name = strings.TrimSpace(name)
		if seen[name] {
			return fmt.Errorf("tier %q listed twice", name)
		}
		seen[name] = true
		t, err := n.openTier(name, len(n.cfg.Tiers) > 0)
		if err != nil {
			return err
		}
		if t != nil {
			n.tiers = append(n.tiers, t)
		}
	}
	if len(n.tiers) == 0 {
		return errors.New("no tiers: give --host-bytes or --ssd-bytes")
	}
	return nil
}

// openTier opens one tier; it returns nil for a tier that has no capacity
// configured and was not asked for explicitly.
func (n *Node) openTier(name string, explicit bool) (tiers.Tier, error) {
	switch name {
	case "host":
		h, err := tiers.NewHost(tiers.HostConfig{Capacity: n.cfg.HostBytes, Prefault: n.cfg.HostPrefault})
		return opened(name, h, err)
	case "ssd":
		if n.cfg.SSDBytes <= 0 {
			return nil, unsized("ssd", explicit)
		}
		dir := n.cfg.SSDDir
		if dir == "" {
			dir = filepath.Join(n.cfg.DataDir, "ssd")
		}
		s, err := tiers.NewSSD(tiers.SSDConfig{Dir: dir, Capacity: n.cfg.SSDBytes, Sync: n.cfg.SSDSync, Logger: n.log,
			Background: true}) // no fallocate or fsync under the store's lock
		return opened(name, s, err)
	case "gpu":
		if n.cfg.GPUBytes <= 0 {
			return nil, unsized("gpu", explicit)
		}
		g, err := tiers.NewGPU(tiers.GPUConfig{Device: n.cfg.GPUDevice, Capacity: n.cfg.GPUBytes})
		if errors.Is(err, tiers.ErrUnavailable) {
			n.log.Warn("gpu tier unavailable; running without it", "err", err)
			return nil, nil
		}
		return opened(name, g, err)
	}
	return nil, fmt.Errorf("unknown tier %q: want gpu, host or ssd", name)
}

// opened is openTier's answer for a tier's constructor's: the tier, or the
// error naming the tier (and never a nil *Host or *SSD as a non-nil Tier).
func opened[T tiers.Tier](name string, t T, err error) (tiers.Tier, error) {
	if err != nil {
		return nil, fmt.Errorf("%s tier: %w", name, err)
	}
	return t, nil
}

// unsized is openTier's answer for a tier given no capacity: nothing (the
// tier is left out) unless the tier was listed explicitly, which is an
// error.
func unsized(name string, explicit bool) error {
	if explicit {
		return fmt.Errorf("%s tier listed but --%s-bytes not set", name, name)
	}
	return nil
}

// recoveryProto reports a store recovery for NodeInfo.
func recoveryProto(durable []tiers.Tier, rec store.Recovery) []*pb.TierRecovery {
	var out []*pb.TierRecovery
	for i, st := range rec.Tiers {
		out = append(out, &pb.TierRecovery{Tier: server.TierProto(durable[i].Kind()), Recovered: uint64(st.Recovered),
			Dropped: uint64(st.Dropped), Torn: uint64(st.Torn), Bytes: uint64(st.Bytes)})
	}
	return out
}

func durableTiers(ts []tiers.Tier) []tiers.Tier {
	var out []tiers.Tier
	for _, t := range ts {
		if _, ok := t.(tiers.Durable); ok {
			out = append(out, t)
		}
	}
	return out
}
