package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

func newNSCmd(g *globals) *cobra.Command {
	return newGroupCmd("ns", "Inspect namespaces", newNSLsCmd(g), newNSShowCmd(g))
}

// resolveNamespace finds the one namespace whose ID is or starts with arg
// (hex, any case).
func resolveNamespace(ctx context.Context, c *conn, arg string) (*pb.GetNamespaceResponse, error) {
	prefix, err := hexPrefix(arg)
	if err != nil {
		return nil, err
	}
	resp, err := invoke(ctx, c, c.admin.GetNamespace, &pb.GetNamespaceRequest{IdPrefix: prefix})
	switch status.Code(err) {
	case codes.OK:
		return resp, nil
	case codes.NotFound:
		return nil, &callError{err: err, msg: fmt.Sprintf(
			"no namespace matches %q on the node at %s (list them with: strata ns ls)", arg, c.endpoint)}
	case codes.InvalidArgument:
		return nil, &callError{err: err, msg: err.Error() + " (give more hex digits of the namespace id)"}
	}
	return nil, err
}

// hexPrefix checks that s is a hex namespace ID or prefix and lowercases it.
func hexPrefix(s string) (string, error) {
	p := strings.ToLower(s)
	if p == "" || len(p) > 2*32 || strings.Trim(p, "0123456789abcdef") != "" {
		return "", fmt.Errorf("%q is not a namespace id or id prefix (hex digits, as `strata ns ls` prints them)", s)
	}
	return p, nil
}

// parseKey decodes a full page key: 64 hex digits.
func parseKey(s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		return nil, fmt.Errorf("%q is not a page key: want 64 hex digits (32 bytes)", s)
	}
	return b, nil
}
