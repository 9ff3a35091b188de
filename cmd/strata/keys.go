package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/client/admin"
)

func newKeysCmd(g *globals) *cobra.Command {
	return newGroupCmd("keys", "Inspect and delete the page keys of a namespace", newKeysLsCmd(g), newKeysStatCmd(g), newKeysRmCmd(g),
		newKeysQueryCmd(g), newKeysSnapshotCmd(g))
}

// keyCandidates is how many keys the error for an ambiguous key prefix
// lists.
const keyCandidates = 8

// keyRef is a page key as the command line names it: the whole key (64 hex
// digits), or a prefix of it that no other key of the namespace has, as
// git takes an object's name (keys ls prints keys cut to shortKeyHex).
type keyRef struct {
	arg    string // as given
	key    []byte // the whole key; nil for a prefix until resolveKeys
	prefix string // checked and lowercased, when fewer than 64 digits
}

// parseKeyRef checks a key argument before anything is dialled.
func parseKeyRef(arg string) (keyRef, error) {
	if len(arg) == 2*32 {
		key, err := parseKey(arg)
		return keyRef{arg: arg, key: key}, err
	}
	p := strings.ToLower(arg)
	if p == "" || len(p) > 2*32 || strings.Trim(p, "0123456789abcdef") != "" {
		return keyRef{}, fmt.Errorf("%q is not a page key or key prefix: want hex digits, 64 for a whole key "+
			"(as `strata keys ls --wide` prints them)", arg)
	}
	return keyRef{arg: arg, prefix: p}, nil
}

// resolveKeys returns the keys refs name in ns: a whole key as given (it
// may be absent), a prefix as the one key of ns that starts with it on any
// member asked. A prefix that no key has, or that several have, is an
// error naming them. A member that fails is reported on w (see settle).
func (g *globals) resolveKeys(ctx context.Context, w io.Writer, c *admin.Cluster, ns *admin.Found,
	refs []keyRef) ([][]byte, error) {
	keys := make([][]byte, len(refs))
	var prefixes []string
	for i, r := range refs {
		keys[i] = r.key
		if r.key == nil {
			prefixes = append(prefixes, r.prefix)
		}
	}
	if len(prefixes) == 0 {
		return keys, nil
	}
	matches, failed, err := c.KeysByPrefix(ctx, ns, prefixes, keyCandidates+1)
	if err := g.settle(w, failed, err); err != nil {
		return nil, err
	}
	for i, r := range refs {
		if r.key != nil {
			continue
		}
		found := matches[0]
		matches = matches[1:]
		switch {
		case len(found) == 0:
			return nil, fmt.Errorf("no key of namespace %s starts with %q (list them with: strata keys ls %[1]s)",
				shortHex(ns.ID, shortIDHex), r.arg)
		case len(found) > 1:
			return nil, ambiguousKey(r.arg, found)
		}
		keys[i] = found[0]
	}
	return keys, nil
}

// ambiguousKey is the error for a key prefix that found keys, more than
// one: it lists them, up to keyCandidates.
func ambiguousKey(arg string, found [][]byte) error {
	var b strings.Builder
	fmt.Fprintf(&b, "key prefix %q is ambiguous (give more hex digits); the candidates are:", arg)
	for _, k := range found[:min(len(found), keyCandidates)] {
		fmt.Fprintf(&b, "\n  %s", hexOf(k))
	}
	if len(found) > keyCandidates {
		b.WriteString("\n  and more")
	}
	return errors.New(b.String())
}
