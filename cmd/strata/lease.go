package main

import "github.com/spf13/cobra"

func newLeaseCmd(g *globals) *cobra.Command {
	return newGroupCmd("lease", "Inspect the read leases that pin pages", newLeaseLsCmd(g))
}
