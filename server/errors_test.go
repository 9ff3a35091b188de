package server

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/frame"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/transfer"
)

// sentinels names every sentinel error a request can fail with. The test
// below reads the errors.go files, so a sentinel added there and missing
// here (and so, likely, from the table) fails it.
var sentinels = map[string]error{
	"store.ErrClosed": store.ErrClosed, "store.ErrNamespaceNotFound": store.ErrNamespaceNotFound,
	"store.ErrBadSize": store.ErrBadSize, "store.ErrNoSpace": store.ErrNoSpace, "store.ErrQuota": store.ErrQuota,
	"store.ErrUnknownWrite": store.ErrUnknownWrite, "store.ErrWriteExpired": store.ErrWriteExpired,
	"store.ErrWriteClosed": store.ErrWriteClosed, "store.ErrWriteOutOfRange": store.ErrWriteOutOfRange,
	"store.ErrLeaseExpired": store.ErrLeaseExpired, "store.ErrLeaseNotFound": store.ErrLeaseNotFound,
	"store.ErrLeaseLimit": store.ErrLeaseLimit, "store.ErrNotAdmitted": store.ErrNotAdmitted,
	"namespace.ErrBadID": namespace.ErrBadID, "namespace.ErrBadKey": namespace.ErrBadKey,
	"namespace.ErrInvalid": namespace.ErrInvalid,
	"server.errBadRequest": errBadRequest, "server.errBatchTooLarge": errBatchTooLarge,
	"server.errDenied": errDenied, "server.errUnauthenticated": errUnauthenticated,
	"server.errVersion": errVersion, "server.errRegistry": errRegistry, "server.errTruncated": errTruncated,
	"server.errNoUnregister": errNoUnregister,
	"store.ErrNotPresent":    store.ErrNotPresent,
	"transfer.ErrRoomBusy":   transfer.ErrRoomBusy, "transfer.ErrStaleAttempt": transfer.ErrStaleAttempt,
	"transfer.ErrNoRoom": transfer.ErrNoRoom, "transfer.ErrAborted": transfer.ErrAborted,
	"transfer.ErrExpired": transfer.ErrExpired, "transfer.ErrWrongState": transfer.ErrWrongState,
	"transfer.ErrMismatch": transfer.ErrMismatch, "transfer.ErrPinQuota": transfer.ErrPinQuota,
	"transfer.ErrTooManyRooms": transfer.ErrTooManyRooms, "transfer.ErrBadRequest": transfer.ErrBadRequest,
	"transfer.ErrClosed":      transfer.ErrClosed,
	"server.ErrNoEventStream": ErrNoEventStream, "server.ErrEventsBusy": ErrEventsBusy,
}

// grpcOnly names the sentinels of calls no frame carries (the transfer
// rooms and their pins): their frame column is never sent, so only their
// gRPC side is checked.
var grpcOnly = map[string]bool{
	"store.ErrNotPresent": true, "transfer.ErrRoomBusy": true, "transfer.ErrStaleAttempt": true,
	"transfer.ErrNoRoom": true, "transfer.ErrAborted": true, "transfer.ErrExpired": true,
	"transfer.ErrWrongState": true, "transfer.ErrMismatch": true, "transfer.ErrPinQuota": true,
	"transfer.ErrTooManyRooms": true, "transfer.ErrBadRequest": true,
	"server.ErrNoEventStream": true, "server.ErrEventsBusy": true,
}

// frameMeaning is what each frame error code means on gRPC: the codes and
// reasons an error of that frame code may carry there.
var frameMeaning = map[frame.Code]struct {
	codes   []codes.Code
	reasons []string
}{
	frame.CodeBadRequest: {[]codes.Code{codes.InvalidArgument, codes.Aborted, codes.Unimplemented},
		[]string{pb.ReasonInvalidArgument, pb.ReasonTruncated, ""}},
	frame.CodeUnauthenticated:   {[]codes.Code{codes.Unauthenticated}, []string{pb.ReasonUnauthenticated}},
	frame.CodeDenied:            {[]codes.Code{codes.PermissionDenied}, []string{pb.ReasonTenantDenied}},
	frame.CodeNamespaceNotFound: {[]codes.Code{codes.NotFound}, []string{pb.ReasonNamespaceNotFound}},
	frame.CodeLeaseExpired:      {[]codes.Code{codes.FailedPrecondition}, []string{pb.ReasonLeaseExpired}},
	frame.CodeLeaseNotFound:     {[]codes.Code{codes.NotFound}, []string{pb.ReasonLeaseNotFound}},
	frame.CodeLeaseLimit:        {[]codes.Code{codes.ResourceExhausted}, []string{pb.ReasonLeaseLimit}},
	frame.CodeBatchTooLarge:     {[]codes.Code{codes.ResourceExhausted}, []string{pb.ReasonBatchTooLarge}},
	frame.CodeNoSpace:           {[]codes.Code{codes.ResourceExhausted}, []string{pb.ReasonNoSpace}},
	frame.CodeQuota:             {[]codes.Code{codes.ResourceExhausted}, []string{pb.ReasonQuota}},
	frame.CodeVersion:           {[]codes.Code{codes.FailedPrecondition}, []string{pb.ReasonVersionMismatch}},
	frame.CodeShuttingDown:      {[]codes.Code{codes.Unavailable}, []string{pb.ReasonShuttingDown, pb.ReasonRegistry}},
	frame.CodeWriteUnknown:      {[]codes.Code{codes.NotFound}, []string{pb.ReasonWriteUnknown}},
	frame.CodeWriteExpired:      {[]codes.Code{codes.FailedPrecondition}, []string{pb.ReasonWriteExpired}},
	frame.CodeWriteClosed:       {[]codes.Code{codes.FailedPrecondition}, []string{pb.ReasonWriteClosed}},
	frame.CodeNotAdmitted:       {[]codes.Code{codes.ResourceExhausted}, []string{pb.ReasonNotAdmitted}},
	frame.CodeWriteOutOfRange:   {[]codes.Code{codes.OutOfRange}, []string{pb.ReasonWriteOutOfRange}},
}

