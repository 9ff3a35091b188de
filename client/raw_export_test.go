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
