//go:build linux

package client_test

import (
	"errors"
	"io"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stratakv/strata/client"
	"github.com/stratakv/strata/node"
	"github.com/stratakv/strata/proto/frame"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// TestForeignNamespaceEveryPlane: tenant b, with a good token of its own,
// cannot read tenant a's namespace by naming its id on any plane: a get
// and a lookup over gRPC, the raw tcp plane and shared memory are each
// refused as denied (PermissionDenied), and no page or
// presence comes back. The same requests with a's token succeed, so the
// refusal is the tenant check's (server/auth.go, caller.mayUse).
func TestForeignNamespaceEveryPlane(t *testing.T) {
	n, sock := shmNode(t, func(c *node.Config) {
		c.TenantTokens = map[string]string{"token-a": "acme", "token-b": "other"}
		c.ShmTenants = []string{"acme", "other"} // both map the arena: only the namespace check stands
	})
	ctx := ctxT(t)
	_, ns, keys, _ := twoPagesOver(ctx, t, n, "shm", (*client.Client).ShmActive)
	id := ns.ID()
	wire := make([][]byte, len(keys))
	for i := range keys {
		wire[i] = keys[i][:]
	}

	t.Run("grpc", func(t *testing.T) {
		rpc := pb.NewStrataClient(rawConn(t, n.Addr()))
		as := func(token string) (found int, lookup *pb.LookupResponse, getErr, lookupErr error) {
			cctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
			stream, err := rpc.Get(cctx, &pb.GetRequest{NamespaceId: id[:], Keys: wire})
			for err == nil {
				var m *pb.GetResponse
				if m, err = stream.Recv(); err == nil && m.GetHeader().GetFound() {
					found++
				}
			}
			if errors.Is(err, io.EOF) { // the stream ended well
				err = nil
			}
			lookup, lookupErr = rpc.Lookup(cctx, &pb.LookupRequest{NamespaceId: id[:], Keys: wire})
			return found, lookup, err, lookupErr
		}
		if found, lr, gerr, lerr := as("token-a"); found != 2 || gerr != nil || lerr != nil || lr.GetHitPrefix() != 2 {
			t.Fatalf("tenant a over gRPC: %d pages found (%v), lookup %v (%v); want 2 and 2", found, gerr, lr, lerr)
		}
		found, lr, gerr, lerr := as("token-b")
		if found != 0 || status.Code(gerr) != codes.PermissionDenied {
			t.Fatalf("tenant b's get of a's namespace over gRPC: %d pages, %v; want none and PermissionDenied", found, gerr)
		}
		if lr != nil || status.Code(lerr) != codes.PermissionDenied {
			t.Fatalf("tenant b's lookup of a's namespace over gRPC: %v, %v; want none and PermissionDenied", lr, lerr)
		}
		t.Logf("get: %v; lookup: %v", gerr, lerr)
	})

	t.Run("raw", func(t *testing.T) {
		a, _ := rawDial(t, n.RawAddr(), "token-a")
		if m, ok := rawRead(t, a, 1, &frame.Read{NS: id, Keys: keys}).(*frame.Page); !ok || !m.Found {
			t.Fatalf("tenant a's read over the raw plane: %#v", m)
		}
		b, m := rawDial(t, n.RawAddr(), "token-b")
		if _, ok := m.(*frame.Welcome); !ok {
			t.Fatalf("tenant b's hello on the raw plane: %#v", m)
		}
		denied(t, "raw read of a foreign namespace", rawRead(t, b, 2, &frame.Read{NS: id, Keys: keys}))
		denied(t, "raw lookup of a foreign namespace", shmCall(t, b, 3, &frame.Lookup{NS: id, Keys: keys}))
	})

	t.Run("shm", func(t *testing.T) {
		a, _ := shmRaw(t, sock, "token-a")
		if m, ok := shmCall(t, a, 1, &frame.Get{NS: id, Keys: keys}).(*frame.GetOK); !ok {
			t.Fatalf("tenant a's get over shm: %#v", m)
		}
		b, m := shmRaw(t, sock, "token-b")
		if _, ok := m.(*frame.Welcome); !ok {
			t.Fatalf("tenant b's hello on the shm socket: %#v", m)
		}
		denied(t, "shm get of a foreign namespace", shmCall(t, b, 2, &frame.Get{NS: id, Keys: keys}))
		denied(t, "shm lookup of a foreign namespace", shmCall(t, b, 3, &frame.Lookup{NS: id, Keys: keys}))
	})
}

// denied fails t unless m is a DENIED error: what came back instead is
// named by its type, not dumped (a page would be 16 KB of bytes).
func denied(t *testing.T, what string, m frame.Message) {
	t.Helper()
	if e, ok := m.(*frame.Error); !ok || e.Code != frame.CodeDenied {
		t.Fatalf("%s: answer %T (op %d), want a DENIED error (code %d)", what, m, m.Op(), frame.CodeDenied)
	}
	t.Logf("%s: %v", what, m)
}
