package admin

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// TestBeforePrefix: the cursor is the key just below the prefix's first
// key, nil below the all-zero key; a prefix that is not 1 to 64 lowercase
// hex digits is refused.
func TestBeforePrefix(t *testing.T) {
	ff := strings.Repeat("f", 62)
	for _, tc := range []struct{ prefix, want string }{
		{"0", ""},
		{strings.Repeat("0", 64), ""},
		{"1", "0" + strings.Repeat("f", 63)},
		{"ab1", "ab0" + strings.Repeat("f", 61)},
		{"ab12", "ab11" + ff[:60]},
		{"f", "e" + strings.Repeat("f", 63)},
		{strings.Repeat("f", 64), strings.Repeat("f", 63) + "e"},
		{"00000001", "00000000" + ff[:56]},
	} {
		got, err := beforePrefix(tc.prefix)
		if err != nil || hex.EncodeToString(got) != tc.want || (tc.want == "") != (got == nil) {
			t.Errorf("beforePrefix(%q) = %x, %v; want %q", tc.prefix, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "AB", "xyz", "ab 1", strings.Repeat("0", 65)} {
		if got, err := beforePrefix(bad); err == nil {
			t.Errorf("beforePrefix(%q) = %x, want an error", bad, got)
		}
	}
	if !bytes.Equal(must(beforePrefix("01")), append([]byte{0}, bytes.Repeat([]byte{0xff}, 31)...)) {
		t.Error("beforePrefix(01) is not 00ff…ff")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
