package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/client/admin"
	"github.com/stratakv/strata/internal/testing/admintest"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// Tests of the commands that change the cluster (ns rm, ns ttl, keys rm,
// tenant), of lease ls, ns diff and ns forks on one node, and of
// --endpoints.

// checkUnregistered checks whether the namespace is still registered: a
// data-plane call on a namespace the node dropped brings it back from the
// registry when it is, and fails with NOT_FOUND when it is not.
func checkUnregistered(t *testing.T, n *testNode, id []byte, unregistered bool) {
	t.Helper()
	_, err := n.Data.Lookup(n.Ctx(t), &pb.LookupRequest{NamespaceId: id, Keys: [][]byte{make([]byte, 32)}})
	switch {
	case unregistered && status.Code(err) != codes.NotFound:
		t.Errorf("lookup in a removed, unregistered namespace: %v, want NotFound", err)
	case !unregistered && err != nil:
		t.Errorf("lookup in a removed namespace that stays registered: %v", err)
	}
}

func TestNSRm(t *testing.T) {
	c := newCluster(t)
	acme, fork := hex.EncodeToString(c.acme), hex.EncodeToString(c.fork)
	env := map[string]string{"STRATA_ENDPOINT": c.Addr}

	// Without --yes it only says what it would remove.
	_, _, err := strata(t, env, "ns", "rm", acme[:8])
	want := "refusing to remove namespace " + acme + " without --yes: tenant acme, model llama-3-8b r1: 3 pages, 48KiB on 1 node(s)"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("ns rm without --yes: err = %v, want %q", err, want)
	}
	if rows := table(c.run(t, "ns", "ls")); len(rows) != 4 {
		t.Fatalf("ns rm without --yes removed something:\n%q", rows)
	}

	out := c.run(t, "ns", "rm", fork[:8], "--yes")
	if want := "removed namespace " + fork + ": 1 pages dropped on 1 node(s); registration deleted\n"; out != want {
		t.Errorf("ns rm:\n got %q\nwant %q", out, want)
	}
	rows := table(c.run(t, "ns", "ls"))
	if len(rows) != 3 || slices.ContainsFunc(rows, func(r []string) bool { return r[0] == fork[:12] }) {
		t.Errorf("ns ls after ns rm of %s:\n%q", fork[:12], rows)
	}
	checkUnregistered(t, c.testNode, c.fork, true)

	// The leased namespace goes too; -o json says what each node did.
	var doc nsRmJSON
	out = c.run(t, "ns", "rm", acme, "--yes", "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("ns rm -o json: %v\n%s", err, out)
	}
	if doc.NamespaceID != acme || doc.PagesDropped != 3 || doc.NodeID == "" ||
		!slices.Equal(doc.Nodes, []nodeDropJSON{{NodeID: doc.NodeID, Known: true, PagesDropped: 3}}) ||
		!doc.Unregistered || doc.Registration != "deleted" {
		t.Errorf("ns rm -o json:\n%s", out)
	}
	if _, _, err := strata(t, env, "ns", "show", acme); err == nil || !strings.Contains(err.Error(), "no namespace matches") {
		t.Errorf("ns show after ns rm: err = %v", err)
	}
	checkUnregistered(t, c.testNode, c.acme, true)

	// --keep-registration drops the pages and keeps the record.
	beta := hex.EncodeToString(c.beta)
	out = c.run(t, "ns", "rm", beta, "--yes", "--keep-registration")
	if out != "removed namespace "+beta+": 0 pages dropped on 1 node(s); registration kept (--keep-registration)\n" {
		t.Errorf("ns rm --keep-registration: %q", out)
	}
	checkUnregistered(t, c.testNode, c.beta, false)
}

