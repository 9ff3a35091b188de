package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

// explain is the one place gRPC failures become messages for operators.
func (c *conn) explain(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	reason := pb.ReasonOf(err)
	var msg, short string
	switch {
	case reason == pb.ReasonShuttingDown:
		msg = fmt.Sprintf("the node at %s is shutting down; try another node", c.endpoint)
		short = "shutting down"
	case st.Code() == codes.Unavailable && reason == "":
		short = dialCause(st.Message())
		msg = fmt.Sprintf("cannot reach a strata node at %s (%s)\n%s", c.endpoint, short, startHint)
	case st.Code() == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded):
		msg = fmt.Sprintf("no answer from the node at %s within %s (raise --timeout, or check --endpoints)\n%s",
			c.endpoint, c.timeout, startHint)
		short = fmt.Sprintf("no answer within %s", c.timeout)
	case st.Code() == codes.Canceled:
		msg = "interrupted"
	case reason == pb.ReasonNamespaceNotFound:
		msg = fmt.Sprintf("namespace not found on the node at %s (list them with: strata ns ls)", c.endpoint)
	case st.Code() == codes.PermissionDenied:
		msg = "permission denied: the token's tenant does not own this namespace " +
			"(use that tenant's token, or the admin token)"
	case st.Code() == codes.Unauthenticated && c.token == "":
		msg = fmt.Sprintf("the node at %s requires a token: pass --token or set STRATA_TOKEN", c.endpoint)
	case st.Code() == codes.Unauthenticated:
		msg = fmt.Sprintf("the node at %s does not accept this token (check --token / STRATA_TOKEN)", c.endpoint)
	case st.Code() == codes.NotFound:
		msg = "not found: " + st.Message()
	case st.Code() == codes.InvalidArgument:
		msg = "the node refused the request: " + strings.TrimSuffix(st.Message(), ": malformed request")
	case st.Code() == codes.Unimplemented:
		msg = fmt.Sprintf("the node at %s does not serve this call (an older stratad?): %s", c.endpoint, st.Message())
	default:
		msg = fmt.Sprintf("the node at %s failed the call (%s): %s", c.endpoint, st.Code(), st.Message())
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

// unreachable reports whether err means the node could not be reached or
// did not answer in time, rather than that it refused the call.
func unreachable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
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
func noEndpointAnswered(tried []error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "cannot reach a strata node at any of the %d endpoints:", len(tried))
	for _, err := range tried {
		fmt.Fprintf(&b, "\n  %s", err)
	}
	b.WriteString("\n" + startHint)
	return errors.New(b.String())
}

// serverMessage is what the node said in a failed call's status, without
// the sentence explain wrapped it in.
func serverMessage(err error) string {
	if ce, ok := errors.AsType[*callError](err); ok {
		err = ce.err
	}
	return status.Convert(err).Message()
}
