package main

import "github.com/spf13/cobra"

func newKeysCmd(g *globals) *cobra.Command {
	return newGroupCmd("keys", "Inspect and delete the page keys of a namespace", newKeysLsCmd(g), newKeysStatCmd(g), newKeysRmCmd(g))
}
