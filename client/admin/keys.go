package admin

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	pb "github.com/stratakv/strata/proto/strata/v1"
)

// listPage is how many keys one ListKeys call asks for.
const listPage = 1000

// Keys lists ns's keys after after (nil: from the first) on every member
// that knows it, merged in key order; a key several nodes hold comes once
// per node. It stops after limit rows (0: none), but never between two
// rows of one key, so that listing again after next loses no copy; next
// is nil when the listing is complete. failed is the members that failed:
// their keys are missing.
func (c *Cluster) Keys(ctx context.Context, ns *Found, after []byte, limit int) (rows []KeyRow, next []byte,
	failed []*NodeError, err error) {
	rs := gather(ctx, ns.nodes, func(ctx context.Context, n *nodeConn) (nodeKeys, error) {
		keys, next, err := c.listKeys(ctx, n, ns.ID, after, limit)
		return nodeKeys{keys: keys, more: len(next) > 0}, err
	})
	answered, failed, err := settle(rs)
	if err != nil {
		return nil, nil, failed, err
	}
	var lists []nodeKeys
	for _, r := range answered {
		r.Val.node = r.Member.GetNodeId()
		lists = append(lists, r.Val)
	}
	rows, next = mergeKeys(lists, limit)
	return rows, next, failed, nil
}

// listKeys pages through one node's ListKeys from after until limit keys
// (0: all). next is where a further listing would continue, empty when
// done.
func (c *Cluster) listKeys(ctx context.Context, n *nodeConn, id, after []byte, limit int) (keys []*pb.KeyInfo,
	next []byte, err error) {
	for {
		want := listPage
		if limit > 0 {
			want = min(want, limit-len(keys))
		}
		resp, err := call(ctx, c, n.admin.ListKeys, &pb.ListKeysRequest{NamespaceId: id, AfterKey: after, Limit: uint32(want)})
		if err != nil {
			return nil, nil, err
		}
		got := resp.GetKeys()
		if len(got) > want {
			got = got[:want]
		}
		keys = append(keys, got...)
		next = resp.GetNextAfterKey()
		if len(next) == 0 || len(got) == 0 {
			return keys, nil, nil
		}
		if limit > 0 && len(keys) >= limit {
			return keys, keys[len(keys)-1].GetKey(), nil
		}
		after = next
	}
}

// KeysByPrefix finds, for each of prefixes (1 to 64 lowercase hex
// digits), the first max distinct keys of ns in key order whose hex starts
// with it, held by any member that knows ns: how a key that `strata keys
// ls` prints shortened is found again. matches[i] is prefixes[i]'s. failed
// is the members that failed: keys only they hold are missing.
//
// The keys with a prefix are one run in key order, so each member lists at
// most max keys from the run's start, and the run's first max distinct
// keys are among those lists.
func (c *Cluster) KeysByPrefix(ctx context.Context, ns *Found, prefixes []string, max int) (matches [][][]byte,
	failed []*NodeError, err error) {
	if max < 1 {
		return nil, nil, fmt.Errorf("keys by prefix: max %d, want at least 1", max)
	}
	starts := make([][]byte, len(prefixes))
	for i, p := range prefixes {
		if starts[i], err = beforePrefix(p); err != nil {
			return nil, nil, err
		}
	}
	rs := gather(ctx, ns.nodes, func(ctx context.Context, n *nodeConn) ([][]*pb.KeyInfo, error) {
		lists := make([][]*pb.KeyInfo, len(prefixes))
		for i, after := range starts {
			var err error
			if lists[i], _, err = c.listKeys(ctx, n, ns.ID, after, max); err != nil {
				return nil, err
			}
		}
		return lists, nil
	})
	answered, failed, err := settle(rs)
	if err != nil {
		return nil, failed, err
	}
	matches = make([][][]byte, len(prefixes))
	for i, p := range prefixes {
		var keys [][]byte
		for _, r := range answered {
			for _, k := range r.Val[i] {
				if key := k.GetKey(); strings.HasPrefix(hex.EncodeToString(key), p) {
					keys = append(keys, key)
				}
			}
		}
		slices.SortFunc(keys, bytes.Compare)
		keys = slices.CompactFunc(keys, bytes.Equal)
		matches[i] = keys[:min(len(keys), max)]
	}
	return matches, failed, nil
}

// beforePrefix is the ListKeys cursor that starts at the first key with
// the hex prefix: the key just below it, nil when that is the first key of
// all.
func beforePrefix(prefix string) ([]byte, error) {
	const digits = 2 * 32
	key, err := hex.DecodeString(prefix + strings.Repeat("0", max(digits-len(prefix), 0)))
	if err != nil || prefix == "" || len(key) != 32 || strings.ToLower(prefix) != prefix {
		return nil, fmt.Errorf("key prefix %q: want 1 to %d lowercase hex digits", prefix, digits)
	}
	for i := len(key) - 1; i >= 0; i-- {
		key[i]--
		if key[i] != 0xff {
			return key, nil
		}
	}
	return nil, nil // the prefix's first key is all zeros
}

// KeyStat is what the cluster knows about one key: each node's copy, in
// member order; none when no node that answered holds it.
type KeyStat struct {
	Key    []byte
	Copies []KeyRow
}

// StatKeys asks every member that knows ns for the metadata of keys and
// returns one KeyStat per key, in the order given. failed is the members
// that failed: a key only they hold has no copies.
func (c *Cluster) StatKeys(ctx context.Context, ns *Found, keys [][]byte) (stats []KeyStat, failed []*NodeError, err error) {
	rs := gather(ctx, ns.nodes, func(ctx context.Context, n *nodeConn) ([]*pb.KeyInfo, error) {
		resp, err := call(ctx, c, n.admin.StatKeys, &pb.StatKeysRequest{NamespaceId: ns.ID, Keys: keys})
		if err == nil && len(resp.GetKeys()) != len(keys) {
			err = fmt.Errorf("the node at %s answered %d keys for %d asked", n.addr, len(resp.GetKeys()), len(keys))
		}
		return resp.GetKeys(), err
	})
	answered, failed, err := settle(rs)
	if err != nil {
		return nil, failed, err
	}
	stats = make([]KeyStat, len(keys))
	for i, key := range keys {
		stats[i].Key = key
		for _, r := range answered {
			if info := r.Val[i]; len(info.GetKey()) > 0 {
				stats[i].Copies = append(stats[i].Copies, KeyRow{Node: r.Member.GetNodeId(), Info: info})
			}
		}
	}
	return stats, failed, nil
}

// DeleteKeys deletes the pages of keys on every member that knows ns and
// returns each member's answer; the error is a *FanoutError when some
// failed, with the replies of all.
func (c *Cluster) DeleteKeys(ctx context.Context, ns *Found, keys [][]byte) ([]Reply[*pb.DeleteResponse], error) {
	return settleAll(gather(ctx, ns.nodes, func(ctx context.Context, n *nodeConn) (*pb.DeleteResponse, error) {
		return call(ctx, c, n.data.Delete, &pb.DeleteRequest{NamespaceId: ns.ID, Keys: keys})
	}))
}
