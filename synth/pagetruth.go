package synth

import (
	"cmp"
	"net/netip"
	"slices"
)

// PageTruth is the ground truth of one pageview, from its transactions.
type PageTruth struct {
	PageviewID uint64
	Client     netip.Addr
	Host, URL  string // the container's
	// Start is the client-perceived start of the first request of the page
	// (the redirect when there is one, else the container); End is when the
	// last of the container and its embedded objects reached the client
	// (the load event). After-load fetches are outside [Start, End].
	Start, End int64
	// Members are the transactions in the order they were planned:
	// redirect, container, objects, after-load fetches (AfterLoad set).
	Members []TruthRecord
}

// Pageviews groups transaction truth by pageview, in PageviewID order.
func Pageviews(recs []TruthRecord) []PageTruth {
	at := map[uint64]int{}
	var out []PageTruth
	for _, r := range recs {
		i, ok := at[r.PageviewID]
		if !ok {
			i = len(out)
			at[r.PageviewID] = i
			out = append(out, PageTruth{PageviewID: r.PageviewID, Client: r.Client.Addr()})
		}
		p := &out[i]
		p.Members = append(p.Members, r)
		switch {
		case r.AfterLoad:
			continue
		case r.Container:
			p.Host, p.URL = r.Host, r.URL
		}
		if r.Container || r.Redirect {
			if p.Start == 0 || r.Start < p.Start {
				p.Start = r.Start
			}
		}
		p.End = max(p.End, r.End)
	}
	slices.SortFunc(out, func(a, b PageTruth) int { return cmp.Compare(a.PageviewID, b.PageviewID) })
	return out
}
