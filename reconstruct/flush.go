package reconstruct

import "net/netip"

// Flush ends every open connection, marking unfinished records incomplete.
// Call it at end of input.
func (t *Tracker) Flush() {
	for t.lru.next != &t.lru {
		t.finish(t.lru.next, FlagIncomplete)
	}
}

// FlushGroups ends every open connection as Flush does, one group at a
// time: group names a connection's group (0 to n-1) from its endpoints,
// each group's connections end in the order Flush would end them, and
// done(g) runs once group g's have. A pipeline whose later stages are
// split by client can so hand on the records of one part of the clients
// before ending the next, instead of holding what every open connection
// left at once: at the end of a capture with millions open, that doubled
// the memory the connections themselves had taken.
func (t *Tracker) FlushGroups(n int, group func(client netip.Addr, cport uint16, server netip.Addr, sport uint16) int, done func(g int)) {
	groups := make([][]*conn, n)
	for c := t.lru.next; c != &t.lru; c = c.next {
		g := group(c.rec.Client(), c.rec.ClientPort, c.rec.Server(), c.rec.ServerPort)
		if g < 0 || g >= n {
			g = 0
		}
		groups[g] = append(groups[g], c)
	}
	for g, cs := range groups {
		for i, c := range cs {
			cs[i] = nil
			if c.next != nil { // not ended already by another's end
				t.finish(c, FlagIncomplete)
			}
		}
		groups[g] = nil
		done(g)
	}
}
