package registry

import (
	"context"
	"encoding/json"
	"fmt"
)

// Tenant is an authorization domain (docs/design.md §2, §9): a tenant opens only
// its own namespaces. Its token is never stored, only its SHA-256.
type Tenant struct {
	// Name identifies the tenant; it is a key segment, so no '/'.
	Name string `json:"name"`
	// TokenSHA256 is the SHA-256 of the tenant's bearer token in 64
	// lower-case hex digits.
	TokenSHA256 string `json:"token_sha256"`
	// Admin tenants may see and use every namespace and change tenants
	// (the admin role).
	Admin bool `json:"admin,omitempty"`
	// Quota bounds what the tenant holds on each node; zero fields: no
	// bound.
	Quota Quota `json:"quota,omitzero"`
}

// Quota is a tenant's per-node quota, as every node enforces it.
type Quota struct {
	// Bytes bounds its published pages plus open reservations, all tiers.
	Bytes int64 `json:"bytes,omitempty"`
	// ReserveBytes and Reservations bound its open reservations.
	ReserveBytes int64 `json:"reserve_bytes,omitempty"`
	Reservations int   `json:"reservations,omitempty"`
	// Leases bounds its active leases; MaxLeaseTTLMs caps each one's TTL.
	Leases        int   `json:"leases,omitempty"`
	MaxLeaseTTLMs int64 `json:"max_lease_ttl_ms,omitempty"`
}

// PutTenant creates t or replaces it (rotating its token).
func (r *Registry) PutTenant(ctx context.Context, t Tenant) error {
	if err := validName("tenant", t.Name); err != nil {
		return err
	}
	if err := validHex("token sha256 of tenant "+t.Name, t.TokenSHA256); err != nil {
		return err
	}
	val, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("registry: encoding tenant %s: %w", t.Name, err)
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	if _, err := r.cli.Put(ctx, r.tenantKey(t.Name), string(val)); err != nil {
		return r.fail(ctx, "storing tenant "+t.Name, err)
	}
	return nil
}

// Tenant returns the tenant called name, or an error wrapping ErrNotFound.
func (r *Registry) Tenant(ctx context.Context, name string) (Tenant, error) {
	if err := validName("tenant", name); err != nil {
		return Tenant{}, err
	}
	op := "reading tenant " + name
	val, err := r.getOne(ctx, r.tenantKey(name), op)
	if err != nil {
		return Tenant{}, err
	}
	var t Tenant
	if err := json.Unmarshal(val, &t); err != nil {
		return Tenant{}, fmt.Errorf("registry: %s: decoding: %w", op, err)
	}
	return t, nil
}

// DeleteTenant removes the tenant called name (revoking its token); an
// error wrapping ErrNotFound when there is none.
func (r *Registry) DeleteTenant(ctx context.Context, name string) error {
	if err := validName("tenant", name); err != nil {
		return err
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	resp, err := r.cli.Delete(ctx, r.tenantKey(name))
	if err != nil {
		return r.fail(ctx, "deleting tenant "+name, err)
	}
	if resp.Deleted == 0 {
		return fmt.Errorf("registry: deleting tenant %s: %w", name, ErrNotFound)
	}
	return nil
}

// Tenants returns every tenant, in name order.
func (r *Registry) Tenants(ctx context.Context) ([]Tenant, error) {
	return list(ctx, r, r.tenantsDir(), "tenant", decodeJSON[Tenant])
}
