// Command strata is the operator CLI of a strata cluster: it inspects
// the members, namespaces, keys, pages and leases through the nodes'
// Cluster and Admin gRPC services, and removes what an operator asks it to.
//
//	strata node ls
//	strata cluster status
//	strata ns ls
//	strata ns show 3f2a
//	strata ns diff 3f2a 9b01
//	strata ns forks
//	strata ns ttl 3f2a 12h
//	strata ns rm 3f2a --yes
//	strata keys ls 3f2a --limit 20
//	strata keys stat 3f2a <key-or-prefix>...
//	strata keys rm 3f2a <key-or-prefix>...
//	strata lease ls
//	strata transfer ls --tenant acme
//
// The node asked is the first of --endpoints that answers (a
// comma-separated list; --endpoint is the same flag; env STRATA_ENDPOINTS,
// or STRATA_ENDPOINT; default 127.0.0.1:7070); a token (--token or
// STRATA_TOKEN) is sent as "authorization: Bearer <token>" to every node.
// Every command prints a table, or one JSON document with -o json.
//
// The ns, keys, lease and transfer commands are cluster-wide: they take the
// membership from the node asked and ask every alive (or suspect) member in
// parallel, each call under --timeout, then merge the answers. A member
// that fails is reported on stderr ("node X unreachable: ...; results may
// be incomplete") and left out. node ls and cluster status show such a
// member with its error in their output instead.
//
// The fan-out and the merging are package client/admin's; each subcommand
// (one file each) parses its flags, makes one admin call and formats the
// answer as a table or JSON. errors.go words every failure for operators.
//
// The exit status is 1 on any error: no endpoint answers, every member
// asked failed, `keys stat` found some key on no node, `ns rm` lacks --yes,
// or a command that changes the cluster (ns rm, ns ttl, keys rm) failed on
// some member. A member that fails a listing while others answer is not an
// error.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd(os.Getenv).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "strata:", err)
		os.Exit(1)
	}
}
