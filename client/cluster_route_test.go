package client

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

func reasonErr(c codes.Code, reason string) error {
	st, _ := status.New(c, reason).WithDetails(&errdetails.ErrorInfo{Domain: pb.ErrorDomain, Reason: reason})
	return st.Err()
}

func TestNodeFailed(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"unavailable", status.Error(codes.Unavailable, "connection refused"), true},
		{"deadline", status.Error(codes.DeadlineExceeded, "deadline"), true},
		{"context deadline", fmt.Errorf("open: %w", context.DeadlineExceeded), true},
		{"connection closing", fromRPC("get", status.Error(codes.Canceled, "grpc: the client connection is closing")), true},
		{"shutting down", reasonErr(codes.Unavailable, pb.ReasonShuttingDown), true},
		{"protocol", fmt.Errorf("get: %w", ErrProtocol), true},
		{"left the view", fmt.Errorf("node x: %w", ErrUnavailable), true},
		{"no space", fromRPC("reserve", reasonErr(codes.ResourceExhausted, pb.ReasonNoSpace)), false},
		{"lease expired", fromRPC("get", reasonErr(codes.FailedPrecondition, pb.ReasonLeaseExpired)), false},
		{"tenant denied", fromRPC("open", reasonErr(codes.PermissionDenied, pb.ReasonTenantDenied)), false},
		{"checksum", errors.Join(fmt.Errorf("page 3: %w", ErrChecksum)), false},
		{"invalid", fmt.Errorf("put: %w", ErrInvalid), false},
	} {
		if got := nodeFailed(tc.err); got != tc.want {
			t.Errorf("%s: nodeFailed(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestNewClusterView(t *testing.T) {
	alive, dead := pb.MemberState_MEMBER_STATE_ALIVE, pb.MemberState_MEMBER_STATE_DEAD
	v, err := newClusterView(&pb.MembersResponse{NodeId: "b", Members: []*pb.Member{
		{NodeId: "c", GrpcAddress: "c:1", State: alive, Weight: 0},
		{NodeId: "b", GrpcAddress: "b:1", State: alive, Weight: 2e9},
		{NodeId: "a", GrpcAddress: "a:1", State: dead, Weight: 1e9},
		{NodeId: "d", GrpcAddress: "d:1", State: pb.MemberState_MEMBER_STATE_SUSPECT, Weight: 1e9},
	}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(v.members) != 4 || v.members[0].ID != "a" || v.members[3].ID != "d" {
		t.Fatalf("members %+v, want all four sorted", v.members)
	}
	if fmt.Sprint(v.ids) != "[b c]" || fmt.Sprint(v.addrs) != "[b:1 c:1]" {
		t.Fatalf("placed %v at %v, want the alive b and c", v.ids, v.addrs)
	}
	if w := v.place.Node(v.index["c"]).Weight; w != 1 {
		t.Fatalf("a member without a weight is placed with weight %v, want 1", w)
	}
	if _, err := newClusterView(&pb.MembersResponse{Members: []*pb.Member{{NodeId: "a", State: dead}}}, ""); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a view without alive members: %v", err)
	}
	if _, err := newClusterView(&pb.MembersResponse{Members: []*pb.Member{{NodeId: "a", State: alive}, {NodeId: "a", State: alive}}}, ""); !errors.Is(err, ErrProtocol) {
		t.Fatalf("a view with a duplicate member: %v", err)
	}
}

// TestRoutingAroundQuarantine: a key whose owner is in quarantine goes to
// its best candidate that is not; candidates skip quarantined nodes.
func TestRoutingAroundQuarantine(t *testing.T) {
	var members []*pb.Member
	for _, id := range []string{"n0", "n1", "n2", "n3"} {
		members = append(members, &pb.Member{NodeId: id, GrpcAddress: id, State: pb.MemberState_MEMBER_STATE_ALIVE, Weight: 1})
	}
	v, err := newClusterView(&pb.MembersResponse{Members: members}, "")
	if err != nil {
		t.Fatal(err)
	}
	for k := range 200 {
		var key [32]byte
		key[0], key[1] = byte(k), byte(k>>8)
		all := v.place.Candidates(key, make([]int, 4))
		r := &routing{view: v, down: make([]bool, 4)}
		if p := r.primary(key); p != all[0] {
			t.Fatalf("key %d: primary %d, owner %d", k, p, all[0])
		}
		r.down[all[0]], r.ndown = true, 1
		if p := r.primary(key); p != all[1] {
			t.Fatalf("key %d: owner down, primary %d, want the spill candidate %d", k, p, all[1])
		}
		r.down[all[1]], r.ndown = true, 2
		if c := r.candidates(key, 2, nil); fmt.Sprint(c) != fmt.Sprint(all[2:]) {
			t.Fatalf("key %d: candidates %v with two down, want %v", k, c, all[2:])
		}
	}
}
