package pbconv

import (
	"fmt"

	stratav1 "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/rdma"
)

// RdmaEndpoint converts a wire endpoint; a GID that is neither empty nor
// 16 bytes is an error.
func RdmaEndpoint(p *stratav1.RdmaEndpoint) (rdma.Endpoint, error) {
	e := rdma.Endpoint{LID: uint16(p.GetLid()), QPN: p.GetQpn(), PSN: p.GetPsn(), Addr: p.GetAddr(),
		RKey: p.GetRkey(), Size: p.GetSize()}
	switch g := p.GetGid(); len(g) {
	case 0:
	case len(e.GID):
		copy(e.GID[:], g)
	default:
		return e, fmt.Errorf("rdma endpoint: GID of %d bytes, want 16 or none", len(g))
	}
	if p.GetLid() > 0xffff {
		return e, fmt.Errorf("rdma endpoint: LID %d does not fit 16 bits", p.GetLid())
	}
	return e, nil
}

// RdmaEndpointProto converts an endpoint to its wire message.
func RdmaEndpointProto(e rdma.Endpoint) *stratav1.RdmaEndpoint {
	p := &stratav1.RdmaEndpoint{Lid: uint32(e.LID), Qpn: e.QPN, Psn: e.PSN, Addr: e.Addr, Rkey: e.RKey, Size: e.Size}
	if e.GID != [16]byte{} {
		p.Gid = e.GID[:]
	}
	return p
}
