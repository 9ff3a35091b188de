package client

// RawPuts counts the put batches that went over the raw data plane: in one
// round trip (Put frames) and in two (Reserve, then Writes and Commit).
func (c *Client) RawPuts() (oneCall, twoPhase int64) {
	s := c.raw.Load()
	if s == nil {
		return 0, 0
	}
	return s.oneCall.Load(), s.twoPhase.Load()
}

// RawLookups counts the lookups answered on the raw data plane.
func (c *Client) RawLookups() int64 {
	if s := c.raw.Load(); s != nil {
		return s.lookups.Load()
	}
	return 0
}
