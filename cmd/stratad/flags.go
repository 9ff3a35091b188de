package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
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

// String is the size in the largest binary unit that divides it, so that
// --print-config writes 8GiB, not 8589934592.
func (b *byteSize) String() string {
	n := int64(*b)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

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

// share is a flag.Value for a share in (0, 1] (--reserve-share).
type share struct{ into *float64 }

func (s share) String() string {
	if s.into == nil {
		return ""
	}
	return strconv.FormatFloat(*s.into, 'g', -1, 64)
}

func (s share) Set(v string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !(f > 0 && f <= 1) { // NaN too
		return fmt.Errorf("share %q: want a number in (0, 1], e.g. 0.5", v)
	}
	*s.into = f
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

// Values lists the pairs as given (name=value).
func (p *pairs) Values() []string {
	out := make([]string, len(*p))
	for i, e := range *p {
		out[i] = e.k + "=" + e.v
	}
	return out
}

// pairsFile reads name=value lines from files into pairs (--tenant-token-file):
// one pair a line; blank lines and lines starting with # are skipped.
type pairsFile struct {
	into  *pairs
	paths []string
}

func (f *pairsFile) String() string { return strings.Join(f.paths, ",") }

func (f *pairsFile) Values() []string { return f.paths }

func (f *pairsFile) Set(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if err := f.into.Set(s); err != nil {
			return fmt.Errorf("%s:%d: want name=value", path, line) // the line holds a secret: not repeated
		}
	}
	f.paths = append(f.paths, path)
	return sc.Err()
}

// secretFile sets a string flag from a file's contents, trimmed of
// surrounding white space (--admin-token-file), so that the secret is on no
// command line.
type secretFile struct {
	into *string
	path string
}

func (f *secretFile) String() string { return f.path }

func (f *secretFile) Set(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := strings.TrimSpace(string(data))
	if s == "" {
		return fmt.Errorf("%s is empty", path)
	}
	*f.into, f.path = s, path
	return nil
}
