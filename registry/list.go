package registry

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// list returns the records under the etcd prefix dir, decoded by decode;
// what names one record in messages. A record that does not decode is
// logged and skipped, so that one bad key cannot hide the rest.
func list[T any](ctx context.Context, r *Registry, dir, what string, decode func([]byte) (T, error)) ([]T, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	resp, err := r.cli.Get(ctx, dir, clientv3.WithPrefix())
	if err != nil {
		return nil, r.fail(ctx, "listing "+what+"s", err)
	}
	out := make([]T, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		v, err := decode(kv.Value)
		if err != nil {
			r.log.Warn("skipping malformed "+what+" record", "key", string(kv.Key), "err", err)
			continue
		}
		out = append(out, v)
	}
	return out, nil
}

// getOne reads the value at key under r.call; op names the read in
// errors, and a missing key is an error wrapping ErrNotFound.
func (r *Registry) getOne(ctx context.Context, key, op string) ([]byte, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	resp, err := r.cli.Get(ctx, key)
	if err != nil {
		return nil, r.fail(ctx, op, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("registry: %s: %w", op, ErrNotFound)
	}
	return resp.Kvs[0].Value, nil
}

// decodeJSON decodes one JSON record.
func decodeJSON[T any](b []byte) (T, error) {
	var v T
	err := json.Unmarshal(b, &v)
	return v, err
}
