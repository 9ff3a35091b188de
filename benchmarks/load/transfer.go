package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// The transfer case (issue 40): the KV of one prompt moved from a producer
// process to a consumer process, as a prefill engine hands a request to a
// decode engine through the store (docs/design.md §14). Through strata the
// producer puts the pages, opens and publishes the room; the consumer, which
// was already awaiting the room, gets every page into buffers it owns and
// acknowledges (StrataTransfer, transfer_peer.go). The same bytes move
// through the limits, memcpy and loopback TCP (transfer_limits.go), and
// through Mooncake Store's put and get (MooncakeTransfer). The systems take
// turns transfer by transfer, as load.Run's do slice by slice.

// TransferConfig is what one transfer run measures. Zero fields take their
// defaults.
type TransferConfig struct {
	// Bytes is the prompt's KV. Default 1 GiB: 8,192 tokens of Llama-3-8B
	// in bf16 (32 layers × 8 KV heads × head dim 128 × K and V × 2 bytes =
	// 128 KiB a token).
	Bytes int
	// PageBytes is one page's. Default 2 MiB (16 tokens).
	PageBytes int
	// Streams are the cases: how many connections (each with a goroutine)
	// each side moves its share of the pages over. Default 1.
	Streams []int
	// Rounds is how many measured transfers each system makes per case,
	// the systems taking turns (every system's first, then every system's
	// second, ...), after one unmeasured transfer each. Default 5.
	Rounds int
	// Progress, if set, receives a line per transfer. Default none.
	Progress io.Writer
}

func (c *TransferConfig) defaults() {
	if c.Bytes <= 0 {
		c.Bytes = 1 << 30
	}
	if c.PageBytes <= 0 {
		c.PageBytes = 2 << 20
	}
	if len(c.Streams) == 0 {
		c.Streams = []int{1}
	}
	if c.Rounds <= 0 {
		c.Rounds = 5
	}
}

// Params are the pages the systems move, for starting them.
func (c TransferConfig) Params() TransferParams {
	c.defaults()
	return TransferParams{PageBytes: c.PageBytes, Pages: max(1, c.Bytes/c.PageBytes), Streams: slices.Max(c.Streams)}
}

// TransferParams are what a TransferSystem is started for.
type TransferParams struct {
	// PageBytes is every page's size, Pages how many a transfer moves.
	PageBytes, Pages int
	// Streams is the most streams a Move asks for.
	Streams int
}

// Bytes is what one transfer moves.
func (p TransferParams) Bytes() int { return p.PageBytes * p.Pages }

// A TransferSystem moves a prompt's pages from a producer to a consumer.
type TransferSystem interface {
	// Name labels the system's rows.
	Name() string
	// Move makes transfer number n (fresh pages; n is never reused) over
	// streams streams a side and returns its timing; the pages are
	// dropped after it, off the clock.
	Move(ctx context.Context, n, streams int) (Timing, error)
	// Close ends what the system started.
	Close() error
}

// Timing is one transfer. The peers of a strata transfer time it on the
// host's clock, which every process reads alike.
type Timing struct {
	// Put is the producer's puts, from the first's start to the last's
	// return.
	Put time.Duration
	// Publish is the publish call (0 where the system has none).
	Publish time.Duration
	// Loaded is from the publish's start (the puts' return where there is
	// no publish) until the consumer holds every page in its buffers.
	Loaded time.Duration
	// Ack is the consumer's acknowledgement, after it loaded (0: none).
	Ack time.Duration
}

// PutToLoaded is from the producer's first put until the consumer holds
// every page.
func (t Timing) PutToLoaded() time.Duration { return t.Put + t.Loaded }

// TransferResult is one system's transfers of one case.
type TransferResult struct {
	System    string
	Bytes     int
	PageBytes int
	Streams   int
	// Timings are the measured transfers, in order.
	Timings []Timing
	// Err, when not empty, says why a transfer failed; Timings are those
	// before it, and the system made no more in the case.
	Err string
}

// Median is the median of f over the timings (the lower one of an even
// count), and their least and greatest.
func (r TransferResult) Median(f func(Timing) time.Duration) (med, lo, hi time.Duration) {
	if len(r.Timings) == 0 {
		return 0, 0, 0
	}
	d := make([]time.Duration, len(r.Timings))
	for i, t := range r.Timings {
		d[i] = f(t)
	}
	slices.Sort(d)
	return percentile(d, 0.5), d[0], d[len(d)-1]
}

// The parts of a Timing, for Median.
func putOf(t Timing) time.Duration     { return t.Put }
func publishOf(t Timing) time.Duration { return t.Publish }
func loadedOf(t Timing) time.Duration  { return t.Loaded }
func ackOf(t Timing) time.Duration     { return t.Ack }

// median is Median's median alone.
func (r TransferResult) median(f func(Timing) time.Duration) time.Duration {
	med, _, _ := r.Median(f)
	return med
}

// GBps is the result's bytes over d, in 10^9 bytes per second.
func (r TransferResult) GBps(d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(r.Bytes) / d.Seconds() / 1e9
}

