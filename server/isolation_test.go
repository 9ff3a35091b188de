package server_test

import (
	"testing"

	"google.golang.org/grpc/codes"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

// Adversarial tests of tenant isolation over real gRPC on loopback: what a
// client that does not play by the rules can do to others' leases, pins
// and room.

// put publishes one page of f's namespace through Reserve, Write, Commit.
func (f *fixture) put(t *testing.T, k, data []byte) {
	t.Helper()
	wid := f.reserve(t, k, len(data))
	if err := f.write(t, wid, data); err != nil {
		t.Fatal(err)
	}
	if s := f.commit(t, wid, len(data), crc(data)); s != pb.CommitStatus_COMMIT_STATUS_COMMITTED {
		t.Fatalf("commit: %v", s)
	}
}

// TestLeaseIDsUnguessable: a client of a namespace cannot renew or
// release another's lease by guessing ids near its own (ids were
// sequential: the next lease was its own id plus one).
func TestLeaseIDsUnguessable(t *testing.T) {
	f := setup(t, nil)
	f.put(t, key(1), make([]byte, f.page))
	lease := func() uint64 {
		r, err := f.rpc.Lookup(ctxT(t), &pb.LookupRequest{NamespaceId: f.ns, Keys: [][]byte{key(1)}, Lease: true})
		if err != nil || r.GetLease() == nil {
			t.Fatalf("lookup with lease: %v, %v", r, err)
		}
		return r.GetLease().GetId()
	}
	mine, theirs := lease(), lease()
	const span = 512
	for d := uint64(1); d <= span; d++ {
		for _, guess := range []uint64{mine + d, mine - d} {
			if guess == mine {
				continue
			}
			_, err := f.rpc.ReleaseLease(ctxT(t), &pb.ReleaseLeaseRequest{NamespaceId: f.ns, LeaseId: guess})
			if guess == theirs && err == nil {
				t.Fatalf("released the other client's lease %d by guessing %d past mine (%d)", theirs, d, mine)
			}
			if err == nil {
				t.Fatalf("released lease %d, which no one took", guess)
			}
			wantErr(t, "releasing a guessed lease", err, codes.NotFound, pb.ReasonLeaseNotFound)
		}
	}
	if _, err := f.rpc.RenewLease(ctxT(t), &pb.RenewLeaseRequest{NamespaceId: f.ns, LeaseId: theirs}); err != nil {
		t.Fatalf("the other client's lease was touched: %v", err)
	}
}
