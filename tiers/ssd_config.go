package tiers

import (
	"fmt"
	"log/slog"
	"math/bits"
	"time"
)

// The SSD tier's configuration: its durability modes (SyncMode), file
// size bounds, SSDConfig and its validation.

// SyncMode says when an SSD tier makes what it writes durable.
type SyncMode uint8

const (
	// SyncEveryPage (the default): Seal fdatasyncs the payload, writes the
	// header with the commit marker and fdatasyncs again before returning;
	// Free writes the cleared header and fdatasyncs before the slot is
	// reused. A sealed page survives power loss, a freed one never comes
	// back. Costs two fdatasyncs per Seal and one per Free.
	SyncEveryPage SyncMode = iota
	// SyncBatch is group commit with SyncEveryPage's guarantee: a Seal
	// queues its header and waits; one goroutine, in rounds, fdatasyncs
	// every file with a queued Seal, writes all the queued headers,
	// fdatasyncs those files again and then returns every Seal of the round.
	// An acknowledged page therefore survives power loss exactly as under
	// SyncEveryPage, and N concurrent Seals on a file cost two fdatasyncs,
	// not 2N, at the price of latency (up to two rounds, plus
	// BatchInterval). Free writes the cleared header and returns; the next
	// round syncs it, so a freed page may reappear after a power loss within
	// one round of its Free.
	SyncBatch
	// SyncNone never syncs page writes: Seal writes the header and returns.
	// The page cache keeps the order, so an acknowledged page survives a
	// process crash (kill -9) but not a power loss or kernel crash, after
	// which some recent pages are missing (their payload or header did not
	// reach the disk: recovery's checksum drops them) and recently freed
	// pages may reappear (still verified). Close syncs everything, so a
	// clean shutdown keeps every page. For disposable caches on disks where
	// fdatasync is slow.
	SyncNone
)

// String returns the mode's name.
func (m SyncMode) String() string {
	switch m {
	case SyncEveryPage:
		return "every-page"
	case SyncBatch:
		return "batch"
	case SyncNone:
		return "none"
	}
	return fmt.Sprintf("SyncMode(%d)", m)
}

// File size bounds and defaults.
const (
	// DefaultSSDFileSizeMax bounds SSDConfig.FileSize's default from above.
	DefaultSSDFileSizeMax = 4 << 30
	// DefaultSSDFileSizeMin bounds SSDConfig.FileSize's default from below
	// (unless Capacity is smaller).
	DefaultSSDFileSizeMin = 64 << 20
	// minSSDFileSize is the smallest file: one 4 KiB slot.
	minSSDFileSize = ssdFileHeaderSize + ssdBlock + ssdBlock
	// DefaultSSDRecoveryWorkers is SSDConfig.RecoveryWorkers' default.
	DefaultSSDRecoveryWorkers = 4
)

// SSDConfig configures an SSD tier. The zero value of each field but Dir
// and Capacity selects its default.
type SSDConfig struct {
	// Dir is the directory of the slot files, created if missing. Required.
	// The tier owns the files named class-*.slots in it.
	Dir string
	// Capacity bounds the bytes of all slot files together (headers
	// included). Required; at least 12 KiB (one file of one 4 KiB slot).
	Capacity int64
	// FileSize is the most bytes a new slot file takes, a multiple of
	// 4 KiB between 12 KiB and 1 TiB; the largest page the tier accepts is
	// the largest class that fits one file. Files are the unit in which
	// capacity moves between size classes, so smaller files adapt faster to
	// a changing page-size mix; larger ones mean fewer open files. Default
	// Capacity/64 rounded down to a power of two, between 64 MiB and 4 GiB,
	// and never more than Capacity (a 1 TiB tier gets 256 files of 4 GiB).
	FileSize int64
	// Sync says when writes are made durable. Default SyncEveryPage.
	Sync SyncMode
	// BatchInterval is, under SyncBatch, the least time between the starts
	// of two group-commit rounds; longer gathers more Seals per round.
	// Default 0: a round starts as soon as the previous one ends.
	BatchInterval time.Duration
	// RecoveryWorkers is how many goroutines read and verify payloads in
	// Recover. Default DefaultSSDRecoveryWorkers (4), at most 64.
	RecoveryWorkers int
	// Logger receives recovery reports and I/O errors that no caller can
	// be told of (a failed Free). Default: discard.
	Logger *slog.Logger
	// FS is the file system the files are in. Default OSFS(); tests inject
	// faults here.
	FS FS
	// Background runs the I/O that makes room (creating slot files,
	// syncing freed headers) in a goroutine of the tier, so that Alloc and
	// Free do no fallocate or fsync in the caller's locks (ssd_worker.go).
	// Default false: inline.
	Background bool
}

// withDefaults validates cfg and fills in defaults.
func (cfg SSDConfig) withDefaults() (SSDConfig, error) {
	if cfg.Dir == "" {
		return cfg, fmt.Errorf("ssd: no directory: %w", ErrInvalidConfig)
	}
	if cfg.Capacity < minSSDFileSize {
		return cfg, fmt.Errorf("ssd: capacity %d is less than %d: %w", cfg.Capacity, minSSDFileSize, ErrInvalidConfig)
	}
	if cfg.FileSize == 0 {
		pow := int64(1) << (bits.Len64(uint64(cfg.Capacity/64)) - 1) // Capacity >= 12 KiB
		cfg.FileSize = min(max(pow, DefaultSSDFileSizeMin), DefaultSSDFileSizeMax, cfg.Capacity&^(ssdBlock-1))
	}
	if cfg.FileSize%ssdBlock != 0 || cfg.FileSize < minSSDFileSize || cfg.FileSize > ssdMaxFileLen || cfg.FileSize > cfg.Capacity {
		return cfg, fmt.Errorf("ssd: file size %d: not a multiple of %d in [%d, min(1 TiB, capacity %d)]: %w",
			cfg.FileSize, ssdBlock, minSSDFileSize, cfg.Capacity, ErrInvalidConfig)
	}
	if cfg.Sync > SyncNone {
		return cfg, fmt.Errorf("ssd: sync mode %d: %w", cfg.Sync, ErrInvalidConfig)
	}
	if cfg.BatchInterval < 0 {
		return cfg, fmt.Errorf("ssd: batch interval %v is negative: %w", cfg.BatchInterval, ErrInvalidConfig)
	}
	if cfg.RecoveryWorkers == 0 {
		cfg.RecoveryWorkers = DefaultSSDRecoveryWorkers
	}
	if cfg.RecoveryWorkers < 0 || cfg.RecoveryWorkers > 64 {
		return cfg, fmt.Errorf("ssd: recovery workers %d not in [1, 64]: %w", cfg.RecoveryWorkers, ErrInvalidConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.FS == nil {
		cfg.FS = OSFS()
	}
	return cfg, nil
}
