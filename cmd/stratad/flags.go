package main

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize parses sizes such as 512MiB, 8GiB, 1.5G or a plain byte count.
type byteSize int64

var units = []struct {
	suffix string
	mult   float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1},
}

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	num, mult := strings.TrimSpace(s), 1.0
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f <= 0 {
		return fmt.Errorf("size %q: want a positive number with an optional unit (KiB, MiB, GiB, TiB)", s)
	}
	*b = byteSize(f * mult)
	return nil
}

// pairs collects repeated key=value flags.
type pairs []struct{ k, v string }

func (p *pairs) String() string { return fmt.Sprint(len(*p), " pairs") }

func (p *pairs) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" || v == "" {
		return fmt.Errorf("%q: want name=value", s)
	}
	*p = append(*p, struct{ k, v string }{k, v})
	return nil
}
