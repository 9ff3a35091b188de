package main

import (
	"cmp"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratakv/strata/client/admin"
	"github.com/stratakv/strata/internal/testing/admintest"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/node"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// threeNodes is admintest.ThreeNodes with the CLI's handles on its nodes.
type threeNodes struct {
	*admintest.ThreeNodes
	a, b, c *testNode
	nodes   []*testNode // a, b, c: sorted by node ID, as Members lists them
}

func startThreeNodes(t *testing.T) *threeNodes {
	t.Helper()
	fx := admintest.StartThreeNodes(t, node.Config{HostBytes: 64 << 20, CoordRound: 200 * time.Millisecond})
	f := &threeNodes{ThreeNodes: fx, a: &testNode{fx.A}, b: &testNode{fx.B}, c: &testNode{fx.C}}
	f.nodes = []*testNode{f.a, f.b, f.c}
	return f
}

// env points the CLI at n.
func (n *testNode) env() map[string]string {
	return map[string]string{"STRATA_ENDPOINT": n.Addr}
}

// states maps the nodes, in ID order, to the given states.
func (f *threeNodes) states(states ...string) map[string]string {
	m := map[string]string{}
	for i, n := range f.nodes {
		m[n.ID()] = states[i]
	}
	return m
}

// awaitMembers waits until every node in on sees the members in want
// (node ID → state) and no others.
func (f *threeNodes) awaitMembers(t *testing.T, on []*testNode, want map[string]string) {
	t.Helper()
	for _, n := range on {
		n.AwaitMembers(t, want)
	}
}

func hexKey(p admintest.Page) string { return hex.EncodeToString(p.Key) }

func TestClusterNodeLs(t *testing.T) {
	f := startThreeNodes(t)
	out, _, err := strata(t, f.c.env(), "node", "ls")
	if err != nil {
		t.Fatalf("node ls: %v", err)
	}
	rows := table(out)
	if want := []string{"NODE", "STATE", "GRPC", "GOSSIP", "HOST", "PAGES", "LEASES", "EVICTIONS", "DEMOTIONS", "ERROR"}; !slices.Equal(rows[0], want) {
		t.Errorf("header = %q, want %q", rows[0], want)
	}
	want := map[*testNode][]string{
		f.a: {"alive", f.a.Addr, "48KiB/64MiB", "3", "1", "0", "0", "-"},
		f.b: {"alive", f.b.Addr, "48KiB/64MiB", "3", "0", "0", "0", "-"},
		f.c: {"alive", f.c.Addr, "0B/64MiB", "0", "0", "0", "0", "-"},
	}
	if len(rows) != 4 {
		t.Fatalf("node ls: %d rows, want 3:\n%s", len(rows)-1, out)
	}
	for i, n := range f.nodes {
		r := rows[1+i]
		got := append([]string{r[1], r[2]}, r[4:]...)
		if r[0] != n.ID() || !slices.Equal(got, want[n]) || !strings.HasPrefix(r[3], "127.0.0.1:") {
			t.Errorf("row %d = %q, want %s %q with a loopback gossip address", i, r, n.ID(), want[n])
		}
	}

	var doc struct {
		NodeID      string     `json:"node_id"`
		Coordinator string     `json:"coordinator"`
		Nodes       []nodeJSON `json:"nodes"`
	}
	out = f.c.run(t, "node", "ls", "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("node ls -o json: %v\n%s", err, out)
	}
	if doc.NodeID != f.c.ID() || len(doc.Nodes) != 3 {
		t.Fatalf("node ls -o json:\n%s", out)
	}
	for i, n := range f.nodes {
		v := doc.Nodes[i]
		if v.NodeID != n.ID() || v.State != "alive" || v.GRPCAddress != n.Addr || v.Error != "" || v.Info == nil ||
			v.Info.NodeID != n.ID() || v.Info.GossipAddress != v.GossipAddress || !v.Info.EtcdHealthy ||
			!slices.Equal(v.Info.EtcdEndpoints, f.Etcd) || len(v.Info.Tiers) != 1 ||
			v.Info.Tiers[0].Tier != "host" || v.Info.Tiers[0].CapacityBytes != 64<<20 || v.Weight != 64<<20 {
			t.Errorf("node %d: %+v, info %+v", i, v, v.Info)
		}
	}
}

func TestClusterStatus(t *testing.T) {
	f := startThreeNodes(t)
	// Wait for the elected coordinator's cutoffs to reach a.
	var doc clusterStatusDoc
	poll.Until(t, testnode.AwaitViewTimeout, 50*time.Millisecond, "a coordinator", func() bool {
		out := f.a.run(t, "cluster", "status", "-o", "json")
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("cluster status -o json: %v\n%s", err, out)
		}
		return doc.Coordinator != ""
	})
	if !slices.ContainsFunc(f.nodes, func(n *testNode) bool { return n.ID() == doc.Coordinator }) ||
		doc.Cutoffs == nil || !doc.Cutoffs.Coordinated || doc.Cutoffs.Epoch == 0 ||
		len(doc.Cutoffs.Tiers) != 1 || doc.Cutoffs.Tiers[0].Tier != "host" || doc.Cutoffs.Tiers[0].Worth != 0 {
		t.Fatalf("cluster status -o json: coordinator %q, cutoffs %+v", doc.Coordinator, doc.Cutoffs)
	}
	out := f.a.run(t, "cluster", "status")
	checkLines(t, "cluster status", out, false,
		`node asked:\s+`+f.a.ID(),
		`members:\s+3: 3 alive`,
		`coordinator:\s+node-[0-9a-f]+ \(cutoff epoch \d+, round \d+\)`,
		`cutoffs:\s+host none \(coordinated\)`,
		`etcd:\s+healthy`,
		`etcd endpoints:\s+`+regexp.QuoteMeta(strings.Join(f.Etcd, ",")),
		`TIER\s+NODES\s+USED\s+CAPACITY\s+USE%\s+PAGES`,
		`host\s+3\s+96KiB\s+192MiB\s+0\.0%\s+\d+`,
		`NODE\s+STATE\s+HOST\s+PAGES\s+ERROR`,
		f.a.ID()+`\s+alive\s+48KiB/64MiB\s+3\s+-`,
		f.c.ID()+`\s+alive\s+0B/64MiB\s+0\s+-`,
	)
	if strings.Contains(out, "recovery") {
		t.Errorf("cluster status reports recovery without durable tiers:\n%s", out)
	}

	doc = clusterStatusDoc{}
	out = f.a.run(t, "cluster", "status", "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("cluster status -o json: %v\n%s", err, out)
	}
	if doc.NodeID != f.a.ID() || doc.Coordinator == "" ||
		doc.Members != (memberCountsJSON{Total: 3, Alive: 3, Answered: 3}) ||
		doc.Etcd == nil || !doc.Etcd.Healthy || doc.Etcd.Error != "" || !slices.Equal(doc.Etcd.Endpoints, f.Etcd) ||
		len(doc.Tiers) != 1 || doc.Tiers[0].Tier != "host" || doc.Tiers[0].Nodes != 3 ||
		doc.Tiers[0].CapacityBytes != 3*64<<20 || doc.Tiers[0].UsedBytes != 6*f.PageBytes ||
		len(doc.Nodes) != 3 || doc.Recovery == nil || len(doc.Recovery) != 0 {
		t.Errorf("cluster status -o json:\n%s", out)
	}
}

