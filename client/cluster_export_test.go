package client

import "github.com/stratakv/strata/namespace"

// Test-only views into a Cluster, for the external tests.

// ViewChanged is closed when the view the Cluster routes by is replaced.
func (c *Client) ViewChanged() <-chan struct{} { return c.view.Load().changed }

// WaitCache applies the location cache's buffered writes.
func (c *Client) WaitCache() { c.cache.wait() }

// Owner names the node that owns k in the current view.
func (c *Client) Owner(k namespace.Key) string {
	v := c.view.Load()
	return v.ids[v.place.Owner(k)]
}

// Candidates names k's first n placement candidates in the current view,
// best first.
func (c *Client) Candidates(k namespace.Key, n int) []string {
	v := c.view.Load()
	var out []string
	for _, i := range v.place.Candidates(k, make([]int, n)) {
		out = append(out, v.ids[i])
	}
	return out
}
