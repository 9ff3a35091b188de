package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/stratakv/strata/eviction"
)

// The chosen settings over time (issue 44): each store's queue picks its
// half-life and admission rule from miniature simulations
// (eviction/mini.go); strata-sim samples each node's choice at
// plotColumns points of the replay and prints one strip per node and size,
// a letter per column, so that a person can see where it settles.

// plotColumns is how many times a replay samples the nodes' choices.
const plotColumns = 64

// recordChoices samples each node's current choice (its last tier's),
// unless its queues choose none (a fixed half-life, another kind).
func (c *storeCluster) recordChoices() {
	now := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		ch := n.st.Evictor().Choices()
		if len(ch) == 0 || ch[len(ch)-1] == "" {
			return
		}
		now[i] = ch[len(ch)-1]
	}
	if c.out.choices == nil {
		c.out.choices = make([][]string, len(c.nodes))
	}
	for i, ch := range now {
		c.out.choices[i] = append(c.out.choices[i], ch)
	}
}

// choiceLetters is the letter a candidate's strip shows: a, b, c … in
// eviction.Candidates' order.
func choiceLetters() (map[string]byte, string) {
	letters := map[string]byte{}
	var legend []string
	for i, c := range eviction.Candidates() {
		l := byte('a' + i)
		letters[c.String()] = l
		legend = append(legend, fmt.Sprintf("%c %s", l, c))
	}
	return letters, strings.Join(legend, ", ")
}

// writeChoices prints, for each variant whose nodes chose a setting, each
// node's choices over the replay of the first placement, one strip per
// size and node.
func writeChoices(w io.Writer, cfg config, results []result) {
	letters, legend := choiceLetters()
	header := false
	for _, size := range cfg.Sizes {
		for _, v := range cfg.Policies {
			for _, r := range results {
				if r.variant != v.name || r.sizePct != size || r.seed != 0 || len(r.choices) == 0 {
					continue
				}
				if !header {
					fmt.Fprintf(w, "\nchosen setting over the replay, placement 0 (a column per 1/%d of the requests; %s):\n\n", plotColumns, legend)
					fmt.Fprintln(w, "| size | policy | node | choice over time |")
					fmt.Fprintln(w, "|---:|---|---:|---|")
					header = true
				}
				for node, strip := range r.choices {
					b := make([]byte, len(strip))
					for i, c := range strip {
						b[i] = letters[c]
						if b[i] == 0 {
							b[i] = '?'
						}
					}
					fmt.Fprintf(w, "| %g%% | %s | %d | `%s` |\n", size, v.name, node, b)
				}
			}
		}
	}
}