func TestNSTTL(t *testing.T) {
	c := newCluster(t)
	acme := hex.EncodeToString(c.acme)
	out := c.run(t, "ns", "ttl", acme[:6], "90m")
	if want := "namespace " + acme + ": pages unused for more than 1h30m0s are removed, on 1 node(s)\n"; out != want {
		t.Errorf("ns ttl:\n got %q\nwant %q", out, want)
	}

	var doc nsTTLJSON
	out = c.run(t, "ns", "ttl", acme, "0", "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("ns ttl -o json: %v\n%s", err, out)
	}
	want := []nodeTTLJSON{{NodeID: doc.NodeID, TTLMs: 0, PreviousTTLMs: 90 * 60 * 1000, Pages: 3}}
	if doc.NamespaceID != acme || doc.TTLMs != 0 || !slices.Equal(doc.Nodes, want) {
		t.Errorf("ns ttl -o json:\n%s\nwant nodes %+v", out, want)
	}
	out = c.run(t, "ns", "ttl", acme, "0")
	if want := "namespace " + acme + ": idle TTL cleared on 1 node(s)\n"; out != want {
		t.Errorf("ns ttl 0: %q, want %q", out, want)
	}
}

func TestKeysRm(t *testing.T) {
	c := newCluster(t)
	ns := hex.EncodeToString(c.acme)[:12]
	absent := strings.Repeat("00", 32)

	out := c.run(t, "keys", "rm", ns, hexKey(c.pages[2]), absent)
	if out != "deleted 1 page(s) of the 2 key(s) given, on 1 node(s)\n" {
		t.Errorf("keys rm: %q", out)
	}
	var doc keysRmJSON
	out = c.run(t, "keys", "rm", ns, hexKey(c.pages[1]), "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("keys rm -o json: %v\n%s", err, out)
	}
	if doc.NamespaceID != hex.EncodeToString(c.acme) || doc.Keys != 1 || doc.Deleted != 1 ||
		!slices.Equal(doc.Nodes, []nodeDeleteJSON{{NodeID: doc.NodeID, Deleted: 1}}) {
		t.Errorf("keys rm -o json:\n%s", out)
	}
	rows := table(c.run(t, "keys", "ls", ns))
	if len(rows) != 2 || rows[1][0] != hexKey(c.pages[0])[:16] {
		t.Errorf("keys ls after keys rm: %q, want only the first page", rows)
	}
	// Deleting again deletes nothing, and is no error.
	if out := c.run(t, "keys", "rm", ns, hexKey(c.pages[1])); out != "deleted 0 page(s) of the 1 key(s) given, on 1 node(s)\n" {
		t.Errorf("keys rm again: %q", out)
	}
}

func TestLeaseLs(t *testing.T) {
	c := newCluster(t)
	rows := table(c.run(t, "lease", "ls"))
	if len(rows) != 2 || !slices.Equal(rows[0], []string{"LEASE", "NAMESPACE", "TENANT", "PAGES", "EXPIRES_IN"}) ||
		!regexp.MustCompile(`^\d+$`).MatchString(rows[1][0]) ||
		!slices.Equal(rows[1][1:4], []string{hex.EncodeToString(c.acme)[:12], "acme", "3"}) ||
		!regexp.MustCompile(`^\d+s$`).MatchString(rows[1][4]) {
		t.Errorf("lease ls: %q", rows)
	}

	var doc struct {
		NodeID string      `json:"node_id"`
		Total  uint64      `json:"total"`
		Leases []leaseJSON `json:"leases"`
	}
	out := c.run(t, "lease", "ls", "-o", "json", "--tenant", "acme")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("lease ls -o json: %v\n%s", err, out)
	}
	if doc.Total != 1 || len(doc.Leases) != 1 || doc.Leases[0].NamespaceID != hex.EncodeToString(c.acme) ||
		doc.Leases[0].Tenant != "acme" || doc.Leases[0].Pages != 3 || doc.Leases[0].NodeID != doc.NodeID ||
		fmt.Sprint(doc.Leases[0].LeaseID) != rows[1][0] || doc.Leases[0].ExpiresUnixMs == 0 {
		t.Errorf("lease ls -o json:\n%s", out)
	}
	out = c.run(t, "lease", "ls", "-o", "json", "--tenant", "beta")
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Total != 0 || doc.Leases == nil || len(doc.Leases) != 0 {
		t.Errorf("lease ls --tenant beta -o json: %v\n%s", err, out)
	}

	// --limit cuts the list and says how many more there are.
	c.Lookup(t, c.acme, true, c.pages[0].Key)
	out, stderr, err := strata(t, map[string]string{"STRATA_ENDPOINT": c.Addr}, "lease", "ls", "--limit", "1")
	if err != nil || len(table(out)) != 2 || stderr != "1 more leases not listed (raise --limit)\n" {
		t.Errorf("lease ls --limit 1: err %v, stderr %q\n%s", err, stderr, out)
	}
}