// clusterStatusDoc reads `cluster status -o json` back.
type clusterStatusDoc struct {
	NodeID      string           `json:"node_id"`
	Coordinator string           `json:"coordinator"`
	Cutoffs     *cutoffsJSON     `json:"cutoffs"`
	Members     memberCountsJSON `json:"members"`
	Etcd        *etcdJSON        `json:"etcd"`
	Tiers       []struct {
		tierJSON
		Nodes int `json:"nodes"`
	} `json:"tiers"`
	Nodes    []nodeJSON        `json:"nodes"`
	Recovery []json.RawMessage `json:"recovery"`
}

// TestClusterNSLs asks c, which does not know the namespace: the listing
// still comes from a and b.
func TestClusterNSLs(t *testing.T) {
	f := startThreeNodes(t)
	rows := table(f.c.run(t, "ns", "ls"))
	want := [][]string{
		{"ID", "TENANT", "MODEL", "REVISION", "ENGINE", "DTYPE", "TP", "PAGE_TOKENS", "PAGE_BYTES", "NODES", "PAGES", "BYTES", "HIT%", "LEASES"},
		{hex.EncodeToString(f.NS)[:12], "acme", "llama-3-8b", "r1", "vllm", "bf16", "1", "16", "16KiB", "2", "6", "96KiB", "80.0%", "1"},
	}
	if !slices.EqualFunc(rows, want, slices.Equal) {
		t.Errorf("ns ls:\n got %q\nwant %q", rows, want)
	}

	var doc struct {
		NodeID     string          `json:"node_id"`
		Namespaces []namespaceJSON `json:"namespaces"`
	}
	out := f.c.run(t, "ns", "ls", "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("ns ls -o json: %v\n%s", err, out)
	}
	holders := []string{f.a.ID(), f.b.ID()}
	slices.Sort(holders)
	if len(doc.Namespaces) != 1 {
		t.Fatalf("ns ls -o json:\n%s", out)
	}
	n := doc.Namespaces[0]
	if doc.NodeID != f.c.ID() || n.ID != hex.EncodeToString(f.NS) || n.Pages != 6 || n.Bytes != 6*f.PageBytes ||
		n.Lookups != 2 || n.LookupKeys != 5 || n.HitKeys != 4 || n.HitRate == nil || *n.HitRate != 80 ||
		n.LeasesActive != 1 || !slices.Equal(n.Nodes, holders) ||
		len(n.Tiers) != 1 || n.Tiers[0].Tier != "host" || n.Tiers[0].Pages != 6 || n.Tiers[0].UsedBytes != 6*f.PageBytes {
		t.Errorf("ns ls -o json:\n%s", out)
	}
}

