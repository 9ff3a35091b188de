package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratakv/strata/client/admin"
)

func TestSettle(t *testing.T) {
	refused := &callError{msg: "cannot reach a strata node at 127.0.0.1:2 (connection refused)\nhint",
		short: "connection refused", err: status.Error(codes.Unavailable, "refused")}
	denied := &callError{msg: "permission denied: no", err: status.Error(codes.PermissionDenied, "no")}
	down := &admin.NodeError{NodeID: "n2", Addr: "127.0.0.1:2", Err: refused}
	refusing := &admin.NodeError{NodeID: "n3", Addr: "127.0.0.1:3", Err: denied}
	for _, c := range []struct {
		name   string
		failed []*admin.NodeError // the members that failed while others answered
		fanout error              // what the admin call returned
		err    string
		stderr string
	}{
		{"all answered", nil, nil, "", ""},
		{"one of one failed", nil, &admin.FanoutError{Asked: 1, Failed: []*admin.NodeError{down}}, refused.msg, ""},
		{"some failed", []*admin.NodeError{down, refusing}, nil, "",
			"node n2 (127.0.0.1:2) unreachable: connection refused; results may be incomplete\n" +
				"node n3 (127.0.0.1:3) failed: permission denied: no; results may be incomplete\n"},
		{"all failed", nil, &admin.FanoutError{Asked: 2, Failed: []*admin.NodeError{down, refusing}},
			"none of the 2 nodes answered:\n  node n2 (127.0.0.1:2): connection refused\n  node n3 (127.0.0.1:3): permission denied: no", ""},
		{"none asked", nil, admin.ErrNoMembers, "no member of the cluster is alive", ""},
	} {
		var w strings.Builder
		err := (&globals{}).settle(&w, c.failed, c.fanout)
		if got := fmt.Sprint(err); (err == nil) != (c.err == "") || (err != nil && got != c.err) || w.String() != c.stderr {
			t.Errorf("%s: err %v, stderr %q; want err %q, stderr %q", c.name, err, w.String(), c.err, c.stderr)
		}
		if c.name == "one of one failed" && !errors.Is(err, refused) {
			t.Errorf("%s: err %v is not the node's error", c.name, err)
		}
	}
}
