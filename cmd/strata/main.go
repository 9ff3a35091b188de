// Command strata is the operator CLI of a strata cluster: it inspects
// namespaces, keys and pages through a node's Admin gRPC service.
//
//	strata ns ls
//	strata ns show 3f2a
//	strata keys ls 3f2a --limit 20
//	strata keys stat 3f2a <key-hex>...
//
// The node is --endpoint (or STRATA_ENDPOINT, default 127.0.0.1:7070); a
// token (--token or STRATA_TOKEN) is sent as "authorization: Bearer <token>".
// Every command prints a table, or one JSON document with -o json. The exit
// status is 1 on any error, including keys that `keys stat` did not find.
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