// TestNSDiff compares acme's namespace with its page_tokens fork and with
// beta's.
func TestNSDiff(t *testing.T) {
	c := newCluster(t)
	acme, fork := hex.EncodeToString(c.acme), hex.EncodeToString(c.fork)
	out := c.run(t, "ns", "diff", acme[:8], fork[:8])
	var marked []string
	for _, r := range table(out) {
		if r[0] == "*" {
			marked = append(marked, strings.Join(r[1:], " "))
		}
	}
	if !slices.Equal(marked, []string{"page_tokens 16 32"}) {
		t.Errorf("ns diff marks %q, want only page_tokens:\n%s", marked, out)
	}
	checkLines(t, "ns diff", out, false,
		`\s+FIELD\s+A\s+B`,
		`\s+tenant\s+acme\s+acme`,
		`\s+page_size\s+16KiB\s+32KiB`,
		`\s+pages\s+3\s+1`,
		`\s+bytes\s+48KiB\s+32KiB`,
		`\s+hit_rate\s+75.0%\s+-`,
		`relation: forks`,
		`meaning: these namespaces cache the same model but cannot share pages: requests routed to a page_tokens=16 `+
			`replica miss pages written by page_tokens=32 replicas, and the other way round`,
	)

	var doc nsDiffJSON
	out = c.run(t, "ns", "diff", acme, hex.EncodeToString(c.beta), "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("ns diff -o json: %v\n%s", err, out)
	}
	i := slices.IndexFunc(doc.Fields, func(f diffFieldJSON) bool { return f.Name == "tenant" })
	if doc.Relation != relUnrelated || !strings.HasPrefix(doc.Meaning, "different tenants") ||
		!slices.Equal(doc.Differ, []string{"tenant"}) || i < 0 || doc.Fields[i] != (diffFieldJSON{"tenant", "acme", "beta", true}) ||
		doc.A.Pages != 3 || doc.B.Descriptor.Tenant != "beta" {
		t.Errorf("ns diff -o json:\n%s", out)
	}
}

// TestNSForks: acme's namespace and its page_tokens fork on one node.
func TestNSForks(t *testing.T) {
	c := newCluster(t)
	out := c.run(t, "ns", "forks")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 6 || lines[0] != "tenant acme, model llama-3-8b, revision r1: 2 forks, differing in page_tokens" ||
		lines[4] != "meaning: these namespaces cache the same model but cannot share pages: requests routed to a "+
			"page_tokens=16 replica miss pages written by page_tokens=32 replicas, and the other way round" {
		t.Fatalf("ns forks:\n%s", out)
	}
	rows := table(strings.Join(lines[1:4], "\n"))
	want := [][]string{
		{"FORK", "PAGE_TOKENS", "SHARDS", "ID", "PAGE_BYTES", "PAGES", "BYTES", "HIT%"},
		{"1", "16", "1", hex.EncodeToString(c.acme)[:12], "16KiB", "3", "48KiB", "75.0%"},
		{"2", "32", "1", hex.EncodeToString(c.fork)[:12], "32KiB", "1", "32KiB", "-"},
	}
	if !slices.EqualFunc(rows, want, slices.Equal) {
		t.Errorf("ns forks:\n got %q\nwant %q", rows, want)
	}

	var doc struct {
		Namespaces int             `json:"namespaces"`
		Groups     []forkGroupJSON `json:"groups"`
	}
	out = c.run(t, "ns", "forks", "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("ns forks -o json: %v\n%s", err, out)
	}
	if doc.Namespaces != 3 || len(doc.Groups) != 1 || len(doc.Groups[0].Forks) != 2 ||
		string(doc.Groups[0].Forks[1].Values["page_tokens"]) != "32" || doc.Groups[0].Forks[1].HitRate != nil ||
		doc.Groups[0].Forks[0].Shards[0].ID != hex.EncodeToString(c.acme) || doc.Groups[0].Bytes != 80<<10 {
		t.Errorf("ns forks -o json:\n%s", out)
	}
}

