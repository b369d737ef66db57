package export

// The parts a record's response time is made of, in the order they happen.
// A record's parts add up to its Total (reconstruct and pageview keep that
// invariant), which is why their means make a stacked bar and their sums a
// breakdown. This is the one list: the summary here, the store's queryable
// columns and the web's breakdown all read it.

// TransactionParts names reconstruct.Transaction's parts: Tconn, Ttls,
// Trequest, Tserver, Ttransfer.
func TransactionParts() []string {
	return []string{"tconn", "ttls", "trequest", "tserver", "ttransfer"}
}

// PageviewParts names pageview.Pageview's parts: Tconn, Tserver, Ttransfer,
// Tother.
func PageviewParts() []string { return []string{"tconn", "tserver", "ttransfer", "tother"} }
