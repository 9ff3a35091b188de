package main

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/client/admin"
	"github.com/stratakv/strata/internal/testing/poll"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// TestClusterQueryPrefix runs three stratad processes with tenant tokens
// on one etcd process: a prompt of 300 pages whose first 200 were put
// spreads over all three, so no node's own prefix is the prompt's; asked
// through any one node (client/admin's QueryPrefix, cluster set), by keys
// and by token ids, the cluster's answer is 200 pages, in the host tier,
// the members' held pages sum to 200, and it equals the client's Lookup.
// Another tenant is refused. After kill -9 of one node the answer drops
// to where its first page was, as Lookup's does, naming the dead node
// until the view drops it.
func TestClusterQueryPrefix(t *testing.T) {
	stratad := buildStratad(t)
	etcdURL := freeEtcdURL(t)
	startEtcd(t, t.TempDir(), etcdURL)
	args := []string{"--etcd", etcdURL, "--tiers", "host", "--host-bytes", "64MiB",
		"--tenant-token", "acme=acme-token", "--tenant-token", "globex=globex-token"}
	cmds, addrs := make([]*exec.Cmd, 3), make([]string, 3)
	for i := range cmds {
		cmds[i], addrs[i] = startStratad(t, stratad, t.TempDir(), args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d := ssdDescriptor
	d.Tenant = "acme"
	c, ns := dialOpen(t, ctx, addrs[0], client.Options{Token: "acme-token", NodeTimeout: 2 * time.Second}, 3, d)
	toks := make([]uint32, 16*300)
	for i := range toks {
		toks[i] = 7<<20 | uint32(i)
	}
	keys, data := chainOf(ns, toks)
	if _, err := ns.Put(ctx, client.ChainPages(keys[:200], data[:200])); err != nil {
		t.Fatal(err)
	}
	raw := make([][]byte, len(keys))
	for i := range keys {
		raw[i] = keys[i][:]
	}
	id := ns.ID()
	query := func(addr, token string, p admin.Prompt) (*pb.QueryPrefixResponse, error) {
		t.Helper()
		ac, err := admin.Dial(ctx, []string{addr}, admin.Options{Token: token})
		if err != nil {
			t.Fatal(err)
		}
		defer ac.Close()
		found, _, err := ac.Namespace(ctx, id.String())
		if err != nil {
			return nil, err
		}
		return ac.QueryPrefix(ctx, found, p, true)
	}
	for i, addr := range addrs {
		for _, p := range []admin.Prompt{{Keys: raw}, {Tokens: toks}} {
			resp, err := query(addr, "acme-token", p)
			if err != nil {
				t.Fatalf("node %d: %v", i, err)
			}
			held, own := 0, 0
			for _, np := range resp.GetNodes() {
				if np.GetError() != "" {
					t.Fatalf("node %d: member %s did not answer: %s", i, np.GetNodeId(), np.GetError())
				}
				if np.GetHeld() == 0 {
					t.Fatalf("node %d: member %s holds none of the prompt: not spread", i, np.GetNodeId())
				}
				held += int(np.GetHeld())
				own = max(own, int(np.GetLongest()))
			}
			if resp.GetLongest() != 200 || resp.GetPages() != 300 || len(resp.GetNodes()) != 3 || held != 200 || own >= 200 ||
				len(resp.GetKeyTiers()) != 300 || resp.GetKeyTiers()[199] != byte(pb.Tier_TIER_HOST) || resp.GetKeyTiers()[200] != 0 {
				t.Fatalf("node %d: cluster answer %v (members hold %d, the longest own prefix %d)", i, resp, held, own)
			}
			for _, tp := range resp.GetTiers() {
				if want := map[pb.Tier]uint32{pb.Tier_TIER_HOST: 200}[tp.GetTier()]; tp.GetPages() != want {
					t.Fatalf("node %d: tier %v holds %d pages of the prefix, want %d", i, tp.GetTier(), tp.GetPages(), want)
				}
			}
		}
	}
	if lr, err := ns.Lookup(ctx, keys, false, 0); err != nil || lr.HitPrefix != 200 {
		t.Fatalf("lookup: %d, %v", lr.HitPrefix, err)
	}
	gctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer globex-token")
	_, err := adminClient(t, addrs[1]).QueryPrefix(gctx, &pb.QueryPrefixRequest{NamespaceId: id[:], Keys: raw, Cluster: true})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("globex's cluster query of acme's namespace: %v", err)
	}

	// kill -9 node 2 (index 1): the answer drops to the first page it held.
	_ = cmds[1].Process.Signal(syscall.SIGKILL)
	_ = cmds[1].Wait()
	waitAlive(t, c, 2, 30*time.Second)
	var resp *pb.QueryPrefixResponse
	var lr client.LookupResult
	if !poll.Within(20*time.Second, 200*time.Millisecond, func() bool {
		var err error
		if resp, err = query(addrs[0], "acme-token", admin.Prompt{Keys: raw}); err != nil {
			return false
		}
		lr, err = ns.Lookup(ctx, keys, false, 0)
		return err == nil && len(resp.GetNodes()) == 2 && int(resp.GetLongest()) == lr.HitPrefix
	}) {
		t.Fatalf("after the kill: cluster answer %v, lookup %d", resp, lr.HitPrefix)
	}
	if resp.GetLongest() >= 200 {
		t.Fatalf("after the kill the cluster still holds %d pages of the prefix", resp.GetLongest())
	}
	t.Logf("after the kill: %d pages of the prefix, as Lookup says", resp.GetLongest())
}