func TestEndpoints(t *testing.T) {
	n := startNode(t, nil)
	n.Open(t, admintest.Descriptor("acme"))
	closed, closed2 := testnode.ClosedAddr(t), testnode.ClosedAddr(t)
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"flag", nil, []string{"--endpoints", closed + "," + n.Addr}},
		{"alias", nil, []string{"--endpoint", closed + ", " + n.Addr}},
		{"env", map[string]string{"STRATA_ENDPOINTS": closed + "," + n.Addr}, nil},
		{"env over the old one", map[string]string{"STRATA_ENDPOINTS": n.Addr, "STRATA_ENDPOINT": closed}, nil},
		{"flag over env", map[string]string{"STRATA_ENDPOINTS": closed}, []string{"--endpoints", n.Addr}},
	} {
		out, stderr, err := strata(t, c.env, append([]string{"ns", "ls"}, c.args...)...)
		if rows := table(out); err != nil || len(rows) != 2 || rows[1][1] != "acme" || stderr != "" {
			t.Errorf("%s: err %v, stderr %q\n%s", c.name, err, stderr, out)
		}
	}

	_, _, err := strata(t, nil, "ns", "ls", "--endpoints", closed+","+closed2)
	for _, want := range []string{"cannot reach a strata node at any of the 2 endpoints:\n  " + closed + ": connection refused\n  " +
		closed2 + ": connection refused\n", "is stratad running?"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("no endpoint answers: err = %v, want %q", err, want)
		}
	}
}

// TestEndpointRefusalEndsSearch: a node that refuses the token is an
// answer; the next endpoint would refuse it too.
func TestEndpointRefusalEndsSearch(t *testing.T) {
	locked := startNode(t, map[string]string{"acme-token": "acme"})
	open := startNode(t, nil)
	_, _, err := strata(t, nil, "ns", "ls", "--endpoints", locked.Addr+","+open.Addr)
	if err == nil || !strings.Contains(err.Error(), "the node at "+locked.Addr+" requires a token") {
		t.Errorf("err = %v, want the first node's refusal", err)
	}
}

func TestManageBadArguments(t *testing.T) {
	env := map[string]string{"STRATA_ENDPOINT": testnode.ClosedAddr(t)}
	key := strings.Repeat("ab", 32)
	checkBadArguments(t, env, []badArgument{
		{[]string{"ns", "ls", "--endpoints", " , "}, "--endpoints is empty"},
		{[]string{"ns", "rm"}, "accepts 1 arg(s), received 0"},
		{[]string{"ns", "rm", "xyz", "--yes"}, `"xyz" is not a namespace id or id prefix`},
		{[]string{"ns", "ttl", "ab"}, "accepts 2 arg(s), received 1"},
		{[]string{"ns", "ttl", "ab", "soon"}, `"soon" is not a duration`},
		{[]string{"ns", "ttl", "--", "ab", "-1h"}, "must not be negative"},
		{[]string{"ns", "ttl", "ab", "10us"}, "at least 1ms"},
		{[]string{"ns", "diff", "ab"}, "accepts 2 arg(s), received 1"},
		{[]string{"ns", "diff", "ab", "xyz"}, `"xyz" is not a namespace id or id prefix`},
		{[]string{"ns", "forks", "extra"}, `unknown command "extra" for "strata ns forks"`},
		{[]string{"keys", "rm", "ab"}, "requires at least 2 arg(s)"},
		{[]string{"keys", "rm", "ab", key, "1x"}, `"1x" is not a page key or key prefix`},
		{[]string{"lease", "ls", "--limit", "-1"}, "--limit must not be negative"},
		{[]string{"lease", "bogus"}, `unknown command "bogus" for "strata lease"`},
	})
	out, _, err := strata(t, nil, "lease")
	if err != nil || !strings.Contains(out, "ls") {
		t.Errorf("strata lease: err %v\n%s", err, out)
	}
	out, _, err = strata(t, nil, "ns")
	for _, sub := range []string{"diff", "forks", "rm", "ttl"} {
		if err != nil || !regexp.MustCompile(`(?m)^\s+`+sub+`\s`).MatchString(out) {
			t.Errorf("strata ns: err %v, lacks %s:\n%s", err, sub, out)
		}
	}
}

