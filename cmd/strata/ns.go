package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratakv/strata/client/admin"
)

func newNSCmd(g *globals) *cobra.Command {
	return newGroupCmd("ns", "Inspect and manage namespaces", newNSLsCmd(g), newNSShowCmd(g), newNSDiffCmd(g),
		newNSForksCmd(g), newNSRmCmd(g), newNSTTLCmd(g), newNSDrainCmd(g))
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

// openNamespace checks the namespace argument and the keys after it (page
// keys or unique prefixes of them, see parseKeyRef), dials the cluster and
// resolves the namespace on it (see resolveNamespace), then the key
// prefixes in it (see resolveKeys); the caller closes the cluster.
func (g *globals) openNamespace(cmd *cobra.Command, arg string, keyArgs ...string) (*admin.Cluster, *admin.Found,
	[][]byte, error) {
	ref, err := parseNSRef(arg)
	if err != nil {
		return nil, nil, nil, err
	}
	refs := make([]keyRef, len(keyArgs))
	for i, a := range keyArgs {
		if refs[i], err = parseKeyRef(a); err != nil {
			return nil, nil, nil, err
		}
	}
	c, err := g.dial(cmd.Context())
	if err != nil {
		return nil, nil, nil, err
	}
	ns, err := g.resolveNamespace(cmd.Context(), cmd.ErrOrStderr(), c, ref)
	if err != nil {
		c.Close()
		return nil, nil, nil, err
	}
	keys, err := g.resolveKeys(cmd.Context(), cmd.ErrOrStderr(), c, ns, refs)
	if err != nil {
		c.Close()
		return nil, nil, nil, err
	}
	return c, ns, keys, nil
}

// resolveNamespace finds the one namespace whose ID is or starts with ref
// on every member asked (see admin.Cluster.Namespace); a member that
// fails is reported on w (see settle).
func (g *globals) resolveNamespace(ctx context.Context, w io.Writer, c *admin.Cluster, ref nsRef) (*admin.Found, error) {
	ns, failed, err := c.Namespace(ctx, ref.prefix)
	if ne, ok := errors.AsType[*admin.NodeError](err); ok && status.Code(ne.Err) == codes.InvalidArgument {
		explained := g.explain(ne)
		return nil, &callError{err: explained, msg: explained.Error() + " (give more hex digits of the namespace id)"}
	}
	// Members that failed are reported first, as when the namespace is found.
	ae, ambiguous := errors.AsType[*admin.AmbiguousError](err)
	nf, notFound := errors.AsType[*admin.NotFoundError](err)
	if ambiguous || notFound {
		err = nil
	}
	if err := g.settle(w, failed, err); err != nil {
		return nil, err
	}
	switch {
	case ambiguous:
		return nil, fmt.Errorf("%q matches more than one namespace in the cluster, %s and %s "+
			"(give more hex digits of the namespace id)", ref.arg, shortHex(ae.IDs[0], shortIDHex), shortHex(ae.IDs[1], shortIDHex))
	case notFound && nf.Asked == 1:
		return nil, fmt.Errorf("no namespace matches %q on the node at %s (list them with: strata ns ls)",
			ref.arg, nf.Answered[0])
	case notFound:
		return nil, fmt.Errorf("no namespace matches %q on any of the %d nodes that answered (list them with: strata ns ls)",
			ref.arg, len(nf.Answered))
	}
	return ns, nil
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
