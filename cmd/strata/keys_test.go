package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stratakv/strata/internal/testing/admintest"
)

// sortedPages is c's acme pages in key order, the order keys ls lists.
func (c *cluster) sortedPages() []admintest.Page {
	ps := slices.Clone(c.pages)
	slices.SortFunc(ps, func(a, b admintest.Page) int { return bytes.Compare(a.Key, b.Key) })
	return ps
}

func TestKeysLs(t *testing.T) {
	c := newCluster(t)
	ns := hex.EncodeToString(c.acme)[:10]
	pages := c.sortedPages()

	rows := table(c.run(t, "keys", "ls", ns))
	if want := []string{"KEY", "DEPTH", "SIZE", "TIER", "CHECKSUM", "LEASES", "HITS", "AGE"}; !slices.Equal(rows[0], want) {
		t.Errorf("header = %q, want %q", rows[0], want)
	}
	if len(rows) != 1+len(pages) {
		t.Fatalf("keys ls: %d rows, want %d: %q", len(rows)-1, len(pages), rows)
	}
	age := regexp.MustCompile(`^\d+s$`)
	for i, p := range pages {
		r := rows[1+i]
		want := []string{hex.EncodeToString(p.Key)[:16], strconv.FormatUint(uint64(p.Depth), 10), "16KiB", "host", hex.EncodeToString(p.Checksum()), "1"}
		if !slices.Equal(r[:6], want) || !age.MatchString(r[7]) {
			t.Errorf("row %d = %q, want %q then hits and an age", i, r, want)
		}
	}

	// --limit stops early and says where to continue; --after continues.
	out, stderr, err := strata(t, map[string]string{"STRATA_ENDPOINT": c.Addr}, "keys", "ls", ns, "--limit", "2")
	if err != nil {
		t.Fatal(err)
	}
	if rows := table(out); len(rows) != 3 || rows[2][0] != hex.EncodeToString(pages[1].Key)[:16] {
		t.Errorf("keys ls --limit 2: %q", rows)
	}
	next := hex.EncodeToString(pages[1].Key)
	if !strings.Contains(stderr, "--after "+next) {
		t.Errorf("keys ls --limit 2: stderr %q lacks --after %s", stderr, next)
	}
	rows = table(c.run(t, "keys", "ls", ns, "--after", next))
	if len(rows) != 2 || rows[1][0] != hex.EncodeToString(pages[2].Key)[:16] {
		t.Errorf("keys ls --after: %q", rows)
	}

	// --wide: full keys and the parent.
	rows = table(c.run(t, "keys", "ls", ns, "--wide"))
	for i, p := range pages {
		parent := "-"
		if p.Parent != nil {
			parent = hex.EncodeToString(p.Parent)
		}
		if r := rows[1+i]; r[0] != hex.EncodeToString(p.Key) || r[len(r)-1] != parent {
			t.Errorf("keys ls --wide row %d = %q", i, r)
		}
	}
}

func TestKeysLsJSON(t *testing.T) {
	c := newCluster(t)
	pages := c.sortedPages()
	var doc struct {
		NamespaceID  string    `json:"namespace_id"`
		Keys         []keyJSON `json:"keys"`
		NextAfterKey string    `json:"next_after_key"`
	}
	out := c.run(t, "keys", "ls", hex.EncodeToString(c.acme), "-o", "json", "--limit", "0")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("keys ls -o json: %v\n%s", err, out)
	}
	if doc.NamespaceID != hex.EncodeToString(c.acme) || doc.NextAfterKey != "" || len(doc.Keys) != len(pages) {
		t.Fatalf("keys ls -o json:\n%s", out)
	}
	for i, p := range pages {
		k := doc.Keys[i]
		if k.Key != hex.EncodeToString(p.Key) || k.ParentKey != hex.EncodeToString(p.Parent) || k.Depth != p.Depth ||
			k.Size != c.pageBytes || k.Checksum != hex.EncodeToString(p.Checksum()) || k.Tier != "host" ||
			k.CreatedUnixMs == 0 || k.Leases != 1 {
			t.Errorf("key %d: %+v", i, k)
		}
	}
}