// TestClusterManage runs the commands that change the cluster from c,
// which does not hold the namespace: each reaches a and b.
func TestClusterManage(t *testing.T) {
	f := startThreeNodes(t)
	id := hex.EncodeToString(f.NS)

	// lease ls: a's lease, from c.
	rows := table(f.c.run(t, "lease", "ls"))
	if len(rows) != 2 || !slices.Equal(rows[0], []string{"LEASE", "NODE", "NAMESPACE", "TENANT", "PAGES", "EXPIRES_IN"}) ||
		!slices.Equal(rows[1][1:5], []string{f.a.ID(), id[:12], "acme", "3"}) {
		t.Errorf("lease ls: %q", rows)
	}

	// ns ttl: on a and b.
	rows = table(f.c.run(t, "ns", "ttl", id[:8], "30m"))
	wantTTL := [][]string{{"NODE", "TTL", "PREVIOUS", "PAGES", "EXPIRED"}}
	for _, n := range f.nodes {
		if n != f.c {
			wantTTL = append(wantTTL, []string{n.ID(), "30m0s", "none", "3", "0"})
		}
	}
	wantTTL = append(wantTTL, strings.Fields("namespace "+id+": pages unused for more than 30m0s are removed, on 2 node(s)"))
	if !slices.EqualFunc(rows, wantTTL, slices.Equal) {
		t.Errorf("ns ttl:\n got %q\nwant %q", rows, wantTTL)
	}

	// keys rm: a's first page has a copy on b.
	rows = table(f.c.run(t, "keys", "rm", id, hexKey(f.ChainA[0])))
	wantRm := [][]string{{"NODE", "DELETED"}}
	for _, n := range f.nodes {
		if n != f.c {
			wantRm = append(wantRm, []string{n.ID(), "1"})
		}
	}
	wantRm = append(wantRm, strings.Fields("deleted 2 page(s) of the 1 key(s) given, on 2 node(s)"))
	if !slices.EqualFunc(rows, wantRm, slices.Equal) {
		t.Errorf("keys rm:\n got %q\nwant %q", rows, wantRm)
	}

	// ns rm, run again after a run that unregistered the namespace and
	// dropped it on a, then failed: b drops what is left, and the missing
	// registration is no error.
	_, _, err := strata(t, f.c.env(), "ns", "rm", id)
	if err == nil || !strings.Contains(err.Error(), ": 4 pages, 64KiB on 2 node(s)") {
		t.Errorf("ns rm without --yes: %v", err)
	}
	drop, err := pb.NewAdminClient(f.a.CC).DropNamespace(t.Context(), &pb.DropNamespaceRequest{NamespaceId: f.NS, Unregister: true})
	if err != nil || drop.GetPagesDropped() != 2 || !drop.GetUnregistered() {
		t.Fatalf("dropping on a: %v, %+v", err, drop)
	}
	out := f.c.run(t, "ns", "rm", id, "--yes")
	rows = table(out)
	want := [][]string{{"NODE", "HELD", "PAGES_DROPPED"}}
	for _, n := range f.nodes {
		held := map[bool][]string{true: {n.ID(), "yes", "2"}, false: {n.ID(), "no", "0"}}[n == f.b]
		want = append(want, held)
	}
	want = append(want, strings.Fields("removed namespace "+id+": 2 pages dropped on 1 node(s); registration deleted"))
	if !slices.EqualFunc(rows, want, slices.Equal) {
		t.Errorf("ns rm:\n got %q\nwant %q", rows, want)
	}
	for _, n := range []*testNode{f.a, f.b, f.c} {
		if rows := table(n.run(t, "ns", "ls")); len(rows) != 1 {
			t.Errorf("ns ls on %s after ns rm: %q", n.ID(), rows)
		}
	}
	checkUnregistered(t, f.c, f.NS, true)
}

// noUnregisterNode is a node whose registry cannot delete registrations:
// it holds one namespace of 2 pages and drops it when not asked to
// unregister.
type noUnregisterNode struct {
	pb.UnimplementedAdminServer
	dropped chan *pb.DropNamespaceRequest
}

