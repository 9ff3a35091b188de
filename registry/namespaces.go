package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// NamespaceRecord is a registered namespace. The registry treats the
// descriptor as opaque bytes: it stores them exactly and compares them
// byte for byte.
type NamespaceRecord struct {
	// ID is the namespace ID in 64 lower-case hex digits (SHA-256 of
	// Canonical, computed by package namespace).
	ID string `json:"id"`
	// Tenant owns the namespace; only it may open it.
	Tenant string `json:"tenant"`
	// Canonical is the descriptor's canonical encoding (base64 in etcd's
	// JSON, so that it round-trips byte-exactly).
	Canonical []byte `json:"canonical"`
	// CreatedUnixMs is when the namespace was first registered; PutNamespace
	// fills it in if zero.
	CreatedUnixMs int64 `json:"created_unix_ms"`
}

// PutNamespace registers rec if its ID is not registered yet, in one etcd
// transaction, and reports whether it did. Registering the same record
// again is a no-op (created false); the stored record, including its
// creation time, is kept. If the ID is registered with a different
// descriptor or tenant it fails with an error wrapping ErrConflict.
func (r *Registry) PutNamespace(ctx context.Context, rec NamespaceRecord) (created bool, err error) {
	if err := validHex("namespace id", rec.ID); err != nil {
		return false, err
	}
	if err := validName("tenant", rec.Tenant); err != nil {
		return false, err
	}
	if len(rec.Canonical) == 0 {
		return false, fmt.Errorf("registry: namespace %s has an empty descriptor: %w", rec.ID, ErrInvalid)
	}
	if rec.CreatedUnixMs == 0 {
		rec.CreatedUnixMs = time.Now().UnixMilli()
	}
	val, err := json.Marshal(rec)
	if err != nil {
		return false, fmt.Errorf("registry: encoding namespace %s: %w", rec.ID, err)
	}

	op := "registering namespace " + rec.ID
	ctx, cancel := r.call(ctx)
	defer cancel()
	key, idx := r.namespaceKey(rec.Tenant, rec.ID), r.namespaceIDKey(rec.ID)
	resp, err := r.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(idx), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val)), clientv3.OpPut(idx, rec.Tenant)).
		Else(clientv3.OpGet(idx), clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return false, r.fail(ctx, op, err)
	}
	if resp.Succeeded {
		return true, nil
	}

	idxKvs := resp.Responses[0].GetResponseRange().GetKvs()
	recKvs := resp.Responses[1].GetResponseRange().GetKvs()
	if len(idxKvs) == 1 && string(idxKvs[0].Value) != rec.Tenant {
		return false, fmt.Errorf("registry: %s: already registered by tenant %q, not %q: %w",
			op, idxKvs[0].Value, rec.Tenant, ErrConflict)
	}
	if len(idxKvs) != 1 || len(recKvs) != 1 {
		return false, fmt.Errorf("registry: %s: record and id index disagree (index %d, record %d keys): %w",
			op, len(idxKvs), len(recKvs), ErrConflict)
	}
	old, err := decodeNamespace(recKvs[0].Value)
	if err != nil {
		return false, fmt.Errorf("registry: %s: %w", op, err)
	}
	if !bytes.Equal(old.Canonical, rec.Canonical) {
		return false, fmt.Errorf("registry: %s: already registered with a different descriptor: %w", op, ErrConflict)
	}
	return false, nil
}

// Namespaces returns the namespaces of tenant, or of every tenant if tenant
// is "", ordered by tenant then ID.
func (r *Registry) Namespaces(ctx context.Context, tenant string) ([]NamespaceRecord, error) {
	dir := r.namespacesDir()
	if tenant != "" {
		if err := validName("tenant", tenant); err != nil {
			return nil, err
		}
		dir += tenant + "/"
	}
	return list(ctx, r, dir, "namespace", decodeNamespace)
}

// Namespace returns the namespace registered under id, or an error wrapping
// ErrNotFound.
func (r *Registry) Namespace(ctx context.Context, id string) (NamespaceRecord, error) {
	if err := validHex("namespace id", id); err != nil {
		return NamespaceRecord{}, err
	}
	op := "reading namespace " + id
	ctx, cancel := r.call(ctx)
	defer cancel()
	tenant, _, err := r.namespaceTenant(ctx, id)
	if err != nil {
		return NamespaceRecord{}, r.fail(ctx, op, err)
	}
	if tenant == "" {
		return NamespaceRecord{}, fmt.Errorf("registry: %s: %w", op, ErrNotFound)
	}
	val, err := r.getOne(ctx, r.namespaceKey(tenant, id), op) // ErrNotFound: deleted between the two reads
	if err != nil {
		return NamespaceRecord{}, err
	}
	rec, err := decodeNamespace(val)
	if err != nil {
		return NamespaceRecord{}, fmt.Errorf("registry: %s: %w", op, err)
	}
	return rec, nil
}

// DeleteNamespace removes the namespace registered under id, or fails with
// an error wrapping ErrNotFound. It removes only the record: pages on nodes
// are the nodes' business.
func (r *Registry) DeleteNamespace(ctx context.Context, id string) error {
	if err := validHex("namespace id", id); err != nil {
		return err
	}
	op := "deleting namespace " + id
	ctx, cancel := r.call(ctx)
	defer cancel()
	tenant, rev, err := r.namespaceTenant(ctx, id)
	if err != nil {
		return r.fail(ctx, op, err)
	}
	if tenant == "" {
		return fmt.Errorf("registry: %s: %w", op, ErrNotFound)
	}
	idx := r.namespaceIDKey(id)
	resp, err := r.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(idx), "=", rev)).
		Then(clientv3.OpDelete(idx), clientv3.OpDelete(r.namespaceKey(tenant, id))).
		Commit()
	if err != nil {
		return r.fail(ctx, op, err)
	}
	if !resp.Succeeded {
		// Deleted (and maybe re-created) since we read the index.
		return fmt.Errorf("registry: %s: changed concurrently: %w", op, ErrNotFound)
	}
	return nil
}

// namespaceTenant reads the id index: the tenant owning id ("" if none)
// and the index key's mod revision.
func (r *Registry) namespaceTenant(ctx context.Context, id string) (string, int64, error) {
	resp, err := r.cli.Get(ctx, r.namespaceIDKey(id))
	if err != nil {
		return "", 0, err
	}
	if len(resp.Kvs) == 0 {
		return "", 0, nil
	}
	return string(resp.Kvs[0].Value), resp.Kvs[0].ModRevision, nil
}

func decodeNamespace(val []byte) (NamespaceRecord, error) {
	var rec NamespaceRecord
	if err := json.Unmarshal(val, &rec); err != nil {
		return rec, fmt.Errorf("decoding namespace record: %w", err)
	}
	return rec, nil
}
