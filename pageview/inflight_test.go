package pageview

import (
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/synth"
)

// TestObjectStillConnectingKeepsItsPage is an overloaded server as a
// browser meets it: the page's HTML and one object arrive at once, but the
// other object's connection has its SYNs dropped (a Linux client resends
// one a second) and, once accepted, waits in the server's queue. It ends
// 7.5 s after the page began, long after the page went quiet, while
// another client's traffic moves packet time on. The object belongs to the
// page, which ends with it; without the tracker's view of what is in
// flight, the page closes before the object is complete.
func TestObjectStillConnectingKeepsItsPage(t *testing.T) {
	for _, watch := range []bool{true, false} {
		name := map[bool]string{true: "watching", false: "blind"}[watch]
		t.Run(name, func(t *testing.T) {
			c, g, late := loadBehindSYNDrops(t, watch)
			var page *Pageview
			for _, p := range c.pvs {
				if p.URL == "/index.html" {
					page = p
				}
			}
			if page == nil {
				t.Fatal("no pageview for /index.html")
			}
			inPage := c.tags[late.ID].PageviewID == page.ID
			if inPage != watch {
				t.Errorf("object in the page: %v (stats %+v)", inPage, g.Stats())
			}
			if !watch {
				return
			}
			if page.End != late.End || page.Objects != 2 {
				t.Errorf("page ends %v after its start with %d objects; the late object ends %v after",
					time.Duration(page.End-page.Start), page.Objects, time.Duration(late.End-page.Start))
			}
			for _, tx := range c.txs {
				if tx.Client == late.Client && c.tags[tx.ID].PageviewID != page.ID {
					t.Errorf("%s not in the page", tx.URL)
				}
			}
			if n := g.Stats().AwaitedInFlight; n != 1 {
				t.Errorf("%d pageviews awaited transactions in flight, want 1", n)
			}
		})
	}
}

// loadBehindSYNDrops writes and groups the capture of
// TestObjectStillConnectingKeepsItsPage; it returns the late object.
func loadBehindSYNDrops(t *testing.T, watch bool) (*collector, *Grouper, *reconstruct.Transaction) {
	t.Helper()
	srv := netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), 80)
	browser := netip.MustParseAddr("198.51.100.7")
	other := netip.MustParseAddr("198.51.100.8")
	T := func(ms float64) int64 { return synth.Base + int64(ms*1e6) }
	const ua = "User-Agent: Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0"
	page := []byte(`<!DOCTYPE html><html><head><script src="/a.js"></script></head><body><img src="/b.png"></body></html>`)

	type step struct {
		at int64
		do func()
	}
	var steps []step
	at := func(ms float64, do func()) { steps = append(steps, step{T(ms), do}) }
	path := filepath.Join(t.TempDir(), "overload.pcap")
	if err := synth.WriteFile(path, synth.Options{Nanosecond: true}, func(w *synth.Writer) error {
		// The container and /a.js on a connection each, 20 ms away.
		c1 := w.Conn(netip.AddrPortFrom(browser, 40000), srv, 100, 900)
		at(0, func() { c1.SYN(T(0)) })
		at(0.1, func() { c1.SYNACK(T(0.1)) })
		at(20.1, func() { c1.ACK(T(20.1)) })
		at(20.2, func() { c1.Client(T(20.2), synth.Request("GET", "shop.test", "/index.html", ua, "Accept: text/html")) })
		at(60, func() { c1.Server(T(60), synth.Response(200, "text/html", page)) })
		at(80, func() { c1.ClientAck(T(80)) })
		c2 := w.Conn(netip.AddrPortFrom(browser, 40001), srv, 200, 800)
		at(75, func() { c2.SYN(T(75)) })
		at(75.1, func() { c2.SYNACK(T(75.1)) })
		at(95.1, func() { c2.ACK(T(95.1)) })
		at(95.2, func() {
			c2.Client(T(95.2), synth.Request("GET", "shop.test", "/a.js", ua, "Referer: http://shop.test/index.html"))
		})
		at(130, func() { c2.Server(T(130), synth.Response(200, "text/javascript", []byte("a()"))) })
		at(150, func() { c2.ClientAck(T(150)) })
		// /b.png: six SYNs a second apart before one is answered, then a
		// second and a half in the accept queue and at work.
		c3 := w.Conn(netip.AddrPortFrom(browser, 40002), srv, 300, 700)
		for i := range 6 {
			ms := 76 + 1000*float64(i)
			at(ms, func() { c3.SYN(T(ms)) })
		}
		at(5076.1, func() { c3.SYNACK(T(5076.1)) })
		at(5096.1, func() { c3.ACK(T(5096.1)) })
		at(5096.2, func() {
			c3.Client(T(5096.2), synth.Request("GET", "shop.test", "/b.png", ua, "Referer: http://shop.test/index.html"))
		})
		at(7480, func() { c3.Server(T(7480), synth.Response(200, "image/png", make([]byte, 900))) })
		at(7500, func() { c3.ClientAck(T(7500)) })
		// Another client polls an API on one keep-alive connection.
		c4 := w.Conn(netip.AddrPortFrom(other, 50000), srv, 400, 600)
		at(1, func() { c4.SYN(T(1)) })
		at(1.1, func() { c4.SYNACK(T(1.1)) })
		at(11.1, func() { c4.ACK(T(11.1)) })
		for ms := 12.0; ms < 15000; ms += 250 {
			at(ms, func() { c4.Client(T(ms), synth.Request("GET", "shop.test", "/api/stock")) })
			at(ms+5, func() { c4.Server(T(ms+5), synth.Response(200, "application/json", []byte("{}"))) })
			at(ms+15, func() { c4.ClientAck(T(ms + 15)) })
		}
		slices.SortStableFunc(steps, func(a, b step) int { return int(a.at - b.at) })
		for _, s := range steps {
			s.do()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c, g := groupFile(t, path, !watch, nil)
	for _, tx := range c.txs {
		if tx.URL == "/b.png" {
			if tx.Tconn < int64(5*time.Second) {
				t.Fatalf("/b.png connected in %v, want the 5 s of SYN retries", time.Duration(tx.Tconn))
			}
			return c, g, tx
		}
	}
	t.Fatal("no /b.png transaction")
	return nil, nil, nil
}
