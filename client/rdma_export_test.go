package client

// RDMAPages is how many pages the client's gets read over the rdma plane,
// on every node.
func (c *Client) RDMAPages() int64 {
	return c.sumSessions(func(nc *nodeClient) int64 {
		if s := nc.rdma.Load(); s != nil {
			return s.pages.Load()
		}
		return 0
	})
}