func TestClusterNSShow(t *testing.T) {
	f := startThreeNodes(t)
	id := hex.EncodeToString(f.NS)
	out := f.c.run(t, "ns", "show", id[:8])
	checkLines(t, "ns show", out, true,
		`id:\s+`+id,
		`pages:\s+6`,
		`bytes:\s+98304 \(96KiB\)`,
		`lookup_keys:\s+5`,
		`hit_keys:\s+4`,
		`hit_rate:\s+80.0%`,
		`leases_active:\s+1`,
		`tiers:`,
		`host:\s+6 pages, 98304 bytes \(96KiB\)`,
		`nodes:`,
		f.a.ID()+`:\s+3 pages, 49152 bytes \(48KiB\), hit rate 75.0%`,
		f.b.ID()+`:\s+3 pages, 49152 bytes \(48KiB\), hit rate 100.0%`,
	)
	if strings.Contains(out, f.c.ID()) {
		t.Errorf("ns show lists c, which does not know the namespace:\n%s", out)
	}

	var doc struct {
		NodeID    string        `json:"node_id"`
		Namespace namespaceJSON `json:"namespace"`
		PerNode   []nsNodeJSON  `json:"per_node"`
	}
	out = f.c.run(t, "ns", "show", id, "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("ns show -o json: %v\n%s", err, out)
	}
	if doc.NodeID != f.c.ID() || doc.Namespace.Pages != 6 || len(doc.PerNode) != 2 {
		t.Fatalf("ns show -o json:\n%s", out)
	}
	for _, p := range doc.PerNode {
		if p.Pages != 3 || p.Bytes != 3*f.PageBytes || (p.NodeID != f.a.ID() && p.NodeID != f.b.ID()) {
			t.Errorf("ns show -o json: per node %+v", p)
		}
	}
}

