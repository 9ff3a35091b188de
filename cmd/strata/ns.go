package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

func newNSCmd(g *globals) *cobra.Command {
	return newGroupCmd("ns", "Inspect and manage namespaces", newNSLsCmd(g), newNSShowCmd(g), newNSDiffCmd(g),
		newNSForksCmd(g), newNSRmCmd(g), newNSTTLCmd(g))
}

// found is a namespace found on the cluster: its ID, and the members that
// know it with what each says about it.
type found struct {
	id    []byte
	nodes []reply[*pb.GetNamespaceResponse] // in member order
}

// members is the members that know the namespace: those to ask about its
// keys.
func (ns *found) members() []*member {
	var out []*member
	for _, r := range ns.nodes {
		out = append(out, r.member)
	}
	return out
}

// nsRef is a namespace as the command line names it: its ID or a prefix.
type nsRef struct {
	arg    string // as given
	prefix string // checked and lowercased
}

// parseNSRef checks a namespace argument before anything is dialled.
func parseNSRef(arg string) (nsRef, error) {
	prefix, err := hexPrefix(arg)
	return nsRef{arg: arg, prefix: prefix}, err
}

// openNamespace dials the fleet and resolves ref on it (see
// resolveNamespace); the caller closes the fleet.
func (g *globals) openNamespace(cmd *cobra.Command, ref nsRef) (*fleet, *found, error) {
	f, err := g.dialFleet(cmd.Context())
	if err != nil {
		return nil, nil, err
	}
	ns, err := resolveNamespace(cmd.Context(), cmd.ErrOrStderr(), f, ref)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, ns, nil
}

// resolveNamespace finds the one namespace whose ID is or starts with ref
// on every member asked. A member that does not know it holds none of its
// pages and is left out; one that fails is reported on w (see settle).
func resolveNamespace(ctx context.Context, w io.Writer, f *fleet, ref nsRef) (*found, error) {
	arg, prefix := ref.arg, ref.prefix
	rs := gather(ctx, f.asked(), func(ctx context.Context, c *conn) (*pb.GetNamespaceResponse, error) {
		resp, err := invoke(ctx, c, c.admin.GetNamespace, &pb.GetNamespaceRequest{IdPrefix: prefix})
		if status.Code(err) == codes.NotFound {
			return nil, nil
		}
		return resp, err
	})
	for _, r := range rs {
		if status.Code(r.err) == codes.InvalidArgument {
			return nil, &callError{err: r.err, msg: r.err.Error() + " (give more hex digits of the namespace id)"}
		}
	}
	if err := settle(w, rs); err != nil {
		return nil, err
	}
	ns := &found{}
	for _, r := range answered(rs) {
		if r.val == nil {
			continue
		}
		id := r.val.GetNamespace().GetId()
		if ns.id != nil && !bytes.Equal(id, ns.id) {
			return nil, fmt.Errorf("%q matches more than one namespace in the cluster, %s and %s "+
				"(give more hex digits of the namespace id)", arg, shortHex(ns.id, shortIDHex), shortHex(id, shortIDHex))
		}
		ns.id = id
		ns.nodes = append(ns.nodes, r)
	}
	switch {
	case ns.id != nil:
		return ns, nil
	case len(rs) == 1:
		return nil, fmt.Errorf("no namespace matches %q on the node at %s (list them with: strata ns ls)",
			arg, rs[0].c.endpoint)
	}
	return nil, fmt.Errorf("no namespace matches %q on any of the %d nodes that answered (list them with: strata ns ls)",
		arg, len(answered(rs)))
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
