package pageview

import (
	"strings"

	"github.com/rtmon/rtmon/reconstruct"
)

// HTTPS without keys. A TLS transaction the tracker could not decrypt
// carries no URL, method, content type or Referer: only its client, its
// host (the server name the ClientHello gave, SNI) and its times. Such
// transactions are grouped by client, host and timing: one joins the
// client's newest open keyless pageview of the same host when it starts
// within a second of that page's latest end (the page still loading, or
// its load event's favicon and beacons) and within Window of its
// container, and otherwise starts a pageview of its own as the container.
// A member counts in the load if it started within parserSlack of the
// load so far, as an object a parser found. Keyless and parsed pageviews
// never take each other's transactions. The evidence is "timing": a page
// whose next page followed within a second of its end (back-to-back
// navigations, a script-driven reload) merges with it, and a page's
// objects on another host (a CDN name) go to a pageview of that host.

// isKeyless reports whether tx is a turn of TLS records that was not
// parsed: no method, no URL.
func isKeyless(tx *reconstruct.Transaction) bool {
	return tx.Flags&reconstruct.FlagTLS != 0 && tx.Method == "" && tx.URL == ""
}

// placeKeyless puts a keyless transaction of client key (c, nil if new)
// into the client's newest keyless pageview of its host, or opens one.
func (g *Grouper) placeKeyless(c *client, key clientKey, h heldTx) {
	tx := h.tx
	if c == nil {
		c = g.client(key)
	}
	for i := len(c.open) - 1; i >= 0; i-- {
		p := c.open[i]
		if !p.keyless || !strings.EqualFold(p.rec.Host, tx.Host) {
			continue
		}
		if tx.Start >= p.rec.Start && tx.Start <= p.end+int64(loadContinues) && g.canTake(p, tx, true) {
			g.stats.ByWindow++
			g.attach(p, h)
			return
		}
		break // only the host's newest page takes objects
	}
	g.open(c, h)
}