// keyRows is every copy of f's pages as keys ls lists them: key, node.
func (f *threeNodes) keyRows() [][2]string {
	var rows [][2]string
	for _, p := range f.ChainA {
		rows = append(rows, [2]string{hexKey(p), f.a.ID()})
	}
	for _, p := range append(slices.Clone(f.ChainB), f.ChainA[0]) {
		rows = append(rows, [2]string{hexKey(p), f.b.ID()})
	}
	slices.SortFunc(rows, func(x, y [2]string) int {
		return cmp.Or(strings.Compare(x[0], y[0]), strings.Compare(x[1], y[1]))
	})
	return rows
}

func TestClusterKeysLs(t *testing.T) {
	f := startThreeNodes(t)
	ns := hex.EncodeToString(f.NS)[:10]
	want := f.keyRows()

	rows := table(f.c.run(t, "keys", "ls", ns, "--wide"))
	if head := []string{"KEY", "NODE", "DEPTH", "SIZE", "TIER", "CHECKSUM", "LEASES", "HITS", "AGE", "PARENT"}; !slices.Equal(rows[0], head) {
		t.Errorf("header = %q, want %q", rows[0], head)
	}
	var got [][2]string
	for _, r := range rows[1:] {
		got = append(got, [2]string{r[0], r[1]})
	}
	if !slices.Equal(got, want) {
		t.Errorf("keys ls: key, node\n got %q\nwant %q", got, want)
	}

	// Pages of one row each, --after the key the last page ended on: the
	// same listing, a key held by two nodes never split between pages.
	got = nil
	for after, pages := "", 0; ; pages++ {
		if pages > len(want) {
			t.Fatalf("keys ls --limit 1 does not end")
		}
		args := []string{"keys", "ls", ns, "--wide", "--limit", "1"}
		if after != "" {
			args = append(args, "--after", after)
		}
		out, stderr, err := strata(t, f.c.env(), args...)
		if err != nil {
			t.Fatalf("strata %s: %v", strings.Join(args, " "), err)
		}
		for _, r := range table(out)[1:] {
			got = append(got, [2]string{r[0], r[1]})
		}
		_, next, more := strings.Cut(strings.TrimSpace(stderr), "more keys may follow: --after ")
		if !more {
			break
		}
		after = next
	}
	if !slices.Equal(got, want) {
		t.Errorf("keys ls --limit 1, page by page:\n got %q\nwant %q", got, want)
	}

	var doc struct {
		Keys         []keyJSON `json:"keys"`
		NextAfterKey string    `json:"next_after_key"`
	}
	out := f.c.run(t, "keys", "ls", ns, "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("keys ls -o json: %v\n%s", err, out)
	}
	got = nil
	for _, k := range doc.Keys {
		got = append(got, [2]string{k.Key, k.Node})
	}
	if !slices.Equal(got, want) || doc.NextAfterKey != "" {
		t.Errorf("keys ls -o json:\n%s", out)
	}
}

