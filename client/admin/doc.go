// Package admin is the operator's Go API to a strata cluster: what the
// strata CLI (cmd/strata) calls, and what any other operator tool can.
//
// Dial asks the first of some endpoints that answers for the membership
// view (the Cluster service's Members) and prepares a connection, through
// internal/dial, to every member that may answer: alive or suspect (a
// suspect often refutes, and asking it costs at most one call's timeout).
// Each cluster-wide call then asks those members in parallel, each call
// under Options.Timeout, and merges what came back:
//
//	Nodes, Status        every member and what it says about itself
//	Namespaces           namespaces summed by ID over the members
//	Namespace            one namespace by ID prefix, and who knows it
//	Keys, StatKeys       a namespace's keys merged in key order, per copy
//	KeysByPrefix         the keys that start with some hex digits
//	Leases               the active leases, soonest expiry first
//	Rooms                the transfer rooms, oldest first
//	SetTTL, DeleteKeys,  changes made on every member that knows the
//	Drop                 namespace
//
// A member that fails is reported, never hidden: a listing returns the
// members that failed beside its answer, and fails (a *FanoutError) only
// when every member asked did; a change fails when any member did, and
// returns what the others answered with it. Errors carry the raw gRPC
// status of the failed call (*NodeError unwraps to it), so that a caller
// words them for its own users.
//
// Pages are not replicated by default, so a namespace's pages are spread
// over the nodes and its totals are sums; a key held by two nodes (a
// hot-page replica, or a spill) is listed once per node. A node that
// predates the Cluster service is a cluster of one.
package admin
