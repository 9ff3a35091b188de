package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"
)

func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func TestTenants(t *testing.T) {
	t.Parallel()
	r := openShared(t)
	ctx := ctxFor(t, 10*time.Second)

	if err := r.PutTenant(ctx, Tenant{Name: "beta", TokenSHA256: tokenHash("b1")}); err != nil {
		t.Fatalf("PutTenant beta: %v", err)
	}
	if err := r.PutTenant(ctx, Tenant{Name: "acme", TokenSHA256: tokenHash("a1")}); err != nil {
		t.Fatalf("PutTenant acme: %v", err)
	}
	// Rotating a token replaces the hash.
	if err := r.PutTenant(ctx, Tenant{Name: "acme", TokenSHA256: tokenHash("a2")}); err != nil {
		t.Fatalf("PutTenant acme again: %v", err)
	}
	ts, err := r.Tenants(ctx)
	if err != nil {
		t.Fatalf("Tenants: %v", err)
	}
	want := []Tenant{{Name: "acme", TokenSHA256: tokenHash("a2")}, {Name: "beta", TokenSHA256: tokenHash("b1")}}
	if len(ts) != 2 || ts[0] != want[0] || ts[1] != want[1] {
		t.Fatalf("Tenants = %+v, want %+v", ts, want)
	}
	if got, err := r.Tenant(ctx, "beta"); err != nil || got != want[1] {
		t.Fatalf("Tenant(beta) = %+v, %v", got, err)
	}
	if _, err := r.Tenant(ctx, "gamma"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Tenant(gamma) = %v, want ErrNotFound", err)
	}

	// The clear token never reaches etcd: only 64-hex hashes are accepted.
	for _, bad := range []Tenant{
		{Name: "acme", TokenSHA256: "a2"},
		{Name: "acme", TokenSHA256: "secret-token-secret-token-secret-token-secret-token-secret-token"},
		{Name: "", TokenSHA256: tokenHash("x")},
		{Name: "a/b", TokenSHA256: tokenHash("x")},
	} {
		if err := r.PutTenant(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("PutTenant(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}
