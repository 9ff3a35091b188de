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