func TestKeysStat(t *testing.T) {
	c := newCluster(t)
	ns := hex.EncodeToString(c.acme)[:12]
	p0, p1 := c.pages[0], c.pages[1]
	absent := strings.Repeat("00", 32)

	out := c.run(t, "keys", "stat", ns, hex.EncodeToString(p1.Key))
	checkLines(t, "keys stat", out, false,
		`key:\s+`+hex.EncodeToString(p1.Key),
		`status:\s+present`,
		`parent:\s+`+hex.EncodeToString(p0.Key),
		`depth:\s+1`,
		`size:\s+16384 \(16KiB\)`,
		`checksum:\s+`+hex.EncodeToString(p1.Checksum()),
		`tier:\s+host`,
		`created:\s+\d{4}-\d\d-\d\dT[0-9:.]+Z \(\d+s ago\)`,
		`leases:\s+1`,
		`resident children:\s+1`,
	)

	// An absent key prints "absent" and fails the command after every block.
	env := map[string]string{"STRATA_ENDPOINT": c.Addr}
	out, _, err := strata(t, env, "keys", "stat", ns, hex.EncodeToString(p0.Key), absent)
	if err == nil || err.Error() != "1 of 2 keys absent" {
		t.Errorf("keys stat with an absent key: err = %v", err)
	}
	if !regexp.MustCompile(`(?m)^key:\s+`+absent+`\nstatus:\s+absent$`).MatchString(out) ||
		!strings.Contains(out, hex.EncodeToString(p0.Key)) {
		t.Errorf("keys stat with an absent key:\n%s", out)
	}

	var doc struct {
		NamespaceID string `json:"namespace_id"`
		Keys        []struct {
			Found bool `json:"found"`
			keyJSON
		} `json:"keys"`
	}
	out, _, err = strata(t, env, "keys", "stat", ns, hex.EncodeToString(p1.Key), absent, "-o", "json")
	if err == nil {
		t.Error("keys stat -o json with an absent key: no error")
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("keys stat -o json: %v\n%s", err, out)
	}
	if len(doc.Keys) != 2 || !doc.Keys[0].Found || doc.Keys[0].ParentKey != hex.EncodeToString(p0.Key) ||
		doc.Keys[0].ResidentChildren != 1 || doc.Keys[1].Found || doc.Keys[1].Key != absent {
		t.Errorf("keys stat -o json:\n%s", out)
	}
}

// TestKeysPrefix: keys stat and keys rm take a key by a prefix only it has,
// such as the 16 digits keys ls prints; a prefix two keys have is refused
// with both listed, one no key has with where to look.
func TestKeysPrefix(t *testing.T) {
	c := newCluster(t)
	ns := hex.EncodeToString(c.acme)[:12]
	// Two root pages whose keys share their first 8 digits.
	var twins []admintest.Page
	for _, tail := range []string{"00", "ff"} {
		key, _ := hex.DecodeString("5eed5eed" + strings.Repeat(tail, 28))
		twins = append(twins, admintest.Page{Key: key, Data: bytes.Repeat([]byte{9}, int(c.pageBytes))})
	}
	c.Put(t, c.acme, twins)

	rows := table(c.run(t, "keys", "ls", ns))
	if len(rows) != 1+len(c.pages)+len(twins) {
		t.Fatalf("keys ls: %q", rows)
	}
	// Each key as keys ls prints it (16 digits, in either case) finds its
	// page.
	for i, p := range slices.Concat(c.pages, twins) {
		full := hex.EncodeToString(p.Key)
		if !slices.ContainsFunc(rows[1:], func(r []string) bool { return r[0] == full[:16] }) {
			t.Fatalf("keys ls lacks %s: %q", full[:16], rows)
		}
		short := full[:16]
		if i%2 == 1 {
			short = strings.ToUpper(short)
		}
		out := c.run(t, "keys", "stat", ns, short)
		checkLines(t, "keys stat "+short, out, false, `key:\s+`+full, `status:\s+present`)
	}

	env := map[string]string{"STRATA_ENDPOINT": c.Addr}
	full0, full1 := hex.EncodeToString(twins[0].Key), hex.EncodeToString(twins[1].Key)
	out, _, err := strata(t, env, "keys", "stat", ns, hex.EncodeToString(c.pages[0].Key)[:16], "5eed5eed")
	if want := "key prefix \"5eed5eed\" is ambiguous (give more hex digits); the candidates are:\n  " + full0 + "\n  " + full1; err == nil ||
		err.Error() != want || out != "" {
		t.Errorf("keys stat with an ambiguous prefix: err = %v, want %q; output %q", err, want, out)
	}
	_, _, err = strata(t, env, "keys", "stat", ns, "5eed5eee")
	if want := `no key of namespace ` + ns + ` starts with "5eed5eee" (list them with: strata keys ls ` + ns + `)`; err == nil || err.Error() != want {
		t.Errorf("keys stat with a prefix no key has: err = %v, want %q", err, want)
	}

	// A prefix beside a whole key that no node holds: the prefix resolves,
	// the absent key is reported absent as before.
	absent := strings.Repeat("00", 32)
	out, _, err = strata(t, env, "keys", "stat", ns, "5eed5eedff", absent)
	if err == nil || err.Error() != "1 of 2 keys absent" || !strings.Contains(out, full1) {
		t.Errorf("keys stat with a prefix and an absent key: err = %v\n%s", err, out)
	}

	out = c.run(t, "keys", "rm", ns, full1[:16])
	if !strings.Contains(out, "deleted 1 page(s) of the 1 key(s) given") {
		t.Errorf("keys rm by prefix: %q", out)
	}
	out = c.run(t, "keys", "stat", ns, "5eed5eed")
	checkLines(t, "keys stat after the rm", out, false, `key:\s+`+full0, `status:\s+present`)
}
