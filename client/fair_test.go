//go:build linux

package client_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/proto/frame"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/transport"
)

// The reservation share (store/quota.go) on every plane: with the
// default configuration, one tenant that reserves a whole tier, for a day,
// over gRPC, the raw TCP plane or shared memory, and keeps the
// reservations open, gets half of it (the rest refused QUOTA) and cannot
// stop another tenant's puts over the same plane. Before the share, its
// Reserve took all 256 pages for MaxReserveTTL (5 minutes) and every other
// tenant's put was refused until it aborted.

// fairPages is the host tier's size in llama pages (16 KiB) in these tests.
const fairPages = 256

// reserveResult is what a Reserve of the whole tier got: how many pages
// were reserved, and the first refusal's reason.
type reserveResult struct {
	reserved int
	refusal  string
}

// hogSpecs are the page specs of a Reserve of the whole tier: keys no
// engine would put, parents and depths of one sequence.
func hogSpecs() []frame.PageSpec {
	specs := make([]frame.PageSpec, fairPages)
	for i := range specs {
		specs[i] = frame.PageSpec{Key: namespace.Key{0xEE, byte(i), byte(i >> 8)}, Depth: uint32(i), Size: 16 << 10}
		if i > 0 {
			specs[i].Parent, specs[i].HasParent = specs[i-1].Key, true
		}
	}
	return specs
}

// hogGRPC reserves the whole tier through the gRPC Reserve with a day's
// deadline; the reservations stay open until their deadline.
func hogGRPC(t *testing.T, n *node.Node, token string, ns namespace.ID) reserveResult {
	t.Helper()
	pages := make([]*pb.PageSpec, 0, fairPages)
	for _, s := range hogSpecs() {
		p := &pb.PageSpec{Key: s.Key[:], Depth: s.Depth, Size: uint64(s.Size)}
		if s.HasParent {
			p.ParentKey = s.Parent[:]
		}
		pages = append(pages, p)
	}
	ctx := metadata.AppendToOutgoingContext(ctxT(t), "authorization", "Bearer "+token)
	resp, err := pb.NewStrataClient(rawConn(t, n.Addr())).Reserve(ctx, &pb.ReserveRequest{NamespaceId: ns[:], Pages: pages,
		DeadlineMs: uint32((24 * time.Hour).Milliseconds())})
	if err != nil {
		t.Fatal(err)
	}
	var out reserveResult
	for _, r := range resp.GetReservations() {
		switch r.GetStatus() {
		case pb.ReserveStatus_RESERVE_STATUS_RESERVED:
			out.reserved++
		case pb.ReserveStatus_RESERVE_STATUS_REJECTED:
			if out.refusal == "" {
				out.refusal = r.GetReason()
			}
		}
	}
	return out
}

// hogFrames reserves the whole tier with a Reserve frame on c (a raw or
// shm connection past its hello) with a day's deadline; the reservations
// stay open while c does.
func hogFrames(t *testing.T, c *transport.Conn, ns namespace.ID) reserveResult {
	t.Helper()
	if err := c.Send(2, &frame.Reserve{NS: ns, TTLms: uint32((24 * time.Hour).Milliseconds()), Pages: hogSpecs()}); err != nil {
		t.Fatal(err)
	}
	_, m, err := c.Recv()
	if err != nil {
		t.Fatal(err)
	}
	ok, isOK := m.(*frame.ReserveOK)
	if !isOK {
		t.Fatalf("the Reserve of the whole tier: answer %#v", m)
	}
	var out reserveResult
	for _, s := range ok.Slots {
		switch s.Status {
		case frame.SlotReserved:
			out.reserved++
		case frame.SlotRejected:
			if out.refusal == "" {
				out.refusal = s.Reason
			}
		}
	}
	return out
}

