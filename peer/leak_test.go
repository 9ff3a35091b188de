package peer

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/stratakv/strata/internal/dial"
	"github.com/stratakv/strata/internal/testing/leaktest"
	"github.com/stratakv/strata/internal/testing/poll"
	"github.com/stratakv/strata/membership"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// hintSink is a member's Cluster service: it passes each Hints request on.
type hintSink struct {
	pb.UnimplementedClusterServer
	got chan *pb.HintsRequest
}

func (s *hintSink) Hints(_ context.Context, r *pb.HintsRequest) (*pb.HintsResponse, error) {
	s.got <- r
	return &pb.HintsResponse{}, nil
}

// members is a fixed gossip view.
type members []membership.Member

func (m members) Alive() []membership.Member { return m }

// TestSenderSendsAndCloses starts a Sender over a view of itself and one
// real gRPC peer, queues a parent-gone notice (which goes to every other
// member), waits for the peer to receive it and the Sender to count it
// sent, and closes the Sender: its loop and its connection end (TestMain
// checks that none is left).
func TestSenderSendsAndCloses(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink := &hintSink{got: make(chan *pb.HintsRequest, 1)}
	srv := grpc.NewServer()
	pb.RegisterClusterServer(srv, sink)
	go srv.Serve(lis)
	defer srv.Stop()

	h := New("a", dial.Options{}, slog.New(slog.DiscardHandler))
	h.Start(members{{NodeID: "a", GRPCAddress: "127.0.0.1:1"}, {NodeID: "b", GRPCAddress: lis.Addr().String()}})
	defer h.Close()
	h.Add([]store.ChildHint{{Parent: [32]byte{1}, Gone: true}})
	select {
	case r := <-sink.got:
		if r.FromNode != "a" || len(r.Hints) != 1 || !r.Hints[0].Gone {
			t.Fatalf("peer got %v, want one parent-gone notice from a", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the peer received no hints within 10s")
	}
	poll.Until(t, 10*time.Second, time.Millisecond, "the sender counting its hint sent", func() bool { return h.Stats().Sent == 1 })
	h.Close()
	if st := h.Stats(); st.Sent != 1 || st.Dropped != 0 {
		t.Fatalf("stats %+v, want 1 sent and none dropped", st)
	}
}
