package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/client/admin"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/internal/testing/testnode"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// wantRoom is what transfer ls should say of one room.
type wantRoom struct {
	tenant, room  string
	attempt       uint64
	state, reason string
	pages         int
	bytes         uint64
	detail        string // a part of it
	node          string // the node that holds it, asked directly
}

// transferFixture is a three-node cluster with tenants acme and beta and
// rooms of theirs in every state ls tells apart.
type transferFixture struct {
	nodes []*testnode.Node
	rooms []*wantRoom
}

// roomHolder asks each node directly for the room's status with the
// room's tenant's token; the one that holds it answers.
func (f *transferFixture) roomHolder(t *testing.T, token, room string) string {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+token)
	var holders []string
	for _, n := range f.nodes {
		_, err := pb.NewTransferClient(testnode.Dial(t, n.Addr())).RoomStatus(ctx, &pb.RoomStatusRequest{Room: room})
		if err == nil {
			holders = append(holders, n.ID())
		}
	}
	if len(holders) != 1 {
		t.Fatalf("room %s is held by %q, want one node", room, holders)
	}
	return holders[0]
}

// aliveMembers counts the members the node at addr sees alive.
func aliveMembers(ctx context.Context, addr string) int {
	c, err := admin.Dial(ctx, []string{addr}, admin.Options{Token: "root", Timeout: 5 * time.Second})
	if err != nil {
		return 0
	}
	defer c.Close()
	alive := 0
	for _, m := range c.Members() {
		if m.GetState() == pb.MemberState_MEMBER_STATE_ALIVE {
			alive++
		}
	}
	return alive
}

func startTransferFixture(t *testing.T) *transferFixture {
	t.Helper()
	cl := testnode.StartCluster(t, 3, func(_ int, c *node.Config) {
		c.HostBytes, c.AdminToken = 64<<20, "root"
		c.TenantTokens = map[string]string{"acme-tok": "acme", "beta-tok": "beta"}
	})
	f := &transferFixture{nodes: cl.Nodes}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	poll.Until(t, testnode.AwaitViewTimeout, 20*time.Millisecond, "every node seeing three alive members", func() bool {
		return !slices.ContainsFunc(cl.Nodes, func(n *testnode.Node) bool { return aliveMembers(ctx, n.Addr()) != 3 })
	})
	dialAs := func(token, tenant string) (*client.Client, *client.Namespace) {
		c, err := client.Dial(ctx, cl.Nodes[0].Addr(), client.Options{Token: token})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		ns := putChain(ctx, t, c, namespace.Descriptor{Tenant: tenant, Model: "llama-3-8b", ModelRevision: "r1", Engine: "vllm",
			DType: "bf16", PageTokens: 16, NumLayers: 2, NumKVHeads: 2, HeadDim: 64}, 3)
		return c, ns
	}
	acme, acmeNS := dialAs("acme-tok", "acme")
	beta, betaNS := dialAs("beta-tok", "beta")
	size := uint64(3 * acmeNS.PageBytes())
	open := func(c *client.Client, tenant, name string) client.Room {
		room, err := c.OpenRoom(ctx, name)
		if err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
		f.rooms = append(f.rooms, &wantRoom{tenant: tenant, room: name, attempt: room.Attempt, state: "open"})
		return room
	}
	publish := func(c *client.Client, ns *client.Namespace, room client.Room) *wantRoom {
		if _, err := c.PublishRoom(ctx, room, ns, ns.PageKeys(seq(3*16)), 3*16); err != nil {
			t.Fatalf("publish %s: %v", room.Name, err)
		}
		w := f.rooms[len(f.rooms)-1]
		w.state, w.pages, w.bytes = "published", 3, size
		return w
	}

	// acme: one loaded and acknowledged, one cancelled, one refused for
	// its consumer's namespace, one opened and not yet published.
	w := publish(acme, acmeNS, open(acme, "acme", "req-acked"))
	g, err := acme.AwaitRoom(ctx, "req-acked", 0, acmeNS)
	if err == nil {
		err = acme.AckRoom(ctx, g.Room)
	}
	if err != nil {
		t.Fatal(err)
	}
	w.state = "acked"
	w = publish(acme, acmeNS, open(acme, "acme", "req-cancelled"))
	if _, err := acme.AbortRoom(ctx, client.Room{Name: "req-cancelled", Attempt: w.attempt}, client.UserCancel, "user went away"); err != nil {
		t.Fatal(err)
	}
	w.state, w.reason, w.detail = "aborted", "user_cancel", "user went away"
	w = publish(acme, acmeNS, open(acme, "acme", "req-mismatch"))
	d := acmeNS.Descriptor()
	d.DType = "fp16"
	other, err := acme.Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acme.AwaitRoom(ctx, "req-mismatch", 0, other); !errors.Is(err, client.ErrNamespaceMismatch) {
		t.Fatalf("await from another namespace: %v, want ErrNamespaceMismatch", err)
	}
	w.state, w.reason, w.detail = "aborted", "consumer_failure", "dtype"
	open(acme, "acme", "req-open")
	// beta: one published, its pages pinned for a consumer to come.
	publish(beta, betaNS, open(beta, "beta", "req-beta"))

	// The rooms live on their keys' owners: more of acme's open rooms
	// until they lie on more than one node.
	tokens := map[string]string{"acme": "acme-tok", "beta": "beta-tok"}
	held := map[string]bool{}
	for i := 0; ; i++ {
		for _, r := range f.rooms {
			if r.node == "" {
				r.node = f.roomHolder(t, tokens[r.tenant], r.room)
				held[r.node] = true
			}
		}
		if len(held) > 1 {
			break
		}
		open(acme, "acme", fmt.Sprintf("req-more-%d", i))
	}
	return f
}

