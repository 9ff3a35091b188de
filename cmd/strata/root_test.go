package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/stratakv/strata/internal/testing/admintest"
	"github.com/stratakv/strata/internal/testing/testnode"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

func TestUnreachable(t *testing.T) {
	addr := testnode.ClosedAddr(t)
	start := time.Now()
	_, _, err := strata(t, nil, "ns", "ls", "--endpoint", addr, "--timeout", "3s")
	if err == nil {
		t.Fatal("ns ls against a closed port: no error")
	}
	for _, want := range []string{"cannot reach a strata node at " + addr, "connection refused",
		"is stratad running? start one with: go run ./cmd/stratad"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if d := time.Since(start); d >= 3*time.Second {
		t.Errorf("failing took %s; want it before the deadline", d)
	}
}

// TestUnreachableCluster: the cluster commands fail as the others do when
// the node asked does not answer, before any member is asked.
func TestUnreachableCluster(t *testing.T) {
	addr := testnode.ClosedAddr(t)
	for _, args := range [][]string{{"node", "ls"}, {"cluster", "status"}} {
		_, _, err := strata(t, map[string]string{"STRATA_ENDPOINT": addr}, args...)
		if err == nil || !strings.Contains(err.Error(), "cannot reach a strata node at "+addr) {
			t.Errorf("strata %s: err = %v", strings.Join(args, " "), err)
		}
	}
}

func TestEndpointFromEnv(t *testing.T) {
	addr := testnode.ClosedAddr(t)
	_, _, err := strata(t, map[string]string{"STRATA_ENDPOINT": addr}, "ns", "ls")
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Errorf("err = %v, want one naming %s", err, addr)
	}
}

func TestTokens(t *testing.T) {
	n := startNode(t, map[string]string{"acme-token": "acme", "beta-token": "beta"})
	n.Token = "acme-token"
	n.Open(t, admintest.Descriptor("acme"))
	n.Token = "beta-token"
	n.Open(t, admintest.Descriptor("beta"))

	env := map[string]string{"STRATA_ENDPOINT": n.Addr}
	_, _, err := strata(t, env, "ns", "ls")
	if err == nil || !strings.Contains(err.Error(), "requires a token: pass --token or set STRATA_TOKEN") {
		t.Errorf("no token: err = %v", err)
	}
	_, _, err = strata(t, env, "ns", "ls", "--token", "wrong")
	if err == nil || !strings.Contains(err.Error(), "does not accept this token") {
		t.Errorf("wrong token: err = %v", err)
	}

	// The token from the environment, then the flag over it: each tenant
	// sees only its own namespace.
	env["STRATA_TOKEN"] = "acme-token"
	for _, c := range []struct {
		args   []string
		tenant string
	}{
		{[]string{"ns", "ls"}, "acme"},
		{[]string{"ns", "ls", "--token", "beta-token"}, "beta"},
	} {
		out, _, err := strata(t, env, c.args...)
		if err != nil {
			t.Fatalf("strata %s: %v", strings.Join(c.args, " "), err)
		}
		if rows := table(out); len(rows) != 2 || rows[1][1] != c.tenant {
			t.Errorf("strata %s: %q, want only %s's namespace", strings.Join(c.args, " "), rows, c.tenant)
		}
	}
}

func TestTokenNotInHelp(t *testing.T) {
	out, _, err := strata(t, map[string]string{"STRATA_TOKEN": "s3cret"}, "--help")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "s3cret") {
		t.Errorf("--help prints the token:\n%s", out)
	}
}

// TestBadArguments covers mistakes caught before any call; the endpoint is
// closed, so reaching the node would be a different error.
func TestBadArguments(t *testing.T) {
	env := map[string]string{"STRATA_ENDPOINT": testnode.ClosedAddr(t)}
	key := strings.Repeat("ab", 32)
	checkBadArguments(t, env, []badArgument{
		{[]string{"ns", "ls", "-o", "yaml"}, `unknown output format "yaml"`},
		{[]string{"ns", "ls", "--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"ns", "show", "xyz"}, `"xyz" is not a namespace id or id prefix`},
		{[]string{"ns", "show"}, "accepts 1 arg(s), received 0"},
		{[]string{"ns", "bogus"}, `unknown command "bogus" for "strata ns"`},
		{[]string{"keys", "ls", "ab", "--after", "abc"}, `--after: "abc" is not a page key`},
		{[]string{"keys", "ls", "ab", "--limit", "-1"}, "--limit must not be negative"},
		{[]string{"keys", "stat", "ab", key, "1x"}, `"1x" is not a page key or key prefix: want hex digits`},
		{[]string{"keys", "stat", "ab", key + "a"}, "is not a page key or key prefix: want hex digits, 64 for a whole key"},
		{[]string{"keys", "stat", "ab", strings.Repeat("x", 64)}, "is not a page key: want 64 hex digits"},
		{[]string{"keys", "stat", "ab"}, "requires at least 2 arg(s)"},
		{[]string{"keys", "stat", "xyz", key}, `"xyz" is not a namespace id or id prefix`},
		{[]string{"node", "ls", "extra"}, `unknown command "extra" for "strata node ls"`},
		{[]string{"cluster", "bogus"}, `unknown command "bogus" for "strata cluster"`},
		{[]string{"cluster", "status", "-o", "yaml"}, `unknown output format "yaml"`},
	})
}

func TestGroupPrintsHelp(t *testing.T) {
	for group, subs := range map[string][]string{"keys": {"ls", "stat"}, "node": {"ls"}, "cluster": {"status"}} {
		out, _, err := strata(t, nil, group)
		for _, sub := range subs {
			if err != nil || !strings.Contains(out, sub) {
				t.Errorf("strata %s: err %v, output lacks %q:\n%s", group, err, sub, out)
			}
		}
	}
}

// oldNode is a node from before the Cluster service: Admin only.
type oldNode struct{ pb.UnimplementedAdminServer }

func (oldNode) NodeInfo(context.Context, *pb.NodeInfoRequest) (*pb.NodeInfoResponse, error) {
	return &pb.NodeInfoResponse{NodeId: "node-old", Pages: 2,
		Tiers: []*pb.TierStats{{Tier: pb.Tier_TIER_HOST, CapacityBytes: 1 << 30, UsedBytes: 32 << 10}}}, nil
}

func (oldNode) ListNamespaces(context.Context, *pb.ListNamespacesRequest) (*pb.ListNamespacesResponse, error) {
	return &pb.ListNamespacesResponse{NodeId: "node-old", Namespaces: []*pb.NamespaceInfo{
		{Id: []byte{0xab, 0xcd}, Descriptor_: admintest.Descriptor("acme"), PageBytes: 16 << 10, Pages: 2, Bytes: 32 << 10}}}, nil
}

// TestNodeWithoutCluster: a node that does not serve Members is a cluster
// of one.
func TestNodeWithoutCluster(t *testing.T) {
	addr := testnode.Serve(t, func(s *grpc.Server) { pb.RegisterAdminServer(s, oldNode{}) })
	n := &testNode{&admintest.Node{Addr: addr}}

	rows := table(n.run(t, "ns", "ls"))
	if len(rows) != 2 || len(rows[0]) != 13 || rows[1][0] != "abcd" || rows[1][9] != "2" {
		t.Errorf("ns ls: %q", rows)
	}
	rows = table(n.run(t, "node", "ls"))
	if len(rows) != 2 || !slices.Equal(rows[1][:3], []string{"node-old", "alive", n.Addr}) || rows[1][4] != "32KiB/1GiB" {
		t.Errorf("node ls: %q", rows)
	}
}
