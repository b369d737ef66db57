package reconstruct

// Split returns the configuration for one of n trackers that share c's
// bounds (a sharded pipeline's workers): each gets 1/n of the connection
// table, the memory and the header and body budgets, so together they hold
// no more than one tracker with c would. Per-connection bounds stay.
func (c Config) Split(n int) Config {
	if n <= 1 {
		return c
	}
	out := c.withDefaults()
	out.MaxConnections = max(1, out.MaxConnections/n)
	out.MaxHeaderBudget = max(out.MaxHeaderBytes, out.MaxHeaderBudget/n)
	if out.MaxBodyBudget > 0 {
		out.MaxBodyBudget = max(1, out.MaxBodyBudget/n)
	}
	if out.MaxMemory > 0 {
		out.MaxMemory = max(1, out.MaxMemory/int64(n))
	}
	return out
}

// Add adds o's counters to s: the trackers of a sharded pipeline are
// reported as one.
func (s *Stats) Add(o Stats) {
	s.Packets += o.Packets
	s.Connections += o.Connections
	s.MidStream += o.MidStream
	s.Closed += o.Closed
	s.Expired += o.Expired
	s.Evicted += o.Evicted
	s.Transactions += o.Transactions
	s.RetransSegments += o.RetransSegments
	s.OutOfOrderSegments += o.OutOfOrderSegments
	s.Holes += o.Holes
	s.HoleBytes += o.HoleBytes
	s.ParseDesyncs += o.ParseDesyncs
	s.TLSConnections += o.TLSConnections
	s.HTTP2Connections += o.HTTP2Connections
	s.TLSFramingLost += o.TLSFramingLost
	s.TLSEarlyData += o.TLSEarlyData
	s.TLSEarlyRejected += o.TLSEarlyRejected
	s.TLSDecrypted += o.TLSDecrypted
	s.TLSKeyLate += o.TLSKeyLate
	s.TLSKeyless += o.TLSKeyless
	s.TLSNoKey += o.TLSNoKey
	s.TLSDecryptErrors += o.TLSDecryptErrors
	s.OutOfWindow += o.OutOfWindow
	s.StrayResets += o.StrayResets
	s.BufferOverflows += o.BufferOverflows
	s.PendingOverflows += o.PendingOverflows
	s.AwaitingOverflows += o.AwaitingOverflows
	s.DuplicateSYNs += o.DuplicateSYNs
	s.HeadersCut += o.HeadersCut
	s.HeaderBytesHeld += o.HeaderBytesHeld
	s.HandshakeTimesDropped += o.HandshakeTimesDropped
	s.BodiesCut += o.BodiesCut
	s.OpenConnections += o.OpenConnections
	s.MemoryInUse += o.MemoryInUse
	s.MemoryEvictions += o.MemoryEvictions
}