// declaredErrors lists the package-level error variables of a Go file, as
// pkg.Name.
func declaredErrors(t *testing.T, pkg, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, sp := range g.Specs {
			for _, n := range sp.(*ast.ValueSpec).Names {
				if strings.HasPrefix(strings.ToLower(n.Name), "err") {
					names = append(names, pkg+"."+n.Name)
				}
			}
		}
	}
	if len(names) == 0 {
		t.Fatalf("no errors declared in %s", path)
	}
	return names
}

// TestEveryErrorMapsOnBothWires: every sentinel of the store, the
// namespace package and the server has a row in the one table, with a
// gRPC code and a frame code that mean the same, neither INTERNAL, and
// toStatus and frameError answer them.
func TestEveryErrorMapsOnBothWires(t *testing.T) {
	var names []string
	for _, f := range []struct{ pkg, path string }{
		{"store", "../store/errors.go"}, {"namespace", "../namespace/errors.go"}, {"server", "errors.go"},
		{"transfer", "../transfer/errors.go"},
	} {
		names = append(names, declaredErrors(t, f.pkg, f.path)...)
	}
	for _, name := range names {
		sentinel, ok := sentinels[name]
		if !ok {
			t.Errorf("%s: not in this test's list of sentinels; add it, and a row to the table in errors.go", name)
			continue
		}
		err := fmt.Errorf("doing something: %w", sentinel)
		i := mapped(err)
		if i < 0 || mapping[i].err != sentinel {
			t.Errorf("%s: no row of its own in the table", name)
			continue
		}
		m := mapping[i]
		meaning, ok := frameMeaning[m.frame]
		switch {
		case m.code == codes.Internal || m.code == codes.OK:
			t.Errorf("%s: gRPC code %v", name, m.code)
		case grpcOnly[name]:
		case !ok:
			t.Errorf("%s: frame code %d (INTERNAL or unknown)", name, m.frame)
		case !slices.Contains(meaning.codes, m.code) || !slices.Contains(meaning.reasons, m.reason):
			t.Errorf("%s: gRPC %v %q and frame code %d disagree", name, m.code, m.reason, m.frame)
		}
		if got := frameError(err); got.Code != m.frame || got.Message != err.Error() {
			t.Errorf("%s: frame error %+v", name, got)
		}
		if code, reason := grpcCode(err); code != m.code || reason != m.reason {
			t.Errorf("%s: gRPC %v %q, want %v %q", name, code, reason, m.code, m.reason)
		}
	}
}

// TestAdmissionAndRangeErrorsReachFrameClients: the two errors the frame
// table once lacked reach a frame client as their own codes.
func TestAdmissionAndRangeErrorsReachFrameClients(t *testing.T) {
	for _, c := range []struct {
		err  error
		want frame.Code
	}{
		{fmt.Errorf("page 01: %w", store.ErrNotAdmitted), frame.CodeNotAdmitted},
		{fmt.Errorf("write 7: %w", store.ErrWriteOutOfRange), frame.CodeWriteOutOfRange},
	} {
		if got := frameError(c.err).Code; got != c.want {
			t.Errorf("%v: frame code %d, want %d", c.err, got, c.want)
		}
	}
}

// TestUnmappedErrors: context errors keep gRPC's codes; anything else is
// INTERNAL on both wires.
func TestUnmappedErrors(t *testing.T) {
	if c, _ := grpcCode(context.Canceled); c != codes.Canceled {
		t.Errorf("canceled: %v", c)
	}
	if c, _ := grpcCode(fmt.Errorf("x: %w", context.DeadlineExceeded)); c != codes.DeadlineExceeded {
		t.Errorf("deadline: %v", c)
	}
	other := errors.New("disk on fire")
	if c, r := grpcCode(other); c != codes.Internal || r != pb.ReasonInternal {
		t.Errorf("other: %v %q", c, r)
	}
	if c := frameError(other).Code; c != frame.CodeInternal {
		t.Errorf("other, frame: %d", c)
	}
}