// TestOneTenantCannotFillATier: on each plane, tenant "hog" reserves the
// whole host tier for a day and holds the reservations; tenant "acme",
// over the same plane, then puts a quarter of the tier, every page
// committed, and reads it back. The control, a node whose share is the
// whole tier (what every node was before the share), shows the attack:
// the hog gets every page and acme's put is refused.
func TestOneTenantCannotFillATier(t *testing.T) {
	tokens := map[string]string{"tok-hog": "hog", "tok-acme": "acme"}
	for _, tc := range []struct {
		plane string
		share float64 // 0: the default
	}{{"grpc", 0}, {"raw", 0}, {"shm", 0}, {"grpc", 1}} {
		name := tc.plane
		if tc.share != 0 {
			name += " control, share 1"
		}
		t.Run(name, func(t *testing.T) {
			plane := tc.plane
			var sock string
			n := startNode(t, func(c *node.Config) {
				c.HostBytes = fairPages * 16 << 10
				c.TenantTokens = tokens
				c.ReserveShare = tc.share
				if plane == "shm" {
					sock = t.TempDir() + "/s.sock"
					c.ShmSocket, c.ShmTenants = sock, []string{"hog", "acme"}
				} else {
					c.ShmSocket = "off"
				}
			})
			ctx := ctxT(t)
			opts := func(token string) client.Options {
				return client.Options{Token: token, NoRaw: plane == "grpc", NoShm: plane != "shm"}
			}
			hogDesc := llama()
			hogDesc.Tenant = "hog"
			hogNS, err := dialWith(t, n.Addr(), opts("tok-hog")).Open(ctx, hogDesc)
			if err != nil {
				t.Fatal(err)
			}

			var got reserveResult
			switch plane {
			case "grpc":
				got = hogGRPC(t, n, "tok-hog", hogNS.ID())
			case "raw":
				c, m := rawDial(t, n.RawAddr(), "tok-hog")
				if m.Op() != frame.OpWelcome {
					t.Fatalf("raw hello: %#v", m)
				}
				got = hogFrames(t, c, hogNS.ID())
			case "shm":
				c, m := shmRaw(t, sock, "tok-hog")
				if m.Op() != frame.OpWelcome {
					t.Fatalf("shm hello: %#v", m)
				}
				got = hogFrames(t, c, hogNS.ID())
			}
			t.Logf("the hog reserved %d of %d pages; past the share: %s", got.reserved, fairPages, got.refusal)

			c := dialWith(t, n.Addr(), opts("tok-acme"))
			ns, err := c.Open(ctx, llama())
			if err != nil {
				t.Fatal(err)
			}
			if c.ShmActive() != (plane == "shm") || (plane != "shm" && c.RawActive() != (plane == "raw")) {
				t.Fatalf("acme's client: shm %v, raw %v; want the %s plane", c.ShmActive(), c.RawActive(), plane)
			}
			keys := ns.PageKeys(tokenSeq(fairPages / 4 * 16))
			data := pagesFor(ns, keys)
			pages := client.ChainPages(keys, data)

			if tc.share == 1 {
				if got.reserved != fairPages {
					t.Fatalf("with no share the hog reserved %d of %d pages", got.reserved, fairPages)
				}
				res, err := ns.Put(ctx, pages)
				if err != nil {
					t.Fatal(err)
				}
				if res[0].Status == client.Committed {
					t.Fatal("with no share, acme's put beside the hog's reservations committed: the control shows no attack")
				}
				t.Logf("with no share acme's first page: %v %s", res[0].Status, res[0].Reason)
				return
			}
			if got.reserved != fairPages/2 {
				t.Fatalf("one tenant's Reserve of the whole tier got %d of %d pages, want half", got.reserved, fairPages)
			}
			if !strings.Contains(got.refusal, "QUOTA") || !strings.Contains(got.refusal, "reservation share") {
				t.Fatalf("a page past the share refused with %q, want the share named and QUOTA", got.refusal)
			}
			putWant(ctx, t, ns, pages, client.Committed, "acme's put beside the hog's reservations")
			readsBack(ctx, t, ns, keys, data)
		})
	}
}

// tokenSeq is n tokens of one sequence no other test puts.
func tokenSeq(n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = 0xFA1 + uint32(i)*7
	}
	return out
}
