// Command strata is the operator CLI of a strata cluster: it inspects
// the members, namespaces, keys and pages through the nodes' Cluster and
// Admin gRPC services.
//
//	strata node ls
//	strata cluster status
//	strata ns ls
//	strata ns show 3f2a
//	strata keys ls 3f2a --limit 20
//	strata keys stat 3f2a <key-hex>...
//
// The node asked is --endpoint (or STRATA_ENDPOINT, default
// 127.0.0.1:7070); a token (--token or STRATA_TOKEN) is sent as
// "authorization: Bearer <token>" to every node. Every command prints a
// table, or one JSON document with -o json.
//
// The ns and keys commands are cluster-wide: they take the membership from
// the node asked and ask every alive (or suspect) member in parallel, each
// call under --timeout, then merge the answers. A member that fails is
// reported on stderr ("node X unreachable: ...; results may be
// incomplete") and left out. node ls and cluster status show such a member
// with its error in their output instead.
//
// The exit status is 1 on any error: the node asked does not answer, every
// member asked failed, or `keys stat` found some key on no node. A member
// that fails while others answer is not an error.
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
