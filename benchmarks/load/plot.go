package load

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WritePlots writes two PNG plots per operation and concurrency into dir:
// <op>-w<workers>-throughput.png (GB/s, or millions of keys per second for
// lookup, against page size, one line per system) and
// <op>-w<workers>-latency.png (p50 and p99 in µs, log scale). It returns
// the files written.
func WritePlots(dir string, results []Result) ([]string, error) {
	var files []string
	results = slices.DeleteFunc(slices.Clone(results), func(r Result) bool { return r.Err != "" }) // no figures
	for _, op := range opsOf(results) {
		for _, w := range workersOf(results, op) {
			tp, lat, err := plotsOf(results, op, w)
			if err != nil {
				return files, err
			}
			for name, p := range map[string]*plot.Plot{"throughput": tp, "latency": lat} {
				f := filepath.Join(dir, fmt.Sprintf("%s-w%d-%s.png", op, w, name))
				if err := p.Save(7*vg.Inch, 4.5*vg.Inch, f); err != nil {
					return files, fmt.Errorf("saving %s: %w", f, err)
				}
				files = append(files, f)
			}
		}
	}
	slices.Sort(files)
	return files, nil
}

func plotsOf(results []Result, op Op, workers int) (tp, lat *plot.Plot, err error) {
	tp, lat = plot.New(), plot.New()
	unit := "GB/s"
	if op == Lookup {
		unit = "million keys/s"
	}
	tp.Title.Text = fmt.Sprintf("%s throughput, %d workers", op, workers)
	tp.Y.Label.Text = unit
	lat.Title.Text = fmt.Sprintf("%s latency per operation, %d workers (solid p50, dashed p99)", op, workers)
	lat.Y.Label.Text = "µs (log)"
	lat.Y.Scale = plot.LogScale{}
	lat.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	var ticks []plot.Tick
	lo, hi := math.Inf(1), math.Inf(-1) // the latencies' range
	for _, p := range []*plot.Plot{tp, lat} {
		p.X.Label.Text = "page size (log2)"
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
	}
	for i, sys := range systemsOf(results, op) {
		var thr, p50, p99 plotter.XYs
		for _, r := range results {
			if r.Op != op || r.Workers != workers || r.System != sys {
				continue
			}
			x := math.Log2(float64(r.PageBytes))
			thr = append(thr, plotter.XY{X: x, Y: throughput(r)})
			p50 = append(p50, plotter.XY{X: x, Y: math.Max(1, float64(r.P50.Microseconds()))})
			p99 = append(p99, plotter.XY{X: x, Y: math.Max(1, float64(r.P99.Microseconds()))})
			lo, hi = min(lo, p50[len(p50)-1].Y), max(hi, p99[len(p99)-1].Y)
			if !slices.ContainsFunc(ticks, func(t plot.Tick) bool { return t.Value == x }) {
				ticks = append(ticks, plot.Tick{Value: x, Label: SizeLabel(r.PageBytes)})
			}
		}
		if err := plotutil.AddLinePoints(tp, sys, thr); err != nil {
			return nil, nil, err
		}
		l50, s50, err := plotter.NewLinePoints(p50)
		if err != nil {
			return nil, nil, err
		}
		l99, s99, err := plotter.NewLinePoints(p99)
		if err != nil {
			return nil, nil, err
		}
		for _, l := range []*plotter.Line{l50, l99} {
			l.Color = plotutil.Color(i)
		}
		s50.Color, s99.Color = plotutil.Color(i), plotutil.Color(i)
		s50.Shape, s99.Shape = plotutil.Shape(i), plotutil.Shape(i)
		l99.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		lat.Add(l50, s50, l99, s99)
		lat.Legend.Add(sys, l50, s50)
	}
	tp.X.Tick.Marker = plot.ConstantTicks(ticks)
	lat.X.Tick.Marker = plot.ConstantTicks(ticks)
	if lo <= hi {
		// A half-decade margin: a log axis cannot pad a range of one value
		// (every latency under 1 µs) down through zero, as plot would.
		lat.Y.Min, lat.Y.Max = lo/3, hi*3
	}
	return tp, lat, nil
}

func workersOf(results []Result, op Op) []int {
	var ws []int
	for _, r := range results {
		if r.Op == op && !slices.Contains(ws, r.Workers) {
			ws = append(ws, r.Workers)
		}
	}
	slices.Sort(ws)
	return ws
}

func systemsOf(results []Result, op Op) []string {
	var ss []string
	for _, r := range results {
		if r.Op == op && !slices.Contains(ss, r.System) {
			ss = append(ss, r.System)
		}
	}
	return ss
}
