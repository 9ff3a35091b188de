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
func (s *Server) open() bool { return len(s.cfg.Tokens) == 0 && s.cfg.AdminTokenHash == "" }

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
	if s.cfg.AdminTokenHash != "" && h == s.cfg.AdminTokenHash {
		return caller{admin: true}, nil
	}
	tenant, ok := s.cfg.Tokens[h]
	if !ok {
		return caller{}, errUnauthenticated
	}
	return caller{tenant: tenant}, nil
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