// seq is the tokens 0, 1, ..., n-1 (putChain's).
func seq(n int) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = uint32(i)
	}
	return s
}

// TestTransferLs: strata transfer ls lists every room of the cluster,
// whichever node holds it, with its attempt, state, age, pages, bytes,
// tenant, node, and reason and detail for aborted ones; --tenant and a
// tenant's token keep to one tenant's rooms, --live to attempts not ended;
// -o json says the same.
func TestTransferLs(t *testing.T) {
	f := startTransferFixture(t)
	admin := map[string]string{"STRATA_ENDPOINT": f.nodes[1].Addr(), "STRATA_TOKEN": "root"}

	// The table, as the admin.
	rows := table(mustStrata(t, admin, "transfer", "ls"))
	head := []string{"ROOM", "ATTEMPT", "STATE", "AGE", "PAGES", "BYTES", "TENANT", "NODE", "REASON", "DETAIL"}
	if len(rows) == 0 || !slices.Equal(rows[0], head) {
		t.Fatalf("transfer ls: header %q, want %q", rows, head)
	}
	if len(rows) != 1+len(f.rooms) {
		t.Fatalf("transfer ls: %d rows, want %d rooms:\n%q", len(rows)-1, len(f.rooms), rows)
	}
	for _, w := range f.rooms {
		i := slices.IndexFunc(rows, func(r []string) bool { return r[0] == w.room })
		if i < 0 {
			t.Errorf("transfer ls: no row for room %s", w.room)
			continue
		}
		r := rows[i]
		reason, detail := none, none
		if w.reason != "" {
			reason, detail = w.reason, strings.Join(r[9:], " ")
		}
		want := []string{w.room, fmt.Sprint(w.attempt), w.state, r[3], fmt.Sprint(w.pages), humanBytes(w.bytes), w.tenant, w.node, reason}
		if !slices.Equal(r[:9], want) || !regexp.MustCompile(`^\d+[smhd]$`).MatchString(r[3]) ||
			(w.detail != "" && !strings.Contains(detail, w.detail)) || (w.detail == "" && r[9] != none) {
			t.Errorf("transfer ls, room %s:\n got %q\nwant %q, detail with %q", w.room, r, want, w.detail)
		}
	}

	// --tenant, and a tenant's own token, keep to that tenant's rooms.
	rooms := func(env map[string]string, args ...string) []string {
		t.Helper()
		var names []string
		for _, r := range table(mustStrata(t, env, append([]string{"transfer", "ls"}, args...)...))[1:] {
			names = append(names, r[0])
		}
		slices.Sort(names)
		return names
	}
	var acmeRooms, liveRooms []string
	for _, w := range f.rooms {
		if w.tenant == "acme" {
			acmeRooms = append(acmeRooms, w.room)
		}
		if w.state == "open" || w.state == "published" {
			liveRooms = append(liveRooms, w.room)
		}
	}
	slices.Sort(acmeRooms)
	slices.Sort(liveRooms)
	if got := rooms(admin, "--tenant", "beta"); !slices.Equal(got, []string{"req-beta"}) {
		t.Errorf("transfer ls --tenant beta: %q", got)
	}
	acme := map[string]string{"STRATA_ENDPOINT": f.nodes[2].Addr(), "STRATA_TOKEN": "acme-tok"}
	if got := rooms(acme); !slices.Equal(got, acmeRooms) {
		t.Errorf("transfer ls as acme: %q, want %q", got, acmeRooms)
	}
	if _, _, err := strata(t, acme, "transfer", "ls", "--tenant", "beta"); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("transfer ls --tenant beta as acme: %v, want a refusal", err)
	}
	if got := rooms(admin, "--live"); !slices.Equal(got, liveRooms) {
		t.Errorf("transfer ls --live: %q, want %q", got, liveRooms)
	}

	// JSON says the same, with the node asked.
	var doc struct {
		NodeID string     `json:"node_id"`
		Rooms  []roomJSON `json:"rooms"`
	}
	out := mustStrata(t, admin, "transfer", "ls", "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("transfer ls -o json: %v\n%s", err, out)
	}
	if doc.NodeID != f.nodes[1].ID() || len(doc.Rooms) != len(f.rooms) {
		t.Fatalf("transfer ls -o json: node %s, %d rooms; want %s, %d:\n%s", doc.NodeID, len(doc.Rooms), f.nodes[1].ID(), len(f.rooms), out)
	}
	for _, w := range f.rooms {
		i := slices.IndexFunc(doc.Rooms, func(r roomJSON) bool { return r.Room == w.room })
		if i < 0 {
			t.Errorf("transfer ls -o json: no room %s", w.room)
			continue
		}
		r := doc.Rooms[i]
		if r.NodeID != w.node || r.Tenant != w.tenant || r.Attempt != w.attempt || r.State != w.state || r.Reason != w.reason ||
			int(r.Pages) != w.pages || r.Bytes != w.bytes || !strings.Contains(r.Detail, w.detail) || r.OpenedUnixMs == 0 ||
			(r.State == "published") != (r.PinExpiresUnixMs != 0) || (r.State == "acked" || r.State == "aborted") != (r.DoneUnixMs != 0) {
			t.Errorf("transfer ls -o json, room %s: %+v, want %+v", w.room, r, *w)
		}
	}
	if i := slices.IndexFunc(doc.Rooms, func(r roomJSON) bool { return r.Room == "req-mismatch" }); i >= 0 && doc.Rooms[i].Mismatches != 1 {
		t.Errorf("transfer ls -o json: req-mismatch counts %d mismatches, want 1", doc.Rooms[i].Mismatches)
	}
}
