package peer

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/grpc"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/placement"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
)

// TestGoneNoticeReachesHolders: in a view of 300 members, a parent's gone
// notice goes to the members that sent child hints about it, and to no
// other; one about a parent with no holders known goes to at most its two
// candidates. Before issue 45 each went to all 299 others.
func TestGoneNoticeReachesHolders(t *testing.T) {
	nodes := make([]placement.Node, 300)
	for i := range nodes {
		nodes[i] = placement.Node{ID: fmt.Sprintf("n%03d", i), Weight: float64(1 + i%3)}
	}
	view, err := placement.NewView(nodes)
	if err != nil {
		t.Fatal(err)
	}
	ns := namespace.ID{7}
	known, unknown := namespace.Key{1}, namespace.Key{2}
	var h Holders
	h.Record("n017", []store.ChildHint{{NS: ns, Parent: known, Added: true}})
	h.Record("n230", []store.ChildHint{{NS: ns, Parent: known, Worth: 2}})
	h.Record("n101", []store.ChildHint{{NS: ns, Parent: known}})             // a withdrawal: not a holder
	h.Record("n102", []store.ChildHint{{NS: ns, Parent: known, Gone: true}}) // a notice: not a holder
	h.Record("n103", []store.ChildHint{{NS: namespace.ID{8}, Parent: known, Added: true}})
	groups, _ := routeView(view, "n000", &h, []store.ChildHint{{NS: ns, Parent: known, Gone: true}})
	if got := reached(groups); !slices.Equal(got, []int{17, 230}) {
		t.Fatalf("the notice reached members %v, want [17 230]", got)
	}
	if h.Len() != 1 { // the other namespace's parent
		t.Fatalf("%d parents still recorded after the notice, want 1", h.Len())
	}
	groups, _ = routeView(view, "n000", &h, []store.ChildHint{{NS: ns, Parent: unknown, Gone: true}})
	got := reached(groups)
	var dst [2]int
	if len(got) == 0 || len(got) > 2 {
		t.Fatalf("the notice about a parent without holders reached %v, want its candidates %v", got, view.Candidates(unknown, dst[:]))
	}
	for _, i := range got {
		if !slices.Contains(view.Candidates(unknown, dst[:]), i) {
			t.Fatalf("the notice about a parent without holders reached %d, not one of its candidates", i)
		}
	}
}

// reached is the members with hints in groups.
func reached(groups [][]store.ChildHint) []int {
	var out []int
	for i, g := range groups {
		if len(g) > 0 {
			out = append(out, i)
		}
	}
	return out
}

// TestRouteKnownNoticesOnce: a notice goes to each holder once, never to
// self, after the member's other hints; a nil holders keeps the
// broadcast.
func TestRouteKnownNoticesOnce(t *testing.T) {
	cands := func(k namespace.Key, dst []int) []int { return append(dst[:0], int(k[0]), int(k[1])) }
	holders := func(_ namespace.ID, p namespace.Key, dst []int) []int {
		if p[2] == 0 {
			return dst
		}
		return append(dst, 0, 3, 3, 9) // self, 3 twice, out of range
	}
	hs := []store.ChildHint{
		{Parent: namespace.Key{1, 2, 1}, Gone: true},
		{Parent: namespace.Key{2, 1}, Added: true},
		{Parent: namespace.Key{0, 2, 0}, Gone: true}, // no holders: its candidates but self
	}
	groups, _ := RouteKnown(4, 0, cands, holders, hs)
	want := [][]store.ChildHint{
		nil,
		{{Parent: namespace.Key{2, 1}, Added: true}},
		{{Parent: namespace.Key{2, 1}, Added: true}, {Parent: namespace.Key{0, 2, 0}, Gone: true}},
		{{Parent: namespace.Key{1, 2, 1}, Gone: true}},
	}
	checkGroups(t, groups, want)
	groups, _ = RouteKnown(4, 0, cands, nil, hs[:1])
	checkGroups(t, groups, [][]store.ChildHint{nil, {hs[0]}, {hs[0]}, {hs[0]}})
}

// TestHoldersBounded: a parent keeps its MaxHolders most recent senders; the
// parents remembered stay under maxParents however many are recorded, the
// most recent kept.
func TestHoldersBounded(t *testing.T) {
	var h Holders
	p := namespace.Key{1}
	for i := range MaxHolders + 3 {
		h.Record(fmt.Sprint("n", i), []store.ChildHint{{Parent: p, Added: true}})
	}
	h.Record("n5", []store.ChildHint{{Parent: p, Added: true}}) // again: now the most recent
	got := h.Take(namespace.ID{}, p)
	want := []string{"n3", "n4", "n6", "n7", "n8", "n9", "n10", "n5"}
	if !slices.Equal(got, want) {
		t.Fatalf("holders %v, want %v", got, want)
	}
	if again := h.Take(namespace.ID{}, p); again != nil {
		t.Fatalf("taken twice: %v", again)
	}
	key := func(i int) namespace.Key {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(i))
		return sha256.Sum256(b[:])
	}
	for i := range 3 * maxParents {
		h.Record("n1", []store.ChildHint{{Parent: key(i), Added: true}})
		if h.Len() > maxParents {
			t.Fatalf("%d parents remembered after %d recorded, want at most %d", h.Len(), i+1, maxParents)
		}
	}
	if h.Take(namespace.ID{}, key(3*maxParents-1)) == nil {
		t.Fatal("the most recent parent was forgotten")
	}
	if h.Take(namespace.ID{}, key(0)) != nil {
		t.Fatal("the first parent of three times maxParents is still remembered")
	}
}

// TestReceivedRecordsAccepted: the interceptor records the sender of a
// Hints call the server accepted, not of one it refused, nor other calls.
func TestReceivedRecordsAccepted(t *testing.T) {
	var h Holders
	ns, p := namespace.ID{3}, namespace.Key{4}
	req := &pb.HintsRequest{FromNode: "c", Hints: []*pb.ChildHint{{NamespaceId: ns[:], ParentKey: p[:], Added: true}}}
	hints := &grpc.UnaryServerInfo{FullMethod: pb.Cluster_Hints_FullMethodName}
	ok := func(context.Context, any) (any, error) { return &pb.HintsResponse{}, nil }
	refused := func(context.Context, any) (any, error) { return nil, errors.New("denied") }
	if _, err := h.Received(t.Context(), req, hints, refused); err == nil {
		t.Fatal("the handler's error was lost")
	}
	if _, err := h.Received(t.Context(), req, &grpc.UnaryServerInfo{FullMethod: "/strata.v1.Strata/Get"}, ok); err != nil {
		t.Fatal(err)
	}
	if h.Len() != 0 {
		t.Fatal("recorded a refused call or another method's")
	}
	if _, err := h.Received(t.Context(), req, hints, ok); err != nil {
		t.Fatal(err)
	}
	if got := h.Take(ns, p); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("holders %v, want [c]", got)
	}
}
