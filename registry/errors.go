package registry

import "errors"

var (
	// ErrNotFound is returned by Namespace, DeleteNamespace and Tenant when
	// etcd holds no record under the given ID or name.
	ErrNotFound = errors.New("not found in registry")
	// ErrConflict is returned by PutNamespace when the namespace ID is
	// already registered with a different canonical descriptor (or under a
	// different tenant): two descriptors hashed to one ID, or a record was
	// corrupted. The existing record is left untouched.
	ErrConflict = errors.New("conflicting registry record")
	// ErrUnavailable is returned when etcd could not be reached, or did not
	// answer, within the call's deadline (Config.RequestTimeout at most). The
	// error also wraps the underlying cause (context.DeadlineExceeded or the
	// etcd client's error). Callers use it to tell "etcd down" from
	// ErrNotFound.
	ErrUnavailable = errors.New("etcd unavailable")
	// ErrClosed is returned by calls on a Registry that has been closed, or
	// that Close interrupted.
	ErrClosed = errors.New("registry closed")
	// ErrInvalid is returned, before any etcd round trip, for arguments that
	// break a rule (an empty or malformed ID, name or token hash, or a bad
	// Config); the wrapping message names the field.
	ErrInvalid = errors.New("invalid registry argument")
)

// ErrNotLeader is returned by PublishCutoffs when the term it names no
// longer leads the coordinator election (resigned, or its session
// expired): the cutoffs are not written.
var ErrNotLeader = errors.New("not the coordinator")
