package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratakv/strata/client/admin"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// startHint tells an operator how to get a node when none answers.
const startHint = "is stratad running? start one with: go run ./cmd/stratad " +
	"(or point --endpoints / STRATA_ENDPOINTS at a running node)"

// callError is a failed call told as a sentence. It unwraps to the gRPC
// status error, so callers can still ask for the code.
type callError struct {
	msg   string
	short string // the cause alone, on one line, for tables and warnings; "" = msg's first line
	err   error
}

func (e *callError) Error() string { return e.msg }
func (e *callError) Unwrap() error { return e.err }

// explain is the one place the admin package's errors become messages for
// operators: a node's failed call (*admin.NodeError) as a sentence naming
// the node and what to do, several endpoints that did not answer as a
// list. Anything else, or what is explained already, is returned as it is.
func (g *globals) explain(err error) error {
	if ce, ok := errors.AsType[*callError](err); ok {
		return ce
	}
	if ee, ok := errors.AsType[*admin.EndpointsError](err); ok {
		return g.noEndpointAnswered(ee.Tried)
	}
	if ne, ok := errors.AsType[*admin.NodeError](err); ok {
		return g.explainAt(ne.Addr, ne.Err)
	}
	return err
}

// explainAt is explain for a call to the node at addr.
func (g *globals) explainAt(addr string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	reason := pb.ReasonOf(err)
	var msg, short string
	switch {
	case reason == pb.ReasonShuttingDown:
		msg = fmt.Sprintf("the node at %s is shutting down; try another node", addr)
		short = "shutting down"
	case st.Code() == codes.Unavailable && reason == "":
		short = dialCause(st.Message())
		msg = fmt.Sprintf("cannot reach a strata node at %s (%s)\n%s", addr, short, startHint)
	case st.Code() == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded):
		msg = fmt.Sprintf("no answer from the node at %s within %s (raise --timeout, or check --endpoints)\n%s",
			addr, g.timeout, startHint)
		short = fmt.Sprintf("no answer within %s", g.timeout)
	case st.Code() == codes.Canceled:
		msg = "interrupted"
	case reason == pb.ReasonNamespaceNotFound:
		msg = fmt.Sprintf("namespace not found on the node at %s (list them with: strata ns ls)", addr)
	case st.Code() == codes.PermissionDenied:
		msg = "permission denied: the token's tenant does not own this namespace " +
			"(use that tenant's token, or the admin token)"
	case st.Code() == codes.Unauthenticated && g.token == "":
		msg = fmt.Sprintf("the node at %s requires a token: pass --token or set STRATA_TOKEN", addr)
	case st.Code() == codes.Unauthenticated:
		msg = fmt.Sprintf("the node at %s does not accept this token (check --token / STRATA_TOKEN)", addr)
	case st.Code() == codes.NotFound:
		msg = "not found: " + st.Message()
	case st.Code() == codes.InvalidArgument:
		msg = "the node refused the request: " + strings.TrimSuffix(st.Message(), ": malformed request")
	case st.Code() == codes.Unimplemented:
		msg = fmt.Sprintf("the node at %s does not serve this call (an older stratad?): %s", addr, st.Message())
	default:
		msg = fmt.Sprintf("the node at %s failed the call (%s): %s", addr, st.Code(), st.Message())
	}
	return &callError{msg: msg, short: short, err: err}
}

// brief is err on one line, without hints: the cell of an ERROR column
// and the cause in a warning about one node ("connection refused").
func brief(err error) string {
	if ce, ok := errors.AsType[*callError](err); ok && ce.short != "" {
		return ce.short
	}
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}

// dialCause shortens gRPC's "connection error: desc = "transport: Error
// while dialing: dial tcp 127.0.0.1:1: connect: connection refused"" to its
// last clause, "connection refused".
func dialCause(msg string) string {
	msg = strings.TrimRight(msg, `"`)
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		return msg[i+2:]
	}
	return msg
}

// noEndpointAnswered is the error when none of several --endpoints
// answered: each with why, then how to get a node.
func (g *globals) noEndpointAnswered(tried []*admin.NodeError) error {
	var b strings.Builder
	fmt.Fprintf(&b, "cannot reach a strata node at any of the %d endpoints:", len(tried))
	for _, ne := range tried {
		fmt.Fprintf(&b, "\n  %s: %s", ne.Addr, brief(g.explain(ne)))
	}
	b.WriteString("\n" + startHint)
	return errors.New(b.String())
}

// serverMessage is what the node said in a failed call's status.
func serverMessage(ne *admin.NodeError) string { return status.Convert(ne.Err).Message() }

// settle is how a listing ends: it reports on w each member that failed
// while others answered, and turns err (every member failed, or none was
// asked) into the command's error. One member's failure is its error as
// it was.
func (g *globals) settle(w io.Writer, failed []*admin.NodeError, err error) error {
	if fe, ok := errors.AsType[*admin.FanoutError](err); ok {
		if fe.Asked == 1 {
			return g.explain(fe.Failed[0])
		}
		var b strings.Builder
		fmt.Fprintf(&b, "none of the %d nodes answered:", fe.Asked)
		for _, ne := range fe.Failed {
			fmt.Fprintf(&b, "\n  node %s: %s", ne.Label(), brief(g.explain(ne)))
		}
		return errors.New(b.String())
	}
	if err != nil {
		return g.explain(err)
	}
	g.warn(w, failed, "; results may be incomplete")
	return nil
}

// settleAll is how a command that changes the cluster ends, where every
// member asked must have done it: err (a *admin.FanoutError) becomes the
// command's error, naming how many failed after reporting each on w (one
// member's failure is its error as it was). what says what was not done:
// "the TTL was not set".
func (g *globals) settleAll(w io.Writer, err error, what string) error {
	fe, ok := errors.AsType[*admin.FanoutError](err)
	switch {
	case !ok:
		return g.explain(err)
	case fe.Asked == 1:
		return g.explain(fe.Failed[0])
	}
	g.warn(w, fe.Failed, "")
	return fmt.Errorf("%s on %d of the %d nodes asked; run the command again when they answer", what, len(fe.Failed), fe.Asked)
}

// warn reports on w each node that failed, then tail.
func (g *globals) warn(w io.Writer, failed []*admin.NodeError, tail string) {
	for _, ne := range failed {
		what := "failed"
		if admin.Unreachable(ne) {
			what = "unreachable"
		}
		fmt.Fprintf(w, "node %s %s: %s%s\n", ne.Label(), what, brief(g.explain(ne)), tail)
	}
}
