package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"google.golang.org/grpc/metadata"
)

// caller is who sent a request.
type caller struct {
	tenant string // the token's tenant; "" in open mode or for the admin
	admin  bool   // may see and use every namespace
}

// HashToken returns the SHA-256 hex of a token, the form Config.Tokens
// holds, so tokens never sit in memory or config in clear.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// open reports whether the node checks no tokens: every caller is admin.
func (s *Server) open() bool {
	t := s.tokenMap.Load()
	return len(t.tenants) == 0 && len(t.admins) == 0 && s.cfg.AdminTokenHash == ""
}

// tokenSet is the tokens in force, by SHA-256 hex.
type tokenSet struct {
	tenants map[string]string // to their tenant
	admins  map[string]bool   // admin tokens besides Config.AdminTokenHash
}

// tokens is the tenant tokens in force: Config.Tokens, or what SetTokens
// last set.
func (s *Server) tokens() map[string]string { return s.tokenMap.Load().tenants }

// SetTokens replaces the tenant tokens (SHA-256 hex to tenant, as
// Config.Tokens) and the admin tokens besides Config.AdminTokenHash
// (SHA-256 hex): a token no longer there is refused from the next request
// on, on every plane (a raw or shm connection authenticated with it is
// refused its next request too). A node left with no token at all is open.
func (s *Server) SetTokens(tenants map[string]string, admins []string) {
	t := &tokenSet{tenants: make(map[string]string, len(tenants)), admins: make(map[string]bool, len(admins))}
	for h, name := range tenants {
		t.tenants[h] = name
	}
	for _, h := range admins {
		t.admins[h] = true
	}
	s.tokenMap.Store(t)
}

// authenticate finds who holds a bearer token, whatever the transport: the
// admin, a tenant, or (the node being open) the admin for anyone.
func (s *Server) authenticate(tok string) (caller, error) {
	if s.open() {
		return caller{admin: true}, nil
	}
	if tok == "" {
		return caller{}, fmt.Errorf("no token: %w", errUnauthenticated)
	}
	h := HashToken(tok)
	if (s.cfg.AdminTokenHash != "" && h == s.cfg.AdminTokenHash) || s.tokenMap.Load().admins[h] {
		return caller{admin: true}, nil
	}
	tenant, ok := s.tokens()[h]
	if !ok {
		return caller{}, errUnauthenticated
	}
	return caller{tenant: tenant}, nil
}

// stillValid reports whether the token (hashed) a connection authenticated
// c with still stands: a tenant's token removed by SetTokens since is
// refused.
func (s *Server) stillValid(c caller, tokenHash string) error {
	t := s.tokenMap.Load()
	switch {
	case c.admin && (s.open() || (tokenHash != "" && tokenHash == s.cfg.AdminTokenHash) || t.admins[tokenHash]):
		return nil
	case !c.admin && t.tenants[tokenHash] == c.tenant:
		return nil
	}
	return fmt.Errorf("the connection's token was revoked: %w", errUnauthenticated)
}

// callerOf authenticates a gRPC request by its "authorization: Bearer"
// header.
func (s *Server) callerOf(ctx context.Context) (caller, error) {
	if s.open() {
		return caller{admin: true}, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return caller{}, fmt.Errorf("no authorization header: %w", errUnauthenticated)
	}
	tok, ok := strings.CutPrefix(vals[0], "Bearer ")
	if !ok {
		return caller{}, fmt.Errorf("authorization header is not a bearer token: %w", errUnauthenticated)
	}
	return s.authenticate(tok)
}

// mayUse reports whether c may use a namespace of tenant.
func (c caller) mayUse(tenant string) error {
	if c.admin || c.tenant == tenant {
		return nil
	}
	return fmt.Errorf("tenant %q may not use a namespace of tenant %q: %w", c.tenant, tenant, errDenied)
}
