package coord

import (
	"errors"
	"fmt"

	"github.com/stratakv/strata/eviction"
)

// Framing of a node's per-tier summaries, as a node reports them to the
// coordinator (Coord.Report, membership.Collect; a node of an older
// release gossiped it as membership.Meta.Summary):
//
//	byte  framing version (1)
//	then, per tier sent, fastest first:
//	  byte       the tier's index in Meta.Tiers
//	  140 bytes  eviction.Summary.MarshalBinary
//
// A report of membership.MaxReportSize (1,024) bytes holds seven tiers'
// summaries (1 + 3 × 141 = 424 bytes for three); when they do not all
// fit, EncodeSummaries sends the fastest tiers that do, and a tier without
// a summary simply takes no part in its cluster cutoff.
const (
	framingVersion = 1
	frameSize      = 1 + eviction.SummarySize
)

// ErrBadFraming is returned by DecodeSummaries for bytes that are not an
// encoding of EncodeSummaries.
var ErrBadFraming = errors.New("malformed summary framing")

// EncodeSummaries encodes sums (one per tier, in tier order) in at most
// budget bytes: as many tiers as fit, fastest first. It returns nil when
// not even one tier fits, and how many tiers it encoded.
func EncodeSummaries(sums []eviction.Summary, budget int) ([]byte, int, error) {
	n := min(len(sums), (budget-1)/frameSize, 255)
	if n <= 0 {
		return nil, 0, nil
	}
	b := make([]byte, 0, 1+n*frameSize)
	b = append(b, framingVersion)
	for i := range n {
		b = append(b, byte(i))
		var err error
		if b, err = sums[i].AppendBinary(b); err != nil {
			return nil, 0, fmt.Errorf("encoding summary of tier %d: %w", i, err)
		}
	}
	return b, n, nil
}

// DecodeSummaries decodes an encoding of EncodeSummaries into summaries by
// tier index (tiers not sent are absent). Empty input decodes to none.
func DecodeSummaries(b []byte) (map[int]eviction.Summary, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if b[0] != framingVersion || (len(b)-1)%frameSize != 0 {
		return nil, fmt.Errorf("%w: version %d, %d bytes", ErrBadFraming, b[0], len(b))
	}
	out := make(map[int]eviction.Summary, (len(b)-1)/frameSize)
	for f := b[1:]; len(f) > 0; f = f[frameSize:] {
		var s eviction.Summary
		if err := s.UnmarshalBinary(f[1:frameSize]); err != nil {
			return nil, fmt.Errorf("%w: tier %d: %w", ErrBadFraming, f[0], err)
		}
		if _, dup := out[int(f[0])]; dup {
			return nil, fmt.Errorf("%w: tier %d twice", ErrBadFraming, f[0])
		}
		out[int(f[0])] = s
	}
	return out, nil
}
