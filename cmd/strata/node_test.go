package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/stratakv/strata/internal/testing/admintest"
	"github.com/stratakv/strata/node"
)

// testNode is a real node serving on loopback (see admintest) that the
// CLI runs against.
type testNode struct{ *admintest.Node }

// startNode starts a node with its own embedded etcd and the tenants'
// tokens; it closes when the test ends.
func startNode(t *testing.T, tokens map[string]string) *testNode {
	t.Helper()
	return &testNode{admintest.StartOne(t, tokens)}
}

// startNodes starts count nodes from cfg sharing one embedded etcd, joined
// in one gossip cluster (see admintest.StartCluster), sorted by node ID.
func startNodes(t *testing.T, count int, cfg node.Config) (etcd []string, nodes []*testNode) {
	t.Helper()
	etcd, ns := admintest.StartCluster(t, count, cfg)
	for _, n := range ns {
		nodes = append(nodes, &testNode{n})
	}
	return etcd, nodes
}

// strata runs the CLI in-process against addr with env as its environment.
func strata(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newRootCmd(func(k string) string { return env[k] })
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

// run runs the CLI against n and fails the test on an error.
func (n *testNode) run(t *testing.T, args ...string) string {
	t.Helper()
	out, _, err := strata(t, map[string]string{"STRATA_ENDPOINT": n.Addr, "STRATA_TOKEN": n.Token}, args...)
	if err != nil {
		t.Fatalf("strata %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// table splits a table into rows of cells.
func table(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, strings.Fields(line))
	}
	return rows
}

// checkLines checks that each of lines (regular expressions) matches a
// whole line of out, what names out in the failure; indent lets a line
// start with spaces.
func checkLines(t *testing.T, what, out string, indent bool, lines ...string) {
	t.Helper()
	anchor := `(?m)^`
	if indent {
		anchor += `\s*`
	}
	for _, line := range lines {
		if !regexp.MustCompile(anchor + line + `$`).MatchString(out) {
			t.Errorf("%s lacks a line %q:\n%s", what, line, out)
		}
	}
}

// badArgument is a command line and what its error must say.
type badArgument struct {
	args []string
	want string
}

// checkBadArguments runs each command line with env and checks that it
// fails saying what it must.
func checkBadArguments(t *testing.T, env map[string]string, cases []badArgument) {
	t.Helper()
	for _, c := range cases {
		_, _, err := strata(t, env, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("strata %s: err = %v, want %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}