var noUnregisterNS = &pb.NamespaceInfo{Id: []byte{0xab, 0xcd}, Descriptor_: admintest.Descriptor("acme"), PageBytes: 16 << 10,
	Pages: 2, Bytes: 32 << 10}

func (noUnregisterNode) NodeInfo(context.Context, *pb.NodeInfoRequest) (*pb.NodeInfoResponse, error) {
	return &pb.NodeInfoResponse{NodeId: "node-old"}, nil
}

func (noUnregisterNode) GetNamespace(context.Context, *pb.GetNamespaceRequest) (*pb.GetNamespaceResponse, error) {
	return &pb.GetNamespaceResponse{NodeId: "node-old", Namespace: noUnregisterNS}, nil
}

func (n noUnregisterNode) DropNamespace(_ context.Context, req *pb.DropNamespaceRequest) (*pb.DropNamespaceResponse, error) {
	if req.GetUnregister() {
		return nil, status.Error(codes.Unimplemented, "this node's registry cannot delete namespace registrations")
	}
	n.dropped <- req
	return &pb.DropNamespaceResponse{NodeId: "node-old", Known: true, PagesDropped: 2}, nil
}

// TestNSRmCannotUnregister: a node that cannot delete the registration
// still drops the pages; ns rm says the registration stays.
func TestNSRmCannotUnregister(t *testing.T) {
	fake := noUnregisterNode{dropped: make(chan *pb.DropNamespaceRequest, 1)}
	addr := testnode.Serve(t, func(s *grpc.Server) { pb.RegisterAdminServer(s, fake) })
	out, stderr, err := strata(t, map[string]string{"STRATA_ENDPOINT": addr}, "ns", "rm", "abcd", "--yes")
	if err != nil {
		t.Fatalf("ns rm: %v", err)
	}
	if want := "removed namespace abcd: 2 pages dropped on 1 node(s); registration kept: node node-old cannot delete registrations\n"; out != want {
		t.Errorf("ns rm:\n got %q\nwant %q", out, want)
	}
	if want := "node node-old (" + addr + ") could not delete the namespace's registration (this node's registry cannot " +
		"delete namespace registrations): it stays in etcd, and a node learns the namespace again when a client uses it\n"; stderr != want {
		t.Errorf("ns rm stderr:\n got %q\nwant %q", stderr, want)
	}
	if req := <-fake.dropped; !bytes.Equal(req.GetNamespaceId(), noUnregisterNS.GetId()) {
		t.Errorf("dropped %x", req.GetNamespaceId())
	}
}

// TestTenantCommands: strata tenant add prints a token a node then serves
// (within seconds, from etcd), ls shows the tenant, its quota and usage
// without the token, rotate makes the old token refused, rm the new one.
func TestTenantCommands(t *testing.T) {
	n := testnode.Start(t, node.Config{HostBytes: 16 << 20, ShmSocket: "off", AdminToken: "root"})
	env := map[string]string{"STRATA_ENDPOINT": n.Addr(), "STRATA_ETCD": strings.Join(n.EtcdEndpoints(), ",")}
	cli := func(args ...string) string {
		t.Helper()
		return mustStrata(t, env, args...)
	}
	var added struct{ Tenant, Token string }
	if err := json.Unmarshal([]byte(cli("tenant", "add", "acme", "--bytes", "1048576", "-o", "json")), &added); err != nil || len(added.Token) != 64 {
		t.Fatalf("tenant add: %+v, %v", added, err)
	}
	if _, _, err := strata(t, env, "tenant", "add", "acme"); err == nil {
		t.Fatal("adding a tenant twice succeeded")
	}
	ls := cli("tenant", "ls")
	if !strings.Contains(ls, "acme") || !strings.Contains(ls, "1MiB") || strings.Contains(ls, added.Token) {
		t.Fatalf("tenant ls:\n%s", ls)
	}
	d := namespace.Descriptor{Tenant: "acme", Model: "m", ModelRevision: "r", Engine: "test", DType: "bf16",
		PageTokens: 16, NumLayers: 2, NumKVHeads: 2, HeadDim: 64}
	served := func(token string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := client.Dial(ctx, n.Addr(), client.Options{Token: token})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Open(ctx, d)
		return err
	}
	within := func(what string, ok func() bool) {
		t.Helper()
		poll.Until(t, 5*time.Second, 50*time.Millisecond, what, ok)
	}
	within("the added tenant served", func() bool { return served(added.Token) == nil })
	checkTenantUsage(t, n.Addr(), env, added.Token, d)
	var rotated struct{ Tenant, Token string }
	if err := json.Unmarshal([]byte(cli("tenant", "rotate", "acme", "-o", "json")), &rotated); err != nil || rotated.Token == added.Token {
		t.Fatalf("tenant rotate: %+v, %v", rotated, err)
	}
	within("the old token refused", func() bool { return errors.Is(served(added.Token), client.ErrUnauthenticated) })
	within("the new token served", func() bool { return served(rotated.Token) == nil })
	cli("tenant", "rm", "acme")
	within("the removed tenant refused", func() bool { return errors.Is(served(rotated.Token), client.ErrUnauthenticated) })
	if _, _, err := strata(t, env, "tenant", "rm", "acme"); err == nil {
		t.Fatal("removing a removed tenant succeeded")
	}
}

