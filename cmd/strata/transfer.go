package main

import "github.com/spf13/cobra"

func newTransferCmd(g *globals) *cobra.Command {
	return newGroupCmd("transfer", "Inspect the prefill-decode transfer rooms", newTransferLsCmd(g))
}
