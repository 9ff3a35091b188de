package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/client/admin"
	"github.com/stratakv/strata/internal/testing/admintest"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/proto/pbconv"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// replica is the ranks of one engine replica, each its own namespace, as
// its engine processes open them through one cluster client.
type replica struct {
	ranks []*client.Namespace
}

// layout is the model every replica of the silent-fork test serves; only
// the TP size differs. 8 KV heads divide by 4 and by 8.
func layout(tp, rank uint32) namespace.Descriptor {
	return namespace.Descriptor{Tenant: "acme", Model: "llama-3-70b", ModelRevision: "r7", Engine: "vllm",
		DType: "bf16", PageTokens: 16, NumLayers: 2, NumKVHeads: 8, HeadDim: 64, TPSize: tp, TPRank: rank}
}

func openReplica(t *testing.T, addr string, tp uint32) *replica {
	t.Helper()
	c, err := client.Dial(t.Context(), addr, client.Options{})
	if err != nil {
		t.Fatalf("dialing the cluster: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	r := &replica{}
	for rank := range tp {
		ns, err := c.Open(t.Context(), layout(tp, rank))
		if err != nil {
			t.Fatalf("opening tp%d rank %d: %v", tp, rank, err)
		}
		r.ranks = append(r.ranks, ns)
	}
	return r
}

// prompt is the tokens of prompt i: pages full pages of 16 tokens.
func prompt(i, pages int) []uint32 {
	tokens := make([]uint32, 16*pages)
	for j := range tokens {
		tokens[j] = uint32(1000*i + j)
	}
	return tokens
}

// put writes the prompts' pages on every rank and returns the pages and
// bytes written.
func (r *replica) Put(t *testing.T, prompts ...[]uint32) (pages, bytes uint64) {
	t.Helper()
	for _, ns := range r.ranks {
		for _, p := range prompts {
			keys := ns.PageKeys(p)
			data := make([][]byte, len(keys))
			for i := range data {
				data[i] = slices.Repeat([]byte{byte(i + 1)}, ns.PageBytes())
			}
			res, err := ns.Put(t.Context(), client.ChainPages(keys, data))
			if err != nil {
				t.Fatalf("put: %v", err)
			}
			for i, r := range res {
				if r.Status != client.Committed {
					t.Fatalf("put page %d: %v", i, r.Status)
				}
			}
			pages += uint64(len(keys))
			bytes += uint64(len(keys) * ns.PageBytes())
		}
	}
	return pages, bytes
}

// lookup looks the prompts up on every rank and returns the keys asked and
// the hits.
func (r *replica) Lookup(t *testing.T, prompts ...[]uint32) (keys, hits uint64) {
	t.Helper()
	for _, ns := range r.ranks {
		for _, p := range prompts {
			k := ns.PageKeys(p)
			res, err := ns.Lookup(t.Context(), k, false, 0)
			if err != nil {
				t.Fatalf("lookup: %v", err)
			}
			keys += uint64(len(k))
			hits += uint64(res.HitPrefix)
		}
	}
	return keys, hits
}

// TestSilentFork reproduces the seeds' silent fork: a TP4 and a TP8
// replica of one model put the same prompts into one cluster; neither can
// use the other's pages, and `ns forks` shows it.
func TestSilentFork(t *testing.T) {
	_, nodes := startNodes(t, 2, node.Config{HostBytes: 64 << 20})
	tp4, tp8 := openReplica(t, nodes[0].Addr, 4), openReplica(t, nodes[1].Addr, 8)
	shared := [][]uint32{prompt(1, 4), prompt(2, 4), prompt(3, 4)}
	pages4, bytes4 := tp4.Put(t, shared...)
	pages8, bytes8 := tp8.Put(t, shared...)
	// A later request is served by the TP4 replica only; then the same
	// prompt reaches a TP8 replica, which misses all of it.
	later := prompt(4, 4)
	p, b := tp4.Put(t, later)
	pages4, bytes4 = pages4+p, bytes4+b
	keys4, hits4 := tp4.Lookup(t, append(shared, later)...)
	keys8, hits8 := tp8.Lookup(t, append(shared, later)...)
	if hits4 != keys4 || hits8 != keys8*3/4 {
		t.Fatalf("hits: tp4 %d of %d, tp8 %d of %d; want all, and 3/4", hits4, keys4, hits8, keys8)
	}
	if pages4 != 4*16 || bytes4 != pages4*16384 || pages8 != 8*12 || bytes8 != pages8*8192 {
		t.Fatalf("wrote tp4 %d pages, %d bytes; tp8 %d pages, %d bytes", pages4, bytes4, pages8, bytes8)
	}
	id4 := func(rank int) string { return tp4.ranks[rank].ID().String() }
	id8 := func(rank int) string { return tp8.ranks[rank].ID().String() }

	meaning := "meaning: these namespaces cache the same model but cannot share pages: requests routed to a " +
		"tp_size=4 replica miss pages written by tp_size=8 replicas, and the other way round"
	checkTwoForks(t, nodes[1].run(t, "ns", "forks"),
		"tenant acme, model llama-3-70b, revision r7: 2 forks, differing in tp_size",
		[][]string{
			{"FORK", "TP_SIZE", "SHARDS", "ID", "PAGE_BYTES", "PAGES", "BYTES", "HIT%"},
			{"1", "4", "4", id4(0)[:12], "16KiB", fmt.Sprint(pages4), humanBytes(bytes4), "100.0%"},
			{"2", "8", "8", id8(0)[:12], "8KiB", fmt.Sprint(pages8), humanBytes(bytes8), "75.0%"},
		},
		meaning, "hint: to share one cache, run every replica of this model with the same tp_size")

	var doc struct {
		NodeID     string          `json:"node_id"`
		Namespaces int             `json:"namespaces"`
		Groups     []forkGroupJSON `json:"groups"`
	}
	out := nodes[0].run(t, "ns", "forks", "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("ns forks -o json: %v\n%s", err, out)
	}
	if doc.NodeID != nodes[0].ID() || doc.Namespaces != 12 || len(doc.Groups) != 1 {
		t.Fatalf("ns forks -o json: want 12 namespaces in one group:\n%s", out)
	}
	g := doc.Groups[0]
	if g.Tenant != "acme" || g.Model != "llama-3-70b" || g.ModelRevision != "r7" || !slices.Equal(g.Differ, []string{"tp_size"}) ||
		g.Meaning != strings.TrimPrefix(meaning, "meaning: ") || g.Pages != pages4+pages8 || g.Bytes != bytes4+bytes8 ||
		len(g.Forks) != 2 {
		t.Fatalf("ns forks -o json: group %+v", g)
	}
	for i, w := range []struct {
		tp           string
		pages, bytes uint64
		keys, hits   uint64
		ids          func(int) string
		pageBytes    uint64
	}{{"4", pages4, bytes4, keys4, hits4, id4, 16384}, {"8", pages8, bytes8, keys8, hits8, id8, 8192}} {
		f := g.Forks[i]
		if string(f.Values["tp_size"]) != w.tp || len(f.Values) != 1 || f.Pages != w.pages || f.Bytes != w.bytes ||
			f.LookupKeys != w.keys || f.HitKeys != w.hits || f.HitRate == nil || f.PageBytes != w.pageBytes {
			t.Errorf("fork %d: %+v, want tp_size %s, %d pages, %d bytes, %d hits of %d keys", i, f, w.tp, w.pages, w.bytes, w.hits, w.keys)
		}
		var shardBytes uint64
		for rank, s := range f.Shards {
			shardBytes += s.Bytes
			if s.ID != w.ids(rank) || s.TPRank != uint32(rank) || len(s.Nodes) == 0 {
				t.Errorf("fork %d shard %d: %+v, want %s", i, rank, s, w.ids(rank))
			}
		}
		if shardBytes != w.bytes {
			t.Errorf("fork %d: shards hold %d bytes, the fork %d", i, shardBytes, w.bytes)
		}
	}

	// Another tenant's view has no forks.
	out = nodes[0].run(t, "ns", "forks", "--tenant", "beta")
	if out != "no forks: every model has one layout (0 namespaces checked)\n" {
		t.Errorf("ns forks --tenant beta: %q", out)
	}

	// ns diff says the same about two namespaces, and tells shards apart.
	out = nodes[0].run(t, "ns", "diff", id4(0)[:10], id8(0)[:10])
	checkLines(t, "ns diff", out, false,
		`a:\s+`+id4(0),
		`b:\s+`+id8(0),
		`\*\s+tp_size\s+4\s+8`,
		`\s+tp_rank\s+0\s+0`,
		`\s+num_kv_heads\s+8\s+8`,
		`\s+page_size\s+16KiB\s+8KiB`,
		`\s+hit_rate\s+100.0%\s+75.0%`,
		`relation: forks`,
		regexp.QuoteMeta(meaning),
	)
	var diff nsDiffJSON
	out = nodes[1].run(t, "ns", "diff", id4(0), id4(1), "-o", "json")
	if err := json.Unmarshal([]byte(out), &diff); err != nil {
		t.Fatalf("ns diff -o json: %v\n%s", err, out)
	}
	var differs []string
	for _, f := range diff.Fields {
		if f.Differs {
			differs = append(differs, f.Name+"="+f.A+"/"+f.B)
		}
	}
	if diff.Relation != relShards || !slices.Equal(diff.Differ, []string{"tp_rank"}) ||
		!slices.Equal(differs, []string{"tp_rank=0/1"}) || diff.A.ID != id4(0) || diff.B.Pages != 16 ||
		!strings.HasPrefix(diff.Meaning, "shards of one layout (tp_rank differs)") {
		t.Errorf("ns diff of two ranks:\n%s", out)
	}
}

func TestRelate(t *testing.T) {
	base := layout(4, 0)
	with := func(edit func(*namespace.Descriptor)) namespace.Descriptor {
		d := base
		edit(&d)
		return d
	}
	for _, c := range []struct {
		name     string
		b        namespace.Descriptor
		relation string
		meaning  string // a prefix
	}{
		{"same", with(func(d *namespace.Descriptor) { d.DType = "bfloat16" }), relSame, "the same namespace"},
		{"rank", with(func(d *namespace.Descriptor) { d.TPRank = 3 }), relShards, "shards of one layout (tp_rank differs)"},
		{"tp", with(func(d *namespace.Descriptor) { d.TPSize = 8 }), relForks,
			"these namespaces cache the same model but cannot share pages: requests routed to a tp_size=4 replica miss pages written by tp_size=8 replicas"},
		{"tp and rank", with(func(d *namespace.Descriptor) { d.TPSize, d.TPRank = 8, 5 }), relForks,
			"these namespaces cache the same model but cannot share pages: requests routed to a tp_size=4 replica miss pages written by tp_size=8 replicas"},
		{"page and dtype", with(func(d *namespace.Descriptor) { d.PageTokens, d.KVDType = 32, "fp8_e4m3" }), relForks,
			"these namespaces cache the same model but cannot share pages: requests routed to a kv_dtype=bf16 page_tokens=16 replica miss pages written by kv_dtype=fp8_e4m3 page_tokens=32 replicas"},
		{"revision", with(func(d *namespace.Descriptor) { d.ModelRevision, d.TPSize = "r8", 8 }), relUnrelated,
			"different models (model_revision differs)"},
		{"tenant", with(func(d *namespace.Descriptor) { d.Tenant = "beta" }), relUnrelated, "different tenants"},
	} {
		rel, meaning, _ := relate(base, c.b)
		if rel != c.relation || !strings.HasPrefix(meaning, c.meaning) {
			t.Errorf("%s: relation %q, meaning %q; want %q, %q…", c.name, rel, meaning, c.relation, c.meaning)
		}
	}
}

// TestGroupForks: three layouts of one model, ranks as shards, another
// model alone; the forks order by bytes, then by their values.
func TestGroupForks(t *testing.T) {
	var nss []*admin.Namespace
	add := func(d namespace.Descriptor, bytes uint64) {
		id := d.ID()
		nss = append(nss, &admin.Namespace{Info: &pb.NamespaceInfo{Id: id[:], Descriptor_: pbconv.DescriptorProto(d), Bytes: bytes, Pages: bytes / 100},
			Parts: []admin.NodeNamespace{{Node: "n1", Info: &pb.NamespaceInfo{Pages: 1}}}})
	}
	add(layout(2, 1), 100)
	add(layout(8, 0), 300)
	add(layout(2, 0), 200)
	add(layout(16, 0), 300)
	other := layout(2, 0)
	other.Model = "qwen"
	add(other, 1000)
	nss = append(nss, &admin.Namespace{Info: &pb.NamespaceInfo{Id: []byte{1}}}) // no descriptor: not grouped

	groups, checked := groupForks(nss)
	if checked != 5 || len(groups) != 1 {
		t.Fatalf("checked %d, %d groups; want 5 and 1", checked, len(groups))
	}
	g := groups[0]
	if !slices.Equal(g.differ, []string{"tp_size"}) || !slices.Equal(forkLabels(g), []string{"tp_size=2", "tp_size=8", "tp_size=16"}) {
		t.Fatalf("differ %q, forks %q", g.differ, forkLabels(g))
	}
	if ranks := []uint32{g.forks[0].shards[0].Info.GetDescriptor_().GetTpRank(), g.forks[0].shards[1].Info.GetDescriptor_().GetTpRank()}; !slices.Equal(ranks, []uint32{0, 1}) ||
		g.forks[0].sum.GetBytes() != 300 {
		t.Errorf("the tp_size=2 fork: ranks %v, %d bytes", ranks, g.forks[0].sum.GetBytes())
	}
	want := "these namespaces cache the same model but cannot share pages: requests routed to a replica of one layout " +
		"(tp_size=2; tp_size=8; tp_size=16) miss the pages written by replicas of the other 2"
	if got := forkMeaning(forkLabels(g)); got != want {
		t.Errorf("meaning:\n got %q\nwant %q", got, want)
	}
	if id := hex.EncodeToString(g.forks[1].shards[0].Info.GetId()); id != layout(8, 0).ID().String() {
		t.Errorf("second fork is %s, want tp_size=8", id)
	}
}

// TestFormatFork: two replicas of one model with the same TP size whose
// engine adapters lay a page's bytes out differently (layer first, K/V
// first) open two namespaces; ns forks calls it a format fork and shows
// both formats, ns show and ns diff print them.
func TestFormatFork(t *testing.T) {
	n := startNode(t, nil)
	const layerFirst, kvFirst = "kv:L2.S2.T16.H2.D64:bf16", "kv:S2.L2.T16.H2.D64:bf16"
	open := func(format string, pages int) string {
		d := admintest.Descriptor("acme")
		d.PageFormat = format
		resp := n.Open(t, d)
		n.Put(t, resp.GetNamespaceId(), admintest.Chain(format, pages, resp.GetPageBytes()))
		return hex.EncodeToString(resp.GetNamespaceId())
	}
	a, b := open(layerFirst, 2), open(kvFirst, 1)
	if a == b {
		t.Fatal("two page formats share a namespace")
	}

	meaning := "meaning: format fork: these namespaces cache the same model in different page byte formats (" +
		layerFirst + " | " + kvFirst + "): a replica of one cannot read the pages of another, " +
		"so requests routed to it miss every page written in another format"
	checkTwoForks(t, n.run(t, "ns", "forks"),
		"tenant acme, model llama-3-8b, revision r1: 2 format forks, differing in page_format",
		[][]string{
			{"FORK", "PAGE_FORMAT", "SHARDS", "ID", "PAGE_BYTES", "PAGES", "BYTES", "HIT%"},
			{"1", layerFirst, "1", a[:12], "16KiB", "2", "32KiB", "-"},
			{"2", kvFirst, "1", b[:12], "16KiB", "1", "16KiB", "-"},
		},
		meaning, "hint: to share one cache, run every replica of this model with the same page_format")

	var doc struct {
		Groups []forkGroupJSON `json:"groups"`
	}
	out := n.run(t, "ns", "forks", "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Groups) != 1 {
		t.Fatalf("ns forks -o json: %v\n%s", err, out)
	}
	g := doc.Groups[0]
	if g.Kind != kindFormat || !slices.Equal(g.Differ, []string{"page_format"}) || g.Meaning != strings.TrimPrefix(meaning, "meaning: ") ||
		len(g.Forks) != 2 || string(g.Forks[0].Values["page_format"]) != `"`+layerFirst+`"` {
		t.Errorf("ns forks -o json: group %+v", g)
	}

	checkLines(t, "ns show", n.run(t, "ns", "show", a), true, `page_format:\s+`+regexp.QuoteMeta(layerFirst))
	out = n.run(t, "ns", "diff", a, b)
	checkLines(t, "ns diff", out, false,
		`\*\s+page_format\s+`+regexp.QuoteMeta(layerFirst)+`\s+`+regexp.QuoteMeta(kvFirst),
		`relation: forks`,
		regexp.QuoteMeta(meaning),
	)

	// A TP fork stays a layout fork; one that also changes the format is a
	// format fork, whatever else differs.
	base := layout(4, 0)
	tp8 := layout(8, 0)
	if _, m, _ := relate(base, tp8); !strings.HasPrefix(m, "these namespaces cache the same model") {
		t.Errorf("tp fork: %q", m)
	}
	base.PageFormat, tp8.PageFormat = "kv:L2.S2.T16.H2.D64:bf16", "kv:L2.S2.T16.H1.D64:bf16"
	if rel, m, differ := relate(base, tp8); rel != relForks || !slices.Equal(differ, []string{"page_format", "tp_size"}) ||
		!strings.Contains(m, "(kv:L2.S2.T16.H2.D64:bf16 | kv:L2.S2.T16.H1.D64:bf16)") {
		t.Errorf("tp fork with page formats: %s %q %q", rel, m, differ)
	}
	if got := forkKind([]string{"kv_format_version", "page_format"}); got != kindFormat {
		t.Errorf("a version fork that changes the format is a %s fork", got)
	}
}

// checkTwoForks checks the text of `ns forks` for one group of two forks:
// its heading, its table (want, heading row first), its meaning line and
// that the hint line starts with hint.
func checkTwoForks(t *testing.T, out, heading string, want [][]string, meaning, hint string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("ns forks: want a heading, a table of 2 forks, meaning and hint:\n%s", out)
	}
	if lines[0] != heading {
		t.Errorf("ns forks heading = %q, want %q", lines[0], heading)
	}
	if rows := table(strings.Join(lines[1:4], "\n")); !slices.EqualFunc(rows, want, slices.Equal) {
		t.Errorf("ns forks table:\n got %q\nwant %q", rows, want)
	}
	if lines[4] != meaning || !strings.HasPrefix(lines[5], hint) {
		t.Errorf("ns forks: meaning and hint:\n%s\n%s", lines[4], lines[5])
	}
	t.Logf("strata ns forks:\n%s", out)
}
