package pageview

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"testing"

	"github.com/rtmon/rtmon/reconstruct"
)

type nullSink struct{ pvs, txs int }

func (*nullSink) Connection(*reconstruct.Connection)     {}
func (n *nullSink) Transaction(*reconstruct.Transaction) { n.txs++ }
func (n *nullSink) Pageview(*Pageview)                   { n.pvs++ }

type benchRec struct {
	tx   *reconstruct.Transaction
	conn *reconstruct.Connection
	at   int64
}

// benchChunk makes pageviews first..first+n-1: 5000 clients, a container and
// ten objects (with Referer) over four connections each, 2 ms apart, and
// returns them with their connection records in completion order.
func benchChunk(first, n int) []benchRec {
	var recs []benchRec
	for i := first; i < first+n; i++ {
		ci := i % 5000
		client := netip.AddrFrom4([4]byte{10, byte(ci >> 16), byte(ci >> 8), byte(ci)})
		ua := "Mozilla/5.0 bench " + strconv.Itoa(ci%7)
		t0 := base + int64(i)*2*ms
		page := "/p/" + strconv.Itoa(i%997) + "/index.html"
		ref := "http://www.example.com" + page
		pfx := strconv.Itoa(i) + "-"
		end := t0
		for k := range 11 {
			conn := pfx + strconv.Itoa(k%4)
			tx := &reconstruct.Transaction{ID: conn + "-" + strconv.Itoa(k/4), ConnectionID: conn, Index: k / 4,
				Client: client, Server: srv, ServerPort: 80, Method: "GET", Host: "www.example.com",
				UserAgent: ua, Status: 200, ResponseBytes: 5000}
			if k == 0 {
				tx.URL, tx.ContentType, tx.Start = page, "text/html", t0
				tx.Tconn, tx.Tserver, tx.Ttransfer = 100*ms, 150*ms, 50*ms
			} else {
				tx.URL, tx.ContentType, tx.Referer = "/img/"+strconv.Itoa(k)+".png", "image/png", ref
				tx.Start = t0 + 250*ms + int64(k)*15*ms
				if k < 4 {
					tx.Tconn = 100 * ms
				}
				tx.Tserver, tx.Ttransfer = 20*ms, int64(k)*5*ms
			}
			tx.Total = tx.Tconn + tx.Tserver + tx.Ttransfer
			tx.End = tx.Start + tx.Total
			tx.RequestFirst, tx.ResponseLast = tx.Start, tx.End
			end = max(end, tx.End)
			recs = append(recs, benchRec{tx: tx, at: tx.End})
		}
		for k := range 4 {
			recs = append(recs, benchRec{conn: &reconstruct.Connection{ID: pfx + strconv.Itoa(k), Client: client,
				LastSeen: end + 5000*ms}, at: end + 5000*ms})
		}
	}
	slices.SortStableFunc(recs, func(a, b benchRec) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	return recs
}

// BenchmarkGrouper reports the cost per transaction (ns/op) of grouping a
// steady population: ~250 overlapping pageviews, 11 transactions each.
func BenchmarkGrouper(b *testing.B) {
	classes, err := ParseClasses([]byte(sample))
	if err != nil {
		b.Fatal(err)
	}
	sink := &nullSink{}
	g := NewGrouper(Config{}, classes, sink)
	const perChunk = 10000 // pageviews
	var recs []benchRec
	next, pos := 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		if pos == len(recs) {
			b.StopTimer()
			recs, pos = benchChunk(next, perChunk), 0
			next += perChunk
			b.StartTimer()
		}
		r := recs[pos]
		pos++
		if r.tx != nil {
			g.Transaction(r.tx)
			done++
		} else {
			g.Connection(r.conn)
		}
	}
	g.Flush()
	b.StopTimer()
	if s := g.Stats(); s.StandAlone != 0 && b.N > 10000 {
		b.Errorf("stand-alone transactions: %+v", s)
	}
	b.ReportMetric(float64(sink.pvs), "pageviews")
}

// BenchmarkAPIClient: one service client's keep-alive JSON requests
// without Referer, 25,000 and 100,000 of them; per-request cost must not
// grow with their number (compare ns/op per request of the two).
func BenchmarkAPIClient(b *testing.B) {
	for _, n := range []int{25_000, 100_000} {
		txs := make([]*reconstruct.Transaction, n)
		for i := range txs {
			txs[i] = mk(txSpec{conn: "api", idx: i, url: fmt.Sprintf("/v1/items/%d", i), ct: "application/json",
				ua: "svc/1.0", start: int64(i), tserver: 5, ttransfer: 1}) // 1,000 requests a second
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				g := NewGrouper(Config{}, nil, &nullSink{})
				for _, tx := range txs {
					g.Transaction(tx)
				}
				g.Flush()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/request")
		})
	}
}
