package main

import "github.com/spf13/cobra"

func newClusterCmd(g *globals) *cobra.Command {
	return newGroupCmd("cluster", "Inspect the cluster as a whole", newClusterStatusCmd(g))
}
