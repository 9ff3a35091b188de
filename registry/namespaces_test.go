package registry

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func hexID(c byte) string { return strings.Repeat(string(c), 64) }

func TestPutNamespaceIdempotentAndConflict(t *testing.T) {
	t.Parallel()
	r := openShared(t)
	ctx := ctxFor(t, 10*time.Second)

	// Bytes that a JSON re-encoding would alter must come back exactly.
	canon := []byte("{\"model\":\"<a&b>\",\"x\":\"\xff\"}")
	rec := NamespaceRecord{ID: hexID('a'), Tenant: "acme", Canonical: canon, CreatedUnixMs: 1000}
	created, err := r.PutNamespace(ctx, rec)
	if err != nil || !created {
		t.Fatalf("first PutNamespace = %v, %v; want created", created, err)
	}
	again := rec
	again.CreatedUnixMs = 2000
	created, err = r.PutNamespace(ctx, again)
	if err != nil || created {
		t.Fatalf("second PutNamespace = %v, %v; want existing", created, err)
	}
	got, err := r.Namespace(ctx, rec.ID)
	if err != nil {
		t.Fatalf("Namespace: %v", err)
	}
	if got.ID != rec.ID || got.Tenant != "acme" || !bytes.Equal(got.Canonical, canon) || got.CreatedUnixMs != 1000 {
		t.Fatalf("Namespace = %+v, want %+v (first creation time kept)", got, rec)
	}

	other := rec
	other.Canonical = []byte(`{"model":"other"}`)
	if _, err := r.PutNamespace(ctx, other); !errors.Is(err, ErrConflict) {
		t.Fatalf("PutNamespace with another descriptor = %v, want ErrConflict", err)
	}
	stolen := rec
	stolen.Tenant = "evil"
	if _, err := r.PutNamespace(ctx, stolen); !errors.Is(err, ErrConflict) {
		t.Fatalf("PutNamespace of the ID by another tenant = %v, want ErrConflict", err)
	}
	if got, err := r.Namespace(ctx, rec.ID); err != nil || !bytes.Equal(got.Canonical, canon) {
		t.Fatalf("after conflicts Namespace = %+v, %v; want the original", got, err)
	}

	// Created time is filled in when zero.
	before := time.Now().UnixMilli()
	if _, err := r.PutNamespace(ctx, NamespaceRecord{ID: hexID('b'), Tenant: "acme", Canonical: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.PutNamespace(ctx, NamespaceRecord{ID: hexID('c'), Tenant: "beta", Canonical: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Namespace(ctx, hexID('b')); err != nil || got.CreatedUnixMs < before {
		t.Fatalf("Namespace b = %+v, %v; want creation time >= %d", got, err, before)
	}

	for _, tc := range []struct {
		tenant string
		want   []string
	}{
		{"", []string{hexID('a'), hexID('b'), hexID('c')}},
		{"acme", []string{hexID('a'), hexID('b')}},
		{"beta", []string{hexID('c')}},
		{"acm", nil},
	} {
		recs, err := r.Namespaces(ctx, tc.tenant)
		if err != nil {
			t.Fatalf("Namespaces(%q): %v", tc.tenant, err)
		}
		var ids []string
		for _, rec := range recs {
			ids = append(ids, rec.ID)
		}
		if strings.Join(ids, ",") != strings.Join(tc.want, ",") {
			t.Errorf("Namespaces(%q) = %v, want %v", tc.tenant, ids, tc.want)
		}
	}

	if err := r.DeleteNamespace(ctx, hexID('a')); err != nil {
		t.Fatalf("DeleteNamespace: %v", err)
	}
	if _, err := r.Namespace(ctx, hexID('a')); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Namespace after delete = %v, want ErrNotFound", err)
	}
	if err := r.DeleteNamespace(ctx, hexID('a')); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second DeleteNamespace = %v, want ErrNotFound", err)
	}
	// After deletion the ID can be registered afresh, even by another tenant.
	if created, err := r.PutNamespace(ctx, stolen); err != nil || !created {
		t.Fatalf("PutNamespace after delete = %v, %v; want created", created, err)
	}
}

func TestNamespaceArgumentsValidated(t *testing.T) {
	t.Parallel()
	r := openShared(t)
	ctx := ctxFor(t, 5*time.Second)
	good := NamespaceRecord{ID: hexID('a'), Tenant: "acme", Canonical: []byte("{}")}
	for name, rec := range map[string]NamespaceRecord{
		"short id":      {ID: "abc", Tenant: "acme", Canonical: []byte("{}")},
		"upper-case id": {ID: strings.ToUpper(hexID('a')), Tenant: "acme", Canonical: []byte("{}")},
		"non-hex id":    {ID: hexID('g'), Tenant: "acme", Canonical: []byte("{}")},
		"no tenant":     {ID: good.ID, Canonical: []byte("{}")},
		"slash tenant":  {ID: good.ID, Tenant: "a/b", Canonical: []byte("{}")},
		"no descriptor": {ID: good.ID, Tenant: "acme"},
	} {
		if _, err := r.PutNamespace(ctx, rec); !errors.Is(err, ErrInvalid) {
			t.Errorf("PutNamespace(%s) = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := r.Namespace(ctx, "nope"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Namespace(bad id) = %v, want ErrInvalid", err)
	}
	if _, err := r.Namespaces(ctx, "a/b"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Namespaces(bad tenant) = %v, want ErrInvalid", err)
	}
	if _, err := r.Namespace(ctx, good.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Namespace(unknown) = %v, want ErrNotFound", err)
	}
}