func TestClusterKeysStat(t *testing.T) {
	f := startThreeNodes(t)
	ns := hex.EncodeToString(f.NS)[:12]
	both, onB := f.ChainA[0], f.ChainB[1]
	absent := strings.Repeat("00", 32)

	out, _, err := strata(t, f.c.env(), "keys", "stat", ns, hexKey(both), hexKey(onB), absent)
	if err == nil || err.Error() != "1 of 3 keys absent" {
		t.Errorf("keys stat with an absent key: err = %v", err)
	}
	ab := []string{f.a.ID(), f.b.ID()}
	slices.Sort(ab)
	var blocks []string
	for _, b := range strings.Split(strings.TrimSpace(out), "\n\n") {
		key := regexp.MustCompile(`(?m)^key:\s+(\S+)$`).FindStringSubmatch(b)
		node := regexp.MustCompile(`(?m)^node:\s+(\S+)$`).FindStringSubmatch(b)
		status := regexp.MustCompile(`(?m)^status:\s+(\S+)$`).FindStringSubmatch(b)
		if key == nil || status == nil {
			t.Fatalf("keys stat: a block without key or status:\n%s", b)
		}
		s := key[1] + " " + status[1]
		if node != nil {
			s += " " + node[1]
		}
		blocks = append(blocks, s)
	}
	wantBlocks := []string{hexKey(both) + " present " + ab[0], hexKey(both) + " present " + ab[1],
		hexKey(onB) + " present " + f.b.ID(), absent + " absent"}
	if !slices.Equal(blocks, wantBlocks) {
		t.Errorf("keys stat blocks:\n got %q\nwant %q\n%s", blocks, wantBlocks, out)
	}

	var doc struct {
		Keys []struct {
			Found  bool      `json:"found"`
			Nodes  []string  `json:"nodes"`
			Copies []keyJSON `json:"copies"`
			keyJSON
		} `json:"keys"`
	}
	out, _, _ = strata(t, f.c.env(), "keys", "stat", ns, hexKey(both), hexKey(onB), absent, "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("keys stat -o json: %v\n%s", err, out)
	}
	if len(doc.Keys) != 3 || !slices.Equal(doc.Keys[0].Nodes, ab) || len(doc.Keys[0].Copies) != 2 ||
		!slices.Equal(doc.Keys[1].Nodes, []string{f.b.ID()}) || doc.Keys[1].ParentKey != hexKey(f.ChainB[0]) || doc.Keys[1].Node != f.b.ID() ||
		doc.Keys[2].Found || len(doc.Keys[2].Nodes) != 0 {
		t.Errorf("keys stat -o json:\n%s", out)
	}
}

