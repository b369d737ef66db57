package tlswire

// Conn is the two directions of one connection, linked so that the version
// the server's ServerHello selects governs how the client's Stream reads a
// ChangeCipherSpec (see SetVersion). Feed each direction through
// FeedClient and FeedServer; Gap and the other Stream methods are called
// on Client and Server directly. The zero value is ready to use.
type Conn struct {
	Client, Server Stream
	// ClientHello and ServerHello are the last hellos parsed without error
	// in each direction (after a HelloRetryRequest, the second ones).
	ClientHello *ClientHello
	ServerHello *ServerHello
}

// FeedClient feeds bytes sent by the client; see Stream.Feed.
func (c *Conn) FeedClient(data []byte, wireLen int, at int64) []Event {
	evs := c.Client.Feed(data, wireLen, at)
	for i := range evs {
		if ch := evs[i].Handshake.ClientHello; ch != nil && evs[i].Err == nil {
			c.ClientHello = ch
		}
	}
	return evs
}

// FeedServer feeds bytes sent by the server; see Stream.Feed. A ServerHello
// among them sets the client Stream's version.
func (c *Conn) FeedServer(data []byte, wireLen int, at int64) []Event {
	evs := c.Server.Feed(data, wireLen, at)
	for i := range evs {
		if sh := evs[i].Handshake.ServerHello; sh != nil && evs[i].Err == nil {
			c.ServerHello = sh
			c.Client.SetVersion(sh.Version())
		}
	}
	return evs
}

// Resumed reports whether the connection resumed a session (see the
// package function Resumed).
func (c *Conn) Resumed() bool { return Resumed(c.ClientHello, c.ServerHello) }
