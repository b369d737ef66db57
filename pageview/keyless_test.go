package pageview

import (
	"testing"

	"github.com/rtmon/rtmon/reconstruct"
)

// keyless makes a transaction as the tracker gives HTTPS without keys: no
// method, URL, status or content type; the host from SNI.
func keyless(conn string, idx int, host string, start, tconn, tserver, ttransfer int64) *reconstruct.Transaction {
	tx := mk(txSpec{conn: conn, idx: idx, start: start, tconn: tconn, tserver: tserver, ttransfer: ttransfer})
	tx.Method, tx.URL, tx.Status, tx.ContentType, tx.Host = "", "", 0, "", host
	tx.Flags |= reconstruct.FlagTLS
	return tx
}

// Keyless HTTPS transactions are grouped by client, host (SNI) and
// timing: a page and its objects over several connections, a beacon
// after its load, the next page
// after the reader's pause, another host's requests apart, a parsed page
// of the same client apart, and a lone request long after as a page of
// its own.
func TestKeylessPageviews(t *testing.T) {
	shop := "shop.example.test"
	p1 := keyless("k1", 0, shop, 0, 80, 60, 40)
	o1 := keyless("k1", 1, shop, 200, 0, 20, 30)
	o2 := keyless("k2", 0, shop, 210, 80, 20, 100)  // a second connection of the page
	beacon := keyless("k2", 1, shop, 800, 0, 10, 5) // 390 ms after the load: a member, after the load
	api := keyless("a1", 0, "api.example.test", 220, 80, 30, 10)
	parsed := html("c1", 0, "/index.html", 230, 80, 40, 20) // cleartext, the same client
	p2 := keyless("k1", 2, shop, 3500, 0, 60, 40)           // the next page after a 3 s pause
	o3 := keyless("k3", 0, shop, 3620, 80, 20, 30)
	late := keyless("k1", 3, shop, 20000, 0, 30, 10) // long after: a page of its own
	c, g := run(t, Config{}, p1, o1, o2, beacon, api, parsed, p2, o3, late)
	first := same(t, c, p1.ID, o1.ID, o2.ID, beacon.ID)
	second := same(t, c, p2.ID, o3.ID)
	ids := map[string]bool{first: true, second: true, c.pv(api.ID): true, c.pv(parsed.ID): true, c.pv(late.ID): true}
	if len(ids) != 5 || ids[""] {
		t.Errorf("pageviews %v: want five apart (two pages, the API host, the parsed page, the late request)", ids)
	}
	pv := c.byID[first]
	if pv.Host != shop || pv.Objects != 2 || pv.AfterLoad != 1 || pv.Connections != 2 || pv.Evidence != "timing" ||
		pv.Flags&reconstruct.FlagTLS == 0 || pv.Start != p1.Start || pv.End != o2.End {
		t.Errorf("first page %+v", pv)
	}
	if s := g.Stats(); s.Pageviews != 5 || s.StandAlone != 0 {
		t.Errorf("stats %+v", s)
	}
}