// TestClusterFailures adds a member that gossips but whose gRPC address
// answers nothing, then crashes it and stops c: every command carries on
// with the nodes that answer and exits 0.
func TestClusterFailures(t *testing.T) {
	f := startThreeNodes(t)
	ghost, deadAddr := testnode.StartGhost(t, f.a.GossipAddress())
	states := f.states("alive", "alive", "alive")
	states["node-ghost"] = "alive"
	f.awaitMembers(t, f.nodes, states)

	// node ls: the ghost is alive and says why it gave no figures.
	out, stderr, err := strata(t, f.a.env(), "node", "ls")
	if err != nil {
		t.Fatalf("node ls with an unreachable member: %v", err)
	}
	rows := table(out)
	want := []string{"node-ghost", "alive", deadAddr, ghost.GossipAddress(), "-", "-", "-", "-", "-", "connection", "refused"}
	if len(rows) != 5 || !slices.Equal(rows[4], want) || stderr != "" {
		t.Errorf("node ls with an unreachable member: want a row %q\n%s\nstderr: %s", want, out, stderr)
	}
	var nodes struct {
		Nodes []nodeJSON `json:"nodes"`
	}
	out = f.a.run(t, "node", "ls", "-o", "json")
	if err := json.Unmarshal([]byte(out), &nodes); err != nil || len(nodes.Nodes) != 4 {
		t.Fatalf("node ls -o json: %v\n%s", err, out)
	}
	if g := nodes.Nodes[3]; g.NodeID != "node-ghost" || g.Error != "connection refused" || g.Info != nil {
		t.Errorf("node ls -o json: the ghost is %+v", g)
	}

	// The cluster-wide commands warn about the ghost and print the rest.
	warning := "node node-ghost (" + deadAddr + ") unreachable: connection refused; results may be incomplete\n"
	id := hex.EncodeToString(f.NS)
	for _, c := range []struct {
		args []string
		want string // a line of the output
	}{
		{[]string{"ns", "ls"}, id[:12] + `\s+acme\s.*\s2\s+6\s+96KiB\s+80.0%\s+\d+`},
		{[]string{"ns", "show", id}, `\s+pages:\s+6`},
		{[]string{"keys", "ls", id}, hexKey(f.ChainB[0])[:16] + `\s+` + f.b.ID() + `\s.*`},
		{[]string{"keys", "stat", id, hexKey(f.ChainB[0])}, `status:\s+present`},
	} {
		out, stderr, err := strata(t, f.a.env(), c.args...)
		if err != nil || stderr != warning || !regexp.MustCompile(`(?m)^`+c.want+`$`).MatchString(out) {
			t.Errorf("strata %s with an unreachable member: err %v, stderr %q, want a line %q:\n%s",
				strings.Join(c.args, " "), err, stderr, c.want, out)
		}
	}

	// c leaves, then the ghost crashes: neither is asked any more.
	if err := f.c.Close(); err != nil {
		t.Fatalf("stopping c: %v", err)
	}
	// A node that closes leaves the cluster, but its peers may take the
	// leave for a death when the leaving flag's broadcast loses the race
	// with memberlist's own leave: either is "gone" here.
	states[f.c.ID()] = "left|dead"
	f.awaitMembers(t, []*testNode{f.a, f.b}, states)
	if err := ghost.Shutdown(); err != nil {
		t.Fatal(err)
	}
	states["node-ghost"] = "dead"
	f.awaitMembers(t, []*testNode{f.a, f.b}, states)

	out, stderr, err = strata(t, f.a.env(), "node", "ls")
	if err != nil || stderr != "" {
		t.Fatalf("node ls with a dead and a left member: err %v, stderr %q", err, stderr)
	}
	gone := map[string][]string{f.c.ID(): {"left|dead", f.c.Addr}, "node-ghost": {"dead", deadAddr}}
	cState := ""
	for _, r := range table(out)[1:] {
		want, ok := gone[r[0]]
		if !ok {
			continue
		}
		delete(gone, r[0])
		if r[0] == f.c.ID() {
			cState = r[1]
		}
		// STATE, GRPC, GOSSIP, then no figures and no error: not asked.
		if len(r) != 10 || !slices.Contains(strings.Split(want[0], "|"), r[1]) || r[2] != want[1] ||
			!slices.Equal(r[4:], []string{"-", "-", "-", "-", "-", "-"}) {
			t.Errorf("node ls: row %q, want %q then no figures", r, want)
		}
	}
	if len(gone) > 0 {
		t.Errorf("node ls lacks %v:\n%s", gone, out)
	}
	out = f.a.run(t, "cluster", "status")
	members := `4: 2 alive, 1 dead, 1 left`
	if cState == "dead" {
		members = `4: 2 alive, 2 dead`
	}
	if !regexp.MustCompile(`(?m)^members:\s+`+members+`$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^host\s+2\s+96KiB\s+128MiB\s`).MatchString(out) {
		t.Errorf("cluster status with a dead and a left member:\n%s", out)
	}
	out, stderr, err = strata(t, f.a.env(), "ns", "ls")
	if rows := table(out); err != nil || stderr != "" || len(rows) != 2 || rows[1][9] != "2" || rows[1][10] != "6" {
		t.Errorf("ns ls with a dead and a left member: err %v, stderr %q\n%s", err, stderr, out)
	}
}

// TestClusterStatusLocalCutoffs: a node without coordinator cutoffs (no
// coordinator, or etcd down) is reported as using local ones.
func TestClusterStatusLocalCutoffs(t *testing.T) {
	var b strings.Builder
	doc := (&globals{}).clusterStatus(admin.Status{View: &pb.MembersResponse{NodeId: "n1", Cutoffs: &pb.CutoffState{
		Tiers: []*pb.TierCutoff{{Tier: pb.Tier_TIER_HOST, Worth: 1234.5}, {Tier: pb.Tier_TIER_SSD}}}}})
	if err := writeClusterStatus(&b, doc); err != nil {
		t.Fatal(err)
	}
	checkLines(t, "cluster status", b.String(), false,
		`coordinator:\s+none: nodes use local cutoffs`,
		`cutoffs:\s+host 1\.23e\+03, ssd none \(local\)`,
	)
}