// checkTenantUsage puts 3 pages as the tenant of token (d's) and 1 as the
// admin into another tenant's namespace, then checks strata tenant ls: the
// admin token sees both tenants' bytes, the tenant's token its own only,
// and without a token the usage is ? and the listing still succeeds.
func checkTenantUsage(t *testing.T, addr string, env map[string]string, token string, d namespace.Descriptor) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	put := func(token string, d namespace.Descriptor, n int) int {
		c, err := client.Dial(ctx, addr, client.Options{Token: token})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return putChain(ctx, t, c, d, n).PageBytes()
	}
	pageBytes := put(token, d, 3)
	other := d
	other.Tenant = "other"
	put("root", other, 1)
	type lsDoc struct {
		Tenants []struct {
			Name  string
			Usage *struct {
				Tenant string
				Bytes  uint64
			}
		}
		NodesAnswered int `json:"nodes_answered"`
	}
	ls := func(token string) lsDoc {
		t.Helper()
		e := maps.Clone(env)
		e["STRATA_TOKEN"] = token
		out, _, err := strata(t, e, "tenant", "ls", "-o", "json")
		if err != nil {
			t.Fatalf("tenant ls: %v", err)
		}
		var doc lsDoc
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("tenant ls -o json: %v\n%s", err, out)
		}
		return doc
	}
	usage := func(doc lsDoc) map[string]uint64 {
		got := map[string]uint64{}
		for _, r := range doc.Tenants {
			if r.Usage != nil {
				got[r.Name] = r.Usage.Bytes
			}
		}
		return got
	}
	// "other" is no tenant in etcd, so only acme has a row.
	if doc := ls("root"); doc.NodesAnswered != 1 || usage(doc)["acme"] != uint64(3*pageBytes) {
		t.Errorf("tenant ls as admin: %d nodes answered, usage %v; want 1 and acme %d bytes", doc.NodesAnswered, usage(doc), 3*pageBytes)
	}
	if doc := ls(token); usage(doc)["acme"] != uint64(3*pageBytes) {
		t.Errorf("tenant ls as acme: usage %v, want acme %d bytes", usage(doc), 3*pageBytes)
	}
	// A tenant's token is told of its own tenant only, the admin's of every one.
	for tok, want := range map[string][]string{token: {"acme"}, "root": {"acme", "other"}} {
		c, err := admin.Dial(ctx, []string{addr}, admin.Options{Token: tok, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		u, _, failed := c.Usage(ctx)
		c.Close()
		var names []string
		for _, x := range u {
			names = append(names, x.GetTenant())
		}
		if !slices.Equal(names, want) || len(failed) > 0 {
			t.Errorf("usage with token %.4s…: tenants %v (failed %v), want %v", tok, names, failed, want)
		}
	}
	out, _, err := strata(t, env, "tenant", "ls")
	if err != nil || !strings.Contains(out, "usage: no node answered") || !strings.Contains(out, "?") {
		t.Errorf("tenant ls without a token: %v\n%s", err, out)
	}
}
