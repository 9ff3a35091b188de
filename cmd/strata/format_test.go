package main

import (
	"testing"
	"time"
)

func TestHumanBytes(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		want string
	}{
		{0, "0B"},
		{1023, "1023B"},
		{1024, "1KiB"},
		{1536, "1.5KiB"},
		{16384, "16KiB"},
		{3 * 16384, "48KiB"},
		{1<<20 + 1, "1MiB"},
		{5 << 30, "5GiB"},
		{1 << 62, "4EiB"},
		{^uint64(0), "16EiB"},
	} {
		if got := humanBytes(c.n); got != c.want {
			t.Errorf("humanBytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

func TestFormatAge(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{0, "0s"},
		{59 * time.Second, "59s"},
		{90 * time.Second, "1m"},
		{3 * time.Hour, "3h"},
		{47 * time.Hour, "47h"},
		{50 * time.Hour, "2d"},
	} {
		if got := formatAge(c.d); got != c.want {
			t.Errorf("formatAge(%s) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestShortHex(t *testing.T) {
	for _, c := range []struct {
		b    []byte
		n    int
		want string
	}{
		{nil, 4, "-"},
		{[]byte{0xab}, 4, "ab"},
		{[]byte{0xde, 0xad, 0xbe, 0xef}, 4, "dead"},
	} {
		if got := shortHex(c.b, c.n); got != c.want {
			t.Errorf("shortHex(%x, %d) = %q, want %q", c.b, c.n, got, c.want)
		}
	}
}

func TestDialCause(t *testing.T) {
	for _, c := range []struct{ msg, want string }{
		{`connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`, "connection refused"},
		{"plain", "plain"},
	} {
		if got := dialCause(c.msg); got != c.want {
			t.Errorf("dialCause(%q) = %q, want %q", c.msg, got, c.want)
		}
	}
}
