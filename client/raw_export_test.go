package client

// RawPuts counts the put batches that went over the raw data plane, on
// every node: in one round trip (Put frames) and in two (Reserve, then
// Writes and Commit).
func (c *Client) RawPuts() (oneCall, twoPhase int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nc := range c.conns {
		if s := nc.raw.Load(); s != nil {
			oneCall += s.oneCall.Load()
			twoPhase += s.twoPhase.Load()
		}
	}
	return oneCall, twoPhase
}

// RawLookups counts the lookups answered on the raw data plane, on every
// node.
func (c *Client) RawLookups() int64 {
	return c.sumSessions(func(nc *nodeClient) int64 {
		if s := nc.raw.Load(); s != nil {
			return s.lookups.Load()
		}
		return 0
	})
}

// ShmLookups is how many lookups the client's shm sessions answered.
func (c *Client) ShmLookups() int64 {
	return c.sumSessions(func(nc *nodeClient) int64 {
		if s := nc.shm.Load(); s != nil {
			return s.lookups.Load()
		}
		return 0
	})
}

// sumSessions sums count over the client's node connections.
func (c *Client) sumSessions(count func(*nodeClient) int64) (n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nc := range c.conns {
		n += count(nc)
	}
	return n
}

// ShmRequests is how many requests the client's shm sessions sent, and
// how many put batches went into granted slots.
func (c *Client) ShmRequests() (requests, slotPuts int64) {
	requests = c.sumSessions(func(nc *nodeClient) int64 {
		if s := nc.shm.Load(); s != nil {
			return int64(s.ids.Load())
		}
		return 0
	})
	slotPuts = c.sumSessions(func(nc *nodeClient) int64 {
		if s := nc.shm.Load(); s != nil {
			return s.slotPuts.Load()
		}
		return 0
	})
	return requests, slotPuts
}

// RawPollWindows is how many of the client's polling windows on the raw
// plane found their bytes and how many ran out (transport.ReadPoll); 0, 0
// when it does not poll.
func (c *Client) RawPollWindows() (found, spent uint64) {
	if c.opts.readPoll == nil {
		return 0, 0
	}
	return c.opts.readPoll.Windows()
}

// PinRawVersion makes the client's raw sessions say hello with frame
// protocol version v from their next connection on, as to a node whose
// newest version is v, and closes their idle connections (of the version
// they had).
func (c *Client) PinRawVersion(v uint16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nc := range c.conns {
		s := nc.raw.Load()
		if s == nil {
			continue
		}
		s.version.Store(uint32(v))
		for {
			conn, _ := s.pool.take()
			if conn == nil {
				break
			}
			s.pool.give(conn, true)
		}
	}
}
