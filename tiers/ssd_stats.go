package tiers

import "slices"

// What an SSD tier reports of itself: capacity and usage (Stats), and the
// same per size class (ClassStats).

// Stats reports capacity and usage: Capacity is SSDConfig.Capacity (file
// bytes, headers included), or less while the tier is in a fault
// (ssd_health.go), Used the slot sizes of live extents. The figures are
// read without a common lock and may mix moments.
func (s *SSD) Stats() Stats {
	return Stats{
		Kind:      KindSSD,
		Capacity:  s.effectiveCapacity(),
		Fault:     s.currentFault(),
		Used:      s.used.Load(),
		Extents:   s.extents.Load(),
		Requested: s.request.Load(),
	}
}

// SSDClassStats describes one size class of an SSD tier.
type SSDClassStats struct {
	Size      int64 // slot size in bytes: the Extent.Cap of the class
	Files     int   // slot files of the class
	FileBytes int64 // their length on disk
	Slots     int64 // slots in them
	Extents   int64 // live extents
	Requested int64 // sum of Len over live extents
}

// ClassStats reports every class that holds files, smallest first.
// FileBytes - Slots*Size is the class's header overhead; Slots*Size -
// Requested is free or rounding space.
func (s *SSD) ClassStats() []SSDClassStats {
	s.poolMu.Lock()
	files := slices.Clone(s.files)
	s.poolMu.Unlock()
	byClass := map[int]*SSDClassStats{}
	for _, f := range files {
		cs := byClass[f.class]
		if cs == nil {
			cs = &SSDClassStats{Size: f.slotSize}
			byClass[f.class] = cs
		}
		cs.Files++
		cs.FileBytes += f.length
		cs.Slots += int64(f.slots)
	}
	out := make([]SSDClassStats, 0, len(byClass))
	for cls, cs := range byClass {
		cl := &s.classes[cls]
		cl.mu.Lock()
		cs.Extents, cs.Requested = cl.extents, cl.requested
		cl.mu.Unlock()
		out = append(out, *cs)
	}
	slices.SortFunc(out, func(a, b SSDClassStats) int { return int(a.Size - b.Size) })
	return out
}
