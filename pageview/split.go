package pageview

// Split returns the configuration for one of n Groupers that share c's
// bounds (the client shards of a sharded pipeline): each gets 1/n of the
// bounds on what all clients hold together, so the n hold no more than one
// Grouper with c would. The bounds per client and per pageview stay.
func (c Config) Split(n int) Config {
	if n <= 1 {
		return c
	}
	out := c.withDefaults()
	for _, v := range []*int{&out.MaxHeld, &out.MaxOpen, &out.MaxMembers, &out.MaxOrphans, &out.MaxPending, &out.MaxConnCache} {
		*v = max(1, *v/n)
	}
	return out
}
