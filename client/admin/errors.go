package admin

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrNoMembers is returned by a cluster-wide call when no member of the
// view may be asked: none is alive or suspect.
var ErrNoMembers = errors.New("no member of the cluster is alive")

// NodeError is a call to one node that failed. Err is what the call
// returned: a gRPC status error, or why the node could not be dialled.
type NodeError struct {
	NodeID string // "" when the node did not say (an endpoint that did not answer)
	Addr   string // where the node was dialled
	Err    error
}

func (e *NodeError) Error() string {
	if e.NodeID == "" {
		return fmt.Sprintf("node at %s: %v", e.Addr, e.Err)
	}
	return fmt.Sprintf("node %s: %v", e.Label(), e.Err)
}

func (e *NodeError) Unwrap() error { return e.Err }

// Label names the node: its ID and the address dialled.
func (e *NodeError) Label() string { return fmt.Sprintf("%s (%s)", e.NodeID, e.Addr) }

// Unreachable reports whether err means the node could not be reached or
// did not answer in time, rather than that it refused the call.
func Unreachable(err error) bool {
	var ne *NodeError
	if errors.As(err, &ne) {
		err = ne.Err
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// FanoutError is a call made on several members that failed on some:
// returned by a listing when every member asked failed, and by a change
// when any did.
type FanoutError struct {
	Asked  int          // members asked
	Failed []*NodeError // those that failed, in member order
}

func (e *FanoutError) Error() string {
	return fmt.Sprintf("%d of the %d nodes asked failed: %v", len(e.Failed), e.Asked, joinNodeErrors(e.Failed))
}

// EndpointsError is returned by Dial when none of several endpoints
// answered: each with why.
type EndpointsError struct {
	Tried []*NodeError
}

func (e *EndpointsError) Error() string {
	return fmt.Sprintf("no answer from any of the %d endpoints: %v", len(e.Tried), joinNodeErrors(e.Tried))
}

// joinNodeErrors is nes as one error, one line each.
func joinNodeErrors(nes []*NodeError) error {
	errs := make([]error, len(nes))
	for i, ne := range nes {
		errs[i] = ne
	}
	return errors.Join(errs...)
}

// NotFoundError is returned by Namespace when no member that answered
// knows a namespace with the prefix.
type NotFoundError struct {
	Prefix   string
	Asked    int      // members asked
	Answered []string // addresses of the members that answered
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no namespace matches %q on any of the %d nodes that answered", e.Prefix, len(e.Answered))
}

// AmbiguousError is returned by Namespace when the prefix matches more
// than one namespace in the cluster; IDs are two of them.
type AmbiguousError struct {
	Prefix string
	IDs    [2][]byte
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%q matches more than one namespace in the cluster, %x and %x", e.Prefix, e.IDs[0], e.IDs[1])
}

// UnregisterError is returned by Drop when deleting the namespace's
// registration failed (other than by the node not supporting it): nothing
// was removed.
type UnregisterError struct {
	*NodeError
}

func (e *UnregisterError) Error() string {
	return "deleting the registration failed: " + e.NodeError.Error()
}

func (e *UnregisterError) Unwrap() error { return e.NodeError }
