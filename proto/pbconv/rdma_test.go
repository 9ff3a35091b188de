package pbconv

import (
	"testing"

	"google.golang.org/protobuf/proto"

	stratav1 "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/rdma"
)

// TestRdmaEndpoint: endpoints cross the wire unchanged, with a GID or
// without (InfiniBand by LID); a GID of another length and a LID past 16
// bits are refused.
func TestRdmaEndpoint(t *testing.T) {
	gid := [16]byte{0xfe, 0x80, 15: 1}
	for _, e := range []rdma.Endpoint{
		{LID: 7, QPN: 0x11, PSN: 0xabcdef},
		{GID: gid, QPN: 1 << 23, PSN: 1, Addr: 0x7f00_0000_1000, RKey: 0xdead, Size: 1 << 30},
	} {
		b, err := proto.Marshal(RdmaEndpointProto(e))
		if err != nil {
			t.Fatal(err)
		}
		var p stratav1.RdmaEndpoint
		if err := proto.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		if got, err := RdmaEndpoint(&p); err != nil || got != e {
			t.Errorf("round trip of %+v: %+v, %v", e, got, err)
		}
	}
	for name, p := range map[string]*stratav1.RdmaEndpoint{
		"short GID": {Gid: gid[:15]},
		"long GID":  {Gid: append(gid[:], 0)},
		"wide LID":  {Lid: 1 << 16},
	} {
		if _, err := RdmaEndpoint(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
