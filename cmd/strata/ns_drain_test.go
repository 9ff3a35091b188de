package main

import (
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stratakv/strata/internal/testing/testnode"
)

// TestNSDrain: ns drain sets the idle TTL on every fork of a model
// revision (of one tenant with --tenant), and on no other namespace.
func TestNSDrain(t *testing.T) {
	c := newCluster(t)
	acme, fork := hex.EncodeToString(c.acme), hex.EncodeToString(c.fork)
	var doc nsDrainJSON
	out := c.run(t, "ns", "drain", "--model", "llama-3-8b", "--revision", "r1", "--tenant", "acme", "--ttl", "30m", "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("ns drain -o json: %v\n%s", err, out)
	}
	var ids []string
	for _, n := range doc.Namespaces {
		if n.Tenant != "acme" || n.Revision != "r1" || n.Nodes != 1 {
			t.Errorf("ns drain drained %+v", n)
		}
		ids = append(ids, n.ID)
	}
	slices.Sort(ids)
	want := []string{acme, fork}
	slices.Sort(want)
	if !slices.Equal(ids, want) || doc.TTLMs != 30*60*1000 {
		t.Fatalf("ns drain: namespaces %v ttl %dms, want %v (acme and its fork, not beta) at 30m", ids, doc.TTLMs, want)
	}
	// The TTL is set: clearing it reports it as the previous one.
	var ttl nsTTLJSON
	if err := json.Unmarshal([]byte(c.run(t, "ns", "ttl", fork, "0", "-o", "json")), &ttl); err != nil ||
		len(ttl.Nodes) != 1 || ttl.Nodes[0].PreviousTTLMs != 30*60*1000 {
		t.Fatalf("the fork's TTL after ns drain: %+v, %v", ttl, err)
	}
	// Every revision but r0: all three namespaces of the model, both tenants.
	if out := c.run(t, "ns", "drain", "--model", "llama-3-8b", "--keep-revision", "r0", "--ttl", "0"); !strings.HasSuffix(out,
		"idle TTL cleared on 3 namespace(s)\n") {
		t.Fatalf("ns drain --keep-revision r0:\n%s", out)
	}
}

func TestNSDrainBadArguments(t *testing.T) {
	env := map[string]string{"STRATA_ENDPOINT": testnode.ClosedAddr(t)}
	checkBadArguments(t, env, []badArgument{
		{[]string{"ns", "drain", "--model", "m", "--revision", "r"}, `required flag(s) "ttl" not set`},
		{[]string{"ns", "drain", "--revision", "r", "--ttl", "1m"}, "needs --model and exactly one of --revision or --keep-revision"},
		{[]string{"ns", "drain", "--model", "m", "--ttl", "1m"}, "exactly one of --revision or --keep-revision"},
		{[]string{"ns", "drain", "--model", "m", "--revision", "a", "--keep-revision", "b", "--ttl", "1m"}, "exactly one of"},
		{[]string{"ns", "drain", "--model", "m", "--revision", "a", "--ttl", "soon"}, `"soon" is not a duration`},
	})
}
