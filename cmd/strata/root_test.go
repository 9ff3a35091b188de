package main

import (
	"strings"
	"testing"
	"time"
)

func TestUnreachable(t *testing.T) {
	addr := closedAddr(t)
	start := time.Now()
	_, _, err := strata(t, nil, "ns", "ls", "--endpoint", addr, "--timeout", "3s")
	if err == nil {
		t.Fatal("ns ls against a closed port: no error")
	}
	for _, want := range []string{"cannot reach a strata node at " + addr, "connection refused",
		"is stratad running? start one with: go run ./cmd/stratad"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if d := time.Since(start); d >= 3*time.Second {
		t.Errorf("failing took %s; want it before the deadline", d)
	}
}

func TestEndpointFromEnv(t *testing.T) {
	addr := closedAddr(t)
	_, _, err := strata(t, map[string]string{"STRATA_ENDPOINT": addr}, "ns", "ls")
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Errorf("err = %v, want one naming %s", err, addr)
	}
}

func TestTokens(t *testing.T) {
	n := startNode(t, map[string]string{"acme-token": "acme", "beta-token": "beta"})
	n.token = "acme-token"
	n.open(t, descriptor("acme"))
	n.token = "beta-token"
	n.open(t, descriptor("beta"))

	env := map[string]string{"STRATA_ENDPOINT": n.addr}
	_, _, err := strata(t, env, "ns", "ls")
	if err == nil || !strings.Contains(err.Error(), "requires a token: pass --token or set STRATA_TOKEN") {
		t.Errorf("no token: err = %v", err)
	}
	_, _, err = strata(t, env, "ns", "ls", "--token", "wrong")
	if err == nil || !strings.Contains(err.Error(), "does not accept this token") {
		t.Errorf("wrong token: err = %v", err)
	}

	// The token from the environment, then the flag over it: each tenant
	// sees only its own namespace.
	env["STRATA_TOKEN"] = "acme-token"
	for _, c := range []struct {
		args   []string
		tenant string
	}{
		{[]string{"ns", "ls"}, "acme"},
		{[]string{"ns", "ls", "--token", "beta-token"}, "beta"},
	} {
		out, _, err := strata(t, env, c.args...)
		if err != nil {
			t.Fatalf("strata %s: %v", strings.Join(c.args, " "), err)
		}
		if rows := table(out); len(rows) != 2 || rows[1][1] != c.tenant {
			t.Errorf("strata %s: %q, want only %s's namespace", strings.Join(c.args, " "), rows, c.tenant)
		}
	}
}

func TestTokenNotInHelp(t *testing.T) {
	out, _, err := strata(t, map[string]string{"STRATA_TOKEN": "s3cret"}, "--help")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "s3cret") {
		t.Errorf("--help prints the token:\n%s", out)
	}
}

// TestBadArguments covers mistakes caught before any call; the endpoint is
// closed, so reaching the node would be a different error.
func TestBadArguments(t *testing.T) {
	env := map[string]string{"STRATA_ENDPOINT": closedAddr(t)}
	key := strings.Repeat("ab", 32)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ns", "ls", "-o", "yaml"}, `unknown output format "yaml"`},
		{[]string{"ns", "ls", "--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"ns", "show", "xyz"}, `"xyz" is not a namespace id or id prefix`},
		{[]string{"ns", "show"}, "accepts 1 arg(s), received 0"},
		{[]string{"ns", "bogus"}, `unknown command "bogus" for "strata ns"`},
		{[]string{"keys", "ls", "ab", "--after", "abc"}, `--after: "abc" is not a page key`},
		{[]string{"keys", "ls", "ab", "--limit", "-1"}, "--limit must not be negative"},
		{[]string{"keys", "stat", "ab", key, "12"}, `"12" is not a page key: want 64 hex digits`},
		{[]string{"keys", "stat", "ab"}, "requires at least 2 arg(s)"},
	} {
		_, _, err := strata(t, env, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("strata %s: err = %v, want %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

func TestGroupPrintsHelp(t *testing.T) {
	out, _, err := strata(t, nil, "keys")
	if err != nil || !strings.Contains(out, "ls") || !strings.Contains(out, "stat") {
		t.Errorf("strata keys: err %v, output:\n%s", err, out)
	}
}
