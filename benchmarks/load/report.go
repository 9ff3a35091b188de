package load

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Baselines are the systems the strata rows are divided by in the ratio
// tables, in this order.
var baselines = []string{"tcp", "redis", "memcpy", "mooncake", "redis-py"}

// WriteMarkdown writes the results as markdown tables: one per operation,
// then the throughput of every strata system divided by each baseline
// measured at the same page size and concurrency, with p99s side by side,
// and of every strata system divided by its older build's (strata-old,
// writeOldRatios). header is printed first, as is.
func WriteMarkdown(w io.Writer, header string, results []Result) error {
	var b strings.Builder
	b.WriteString(header)
	for _, op := range opsOf(results) {
		unit := "GB/s"
		if op == Lookup {
			unit = "keys/s (M)"
		}
		fmt.Fprintf(&b, "\n## %s\n\n| system | page | workers | ops | %s | ops/s | p50 µs | p99 µs | cpu-µs/op |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n", op, unit)
		var failed []Result
		for _, r := range results {
			if r.Op != op {
				continue
			}
			if r.Err != "" {
				failed = append(failed, r)
				fmt.Fprintf(&b, "| %s | %s | %d | failed (below) | – | – | – | – | – |\n", r.System, SizeLabel(r.PageBytes), r.Workers)
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %s | %s | %s | %s |\n", r.System, SizeLabel(r.PageBytes), r.Workers, r.Ops,
				f3(throughput(r)), f0(r.OpsPerSec()), us(r.P50), us(r.P99), us(r.CPU))
		}
		for _, r := range failed {
			fmt.Fprintf(&b, "\n%s %s %s ×%d failed:\n\n    %s\n", r.System, op, SizeLabel(r.PageBytes), r.Workers,
				strings.ReplaceAll(strings.TrimSpace(r.Err), "\n", "\n    "))
		}
		writeRatios(&b, op, results)
		writeOldRatios(&b, op, results)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeRatios writes, for each strata system, its throughput over each
// baseline's and both p99s, case by case.
func writeRatios(b *strings.Builder, op Op, results []Result) {
	type key struct {
		sys           string
		size, workers int
	}
	idx := map[key]Result{}
	for _, r := range results {
		if r.Op == op {
			idx[key{r.System, r.PageBytes, r.Workers}] = r
		}
	}
	var present []string
	for _, base := range baselines {
		for _, r := range results {
			if r.Op == op && r.System == base {
				present = append(present, base)
				break
			}
		}
	}
	if len(present) == 0 {
		return
	}
	var systems []string
	for _, r := range results {
		if r.Op == op && strings.HasPrefix(r.System, "strata") && !slices.Contains(systems, r.System) {
			systems = append(systems, r.System)
		}
	}
	for _, sys := range systems {
		fmt.Fprintf(b, "\n%s %s ÷ baselines (throughput ratio; p99 µs, %s / baseline)\n\n| page | workers |", sys, op, sys)
		for _, base := range present {
			fmt.Fprintf(b, " ÷ %s | p99 vs %s |", base, base)
		}
		b.WriteString("\n|---|---:|" + strings.Repeat("---:|---:|", len(present)) + "\n")
		for _, r := range results {
			if r.Op != op || r.System != sys {
				continue
			}
			fmt.Fprintf(b, "| %s | %d |", SizeLabel(r.PageBytes), r.Workers)
			for _, base := range present {
				br, ok := idx[key{base, r.PageBytes, r.Workers}]
				if r.Err != "" {
					b.WriteString(" failed | – |")
					continue
				}
				if !ok || br.Err != "" || throughput(br) == 0 {
					b.WriteString(" – | – |")
					continue
				}
				fmt.Fprintf(b, " %.2f | %s / %s |", throughput(r)/throughput(br), us(r.P99), us(br.P99))
			}
			b.WriteString("\n")
		}
	}
}

// writeOldRatios writes, for each strata-old system (an older build's node,
// StrataConfig.Label "old") and the strata system of its transport, the
// new one's throughput over the old one's, and both p99s and CPU per
// operation, case by case: whether this build is slower than the old; and
// likewise each strata-events system (a node publishing its KV events)
// over the strata system of its transport: what the stream costs.
func writeOldRatios(b *strings.Builder, op Op, results []Result) {
	writeLabelRatios(b, op, results, "old", "new", "old")
	writeLabelRatios(b, op, results, "events", "events", "none")
}

// writeLabelRatios writes, for each strata-<label> system and the strata
// system of its transport, the labelled one's throughput over the other's
// (with and without name the two columns), p99s and CPU per operation.
func writeLabelRatios(b *strings.Builder, op Op, results []Result, label, with, without string) {
	type key struct {
		sys           string
		size, workers int
	}
	idx := map[key]Result{}
	var labelled []string
	prefix := "strata-" + label
	for _, r := range results {
		if r.Op != op {
			continue
		}
		idx[key{r.System, r.PageBytes, r.Workers}] = r
		if (r.System == prefix || strings.HasPrefix(r.System, prefix+"-")) && !slices.Contains(labelled, r.System) {
			labelled = append(labelled, r.System)
		}
	}
	for _, l := range labelled {
		sys := "strata" + strings.TrimPrefix(l, prefix)
		first, second, firstName, secondName := sys, l, with, without
		if label != "old" {
			first, second = l, sys
		}
		fmt.Fprintf(b, "\n%s ÷ %s, %s (throughput ratio; p99 µs and cpu-µs/op, %s / %s)\n\n"+
			"| page | workers | %s ÷ %s | p99 %s / %s | cpu %s / %s |\n|---|---:|---:|---:|---:|\n",
			first, second, op, firstName, secondName, firstName, secondName, firstName, secondName, firstName, secondName)
		for _, r := range results {
			if r.Op != op || r.System != second {
				continue
			}
			n, ok := idx[key{first, r.PageBytes, r.Workers}]
			fmt.Fprintf(b, "| %s | %d |", SizeLabel(r.PageBytes), r.Workers)
			switch {
			case !ok:
				b.WriteString(" – | – | – |\n")
			case n.Err != "" || r.Err != "":
				b.WriteString(" failed | – | – |\n")
			case throughput(r) == 0:
				b.WriteString(" – | – | – |\n")
			default:
				fmt.Fprintf(b, " %.2f | %s / %s | %s / %s |\n", throughput(n)/throughput(r), us(n.P99), us(r.P99), us(n.CPU), us(r.CPU))
			}
		}
	}
}

// WriteCSV writes one row per result.
func WriteCSV(w io.Writer, results []Result) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"system", "op", "page_bytes", "workers", "ops", "elapsed_s", "bytes_per_op", "keys_per_op",
		"gb_per_s", "ops_per_s", "p50_us", "p99_us", "cpu_us_per_op", "error"})
	for _, r := range results {
		_ = cw.Write([]string{r.System, string(r.Op), strconv.Itoa(r.PageBytes), strconv.Itoa(r.Workers),
			strconv.Itoa(r.Ops), strconv.FormatFloat(r.Elapsed.Seconds(), 'f', 3, 64),
			strconv.Itoa(r.BytesPerOp), strconv.Itoa(r.KeysPerOp),
			strconv.FormatFloat(r.GBps(), 'f', 4, 64), strconv.FormatFloat(r.OpsPerSec(), 'f', 1, 64),
			usf(r.P50), usf(r.P99), usf(r.CPU), r.Err})
	}
	cw.Flush()
	return cw.Error()
}

// throughput is GB/s for put and get, millions of keys per second for
// lookup.
func throughput(r Result) float64 {
	if r.Op == Lookup {
		return r.OpsPerSec() * float64(r.KeysPerOp) / 1e6
	}
	return r.GBps()
}

func opsOf(results []Result) []Op {
	var ops []Op
	for _, r := range results {
		if !slices.Contains(ops, r.Op) {
			ops = append(ops, r.Op)
		}
	}
	return ops
}

func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
func f0(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
func us(d time.Duration) string {
	v := float64(d) / float64(time.Microsecond)
	if v < 10 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}
func usf(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 1, 64)
}
