// Package scrape reads a node's Prometheus /metrics for tests that check
// what an operator would see.
package scrape

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Sample is one sample line of the text exposition format: the metric's
// name, its labels as written between the braces, and its value.
type Sample struct {
	Name, Labels string
	Value        float64
}

// Metrics fetches http://admin/metrics and returns its samples; it fails
// t on any error.
func Metrics(t testing.TB, admin string) []Sample {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []Sample
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		var s Sample
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			s.Name, s.Labels, rest = line[:i], line[i+1:j], line[j+1:]
		} else {
			s.Name, rest, _ = strings.Cut(line, " ")
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			t.Fatalf("metric line %q: no value", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		s.Value = v
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Sum adds the values of the samples named name whose labels contain
// every one of with (e.g. `reason="orphan"`).
func Sum(samples []Sample, name string, with ...string) float64 {
	var sum float64
next:
	for _, s := range samples {
		if s.Name != name {
			continue
		}
		for _, w := range with {
			if !strings.Contains(s.Labels, w) {
				continue next
			}
		}
		sum += s.Value
	}
	return sum
}