// RunTransfer measures every case of cfg on every system: per case (a
// Streams value) each system makes one unmeasured transfer, then Rounds
// measured ones, the systems taking turns. A system whose transfer fails
// makes no more in that case (TransferResult.Err); RunTransfer's error is
// ctx's.
func RunTransfer(ctx context.Context, cfg TransferConfig, systems []TransferSystem) ([]TransferResult, error) {
	cfg.defaults()
	var out []TransferResult
	n := 0
	move := func(s TransferSystem, streams int) (Timing, error) {
		n++
		return s.Move(ctx, n, streams)
	}
	for _, streams := range cfg.Streams {
		res := make([]TransferResult, len(systems))
		for i, s := range systems {
			res[i] = TransferResult{System: s.Name(), Bytes: cfg.Bytes, PageBytes: cfg.PageBytes, Streams: streams}
			if _, err := move(s, streams); err != nil {
				res[i].Err = fmt.Sprintf("warm-up: %v", err)
			}
		}
		for round := range cfg.Rounds {
			for i, s := range systems {
				if res[i].Err != "" || ctx.Err() != nil {
					continue
				}
				t, err := move(s, streams)
				if err != nil {
					res[i].Err = fmt.Sprintf("round %d/%d: %v", round+1, cfg.Rounds, err)
					continue
				}
				res[i].Timings = append(res[i].Timings, t)
				if cfg.Progress != nil {
					fmt.Fprintf(cfg.Progress, "transfer %s, %d stream(s), round %d/%d: publish to loaded %v, put+publish to loaded %v\n",
						s.Name(), streams, round+1, cfg.Rounds, t.Loaded.Round(time.Microsecond), t.PutToLoaded().Round(time.Microsecond))
				}
			}
		}
		out = append(out, res...)
		if err := ctx.Err(); err != nil {
			return out, err
		}
	}
	return out, nil
}

// eachStream splits pages [0, n) into streams contiguous runs and calls fn
// for each, on goroutines of their own, and joins their errors.
func eachStream(streams, n int, fn func(s, from, to int) error) error {
	streams = max(1, min(streams, n))
	errs := make([]error, streams)
	var wg sync.WaitGroup
	for s := range streams {
		wg.Go(func() { errs[s] = fn(s, s*n/streams, (s+1)*n/streams) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// splitPages cuts buf into pages of size bytes.
func splitPages(buf []byte, size int) [][]byte {
	pages := make([][]byte, len(buf)/size)
	for i := range pages {
		pages[i] = buf[i*size : (i+1)*size : (i+1)*size]
	}
	return pages
}

// The baselines a transfer is divided by, by system name.
var transferBaselines = []string{"memcpy", "tcp", "mooncake"}

// WriteTransferMarkdown writes header, then a table per case: each
// system's median time from publish to loaded and from the first put to
// loaded (least–greatest in brackets), the GB/s they make, the parts
// (put, publish, ack), and each system's GB/s divided by the baselines'
// (publish to loaded / put+publish to loaded).
func WriteTransferMarkdown(w io.Writer, header string, results []TransferResult) error {
	var b strings.Builder
	b.WriteString(header)
	for _, streams := range streamsOf(results) {
		var rows []TransferResult
		for _, r := range results {
			if r.Streams == streams {
				rows = append(rows, r)
			}
		}
		r0, most := rows[0], 0
		for _, r := range rows {
			most = max(most, len(r.Timings))
		}
		fmt.Fprintf(&b, "\n## transfer of %s in %d pages of %s, %d stream(s) a side, %d transfers a system\n\n",
			SizeLabel(r0.Bytes), r0.Bytes/r0.PageBytes, SizeLabel(r0.PageBytes), streams, most)
		b.WriteString("| system | publish → loaded, ms | GB/s | put+publish → loaded, ms | GB/s | put, ms | publish, ms | ack, ms |")
		for _, base := range transferBaselines {
			fmt.Fprintf(&b, " ÷ %s |", base)
		}
		b.WriteString("\n|---|---:|---:|---:|---:|---:|---:|---:|" + strings.Repeat("---:|", len(transferBaselines)) + "\n")
		for _, r := range rows {
			if len(r.Timings) == 0 {
				fmt.Fprintf(&b, "| %s | failed: %s |\n", r.System, strings.ReplaceAll(r.Err, "\n", " "))
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %.2f | %s | %.2f | %s | %s | %s |", r.System,
				msRange(r.Median(loadedOf)), r.GBps(r.median(loadedOf)),
				msRange(r.Median(Timing.PutToLoaded)), r.GBps(r.median(Timing.PutToLoaded)),
				ms(r.median(putOf)), ms(r.median(publishOf)), ms(r.median(ackOf)))
			for _, base := range transferBaselines {
				b.WriteString(" " + ratioCell(r, rows, base) + " |")
			}
			b.WriteString("\n")
			if r.Err != "" {
				fmt.Fprintf(&b, "| %s | then failed: %s |\n", r.System, strings.ReplaceAll(r.Err, "\n", " "))
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ratioCell is r's GB/s divided by base's, publish to loaded / put+publish
// to loaded; "–" for base itself or a base not measured.
func ratioCell(r TransferResult, rows []TransferResult, base string) string {
	for _, o := range rows {
		if o.System == base && o.System != r.System && len(o.Timings) > 0 {
			return fmt.Sprintf("%.2f / %.2f", float64(o.median(loadedOf))/float64(r.median(loadedOf)),
				float64(o.median(Timing.PutToLoaded))/float64(r.median(Timing.PutToLoaded)))
		}
	}
	return "–"
}

// streamsOf is the cases' streams, fewest first.
func streamsOf(results []TransferResult) []int {
	streams := make([]int, len(results))
	for i, r := range results {
		streams[i] = r.Streams
	}
	slices.Sort(streams)
	return slices.Compact(streams)
}

func ms(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", float64(d)/1e6)
}

func msRange(med, lo, hi time.Duration) string {
	return fmt.Sprintf("%.1f (%.1f–%.1f)", float64(med)/1e6, float64(lo)/1e6, float64(hi)/1e6)
}
