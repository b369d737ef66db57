package stitch

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/chtest"
)

// A page split over two front ends on a busy client: the container on
// fe-a, its three declared objects and the undeclared favicon on fe-b,
// the objects starting 360 ms and more after the container ended (later
// than any timing slack allows for an object the HTML did not name). An
// image a script inserted follows the container on fe-a: after the load
// as fe-a sees it, within it as the whole page shows.
const (
	evPage = "http://www.example.com/index.html"
	evBody = `<html><head><script src="/app.js"></script></head>` +
		`<body><img src="/a.png"><img src="/b.png"></body></html>`
)

var (
	evClient = netip.MustParseAddr("10.1.0.7")
	evServer = netip.MustParseAddr("10.2.0.1")
	evT0     = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano()
)

// evTx is a transaction of connection conn starting at start ms (a fresh
// connection's first: 10 ms to connect), served in 20 ms and sent in 10.
func evTx(conn string, idx int, url, ct, dest string, start int64) *reconstruct.Transaction {
	ms := int64(time.Millisecond)
	tx := &reconstruct.Transaction{ID: conn + "-" + string(rune('0'+idx)), ConnectionID: conn, Index: idx,
		Client: evClient, ClientPort: 40000, Server: evServer, ServerPort: 80, Start: evT0 + start*ms,
		Tserver: 20 * ms, Ttransfer: 10 * ms, Method: "GET", Host: "www.example.com", URL: url, Status: 200,
		ContentType: ct, UserAgent: "Chromium", SecFetchDest: dest, ResponseBytes: 1000}
	if url != "/index.html" {
		tx.Referer = evPage
	}
	if idx == 0 {
		tx.Tconn = 10 * ms
	}
	tx.Total = tx.Tconn + tx.Tserver + tx.Ttransfer
	tx.End = tx.Start + tx.Total
	tx.RequestFirst, tx.RequestLast = tx.Start+tx.Tconn, tx.Start+tx.Tconn
	tx.ResponseFirst, tx.ResponseLast, tx.ResponseAcked = tx.RequestLast+tx.Tserver, tx.End, tx.End
	return tx
}

// evItems are the page's records in the order a tracker emits them.
func evItems() []item {
	cont := evTx("a1", 0, "/index.html", "text/html", "document", 0)
	cont.Body = []byte(evBody)
	txs := []*reconstruct.Transaction{cont, evTx("a1", 1, "/late.png", "image/png", "image", 300),
		evTx("b1", 0, "/app.js", "application/javascript", "script", 400),
		evTx("b1", 1, "/a.png", "image/png", "image", 450),
		evTx("b1", 2, "/b.png", "image/png", "image", 500),
		evTx("b2", 0, "/favicon.ico", "image/x-icon", "image", 700)}
	var items []item
	for _, tx := range txs {
		items = append(items, item{tx: tx})
	}
	for _, id := range []string{"a1", "b1", "b2"} {
		first, last := int64(1<<62), int64(0)
		for _, tx := range txs {
			if tx.ConnectionID == id {
				first, last = min(first, tx.Start), max(last, tx.End)
			}
		}
		items = append(items, item{conn: &reconstruct.Connection{ID: id, Client: evClient, ClientPort: 40000,
			Server: evServer, ServerPort: 80, FirstSeen: first, LastSeen: last, Transactions: 1}})
	}
	return items
}

// evSensor puts connection a1 on fe-a, the others on fe-b.
func evSensor(conn string) string {
	if conn == "a1" {
		return "fe-a"
	}
	return "fe-b"
}

// evStitched stores each sensor's grouping of evItems into the store at
// url, stitches them and returns the stitched pageview as stored and one
// sensor's grouping of all.
func evStitched(t *testing.T, url string) (*store.PageviewDetail, store.Batch) {
	t.Helper()
	b := group(copyItems(evItems()))
	if len(b.Pageviews) != 1 {
		t.Fatalf("one sensor makes %d pageviews, want 1", len(b.Pageviews))
	}
	want := b.Pageviews[0]
	if want.Objects != 4 || want.AfterLoad != 1 || want.Evidence != "html" {
		t.Fatalf("one sensor's pageview: %d objects, %d after load, evidence %s; the test needs 4, 1, html",
			want.Objects, want.AfterLoad, want.Evidence)
	}
	per := map[string][]item{}
	for _, it := range evItems() {
		per[evSensor(it.connID())] = append(per[evSensor(it.connID())], it)
	}
	for _, sensor := range []string{"fe-a", "fe-b"} {
		st, err := store.Open(context.Background(), url, store.Options{Sensor: sensor, SpillDir: "-"})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.WriteBatch(context.Background(), group(per[sensor])); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	st, err := store.Open(context.Background(), url, store.Options{SpillDir: "-"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := st.PageviewByID(context.Background(), want.ID)
	if err != nil {
		t.Fatal(err)
	}
	late := got.Transactions[len(got.Transactions)-1]
	if got.Pageview.AfterLoad != 1 || late.URL != "/late.png" || late.Flags&reconstruct.FlagAfterLoad == 0 {
		t.Fatalf("fe-a's pageview: %d after load, last member %s flags %v; the test needs its late image after the load",
			got.Pageview.AfterLoad, late.URL, late.Flags)
	}
	stats := run(t, st, Config{From: evT0 - int64(time.Minute), To: evT0 + int64(time.Minute),
		Window: 20 * time.Second, Margin: 40 * time.Second})
	if stats.Stitched != 1 {
		t.Fatalf("stitched %d pageviews, want 1 (%+v)", stats.Stitched, stats)
	}
	if got, err = st.PageviewByID(context.Background(), want.ID); err != nil {
		t.Fatal(err)
	}
	return got, b
}

// TestStitchKeepsHTMLEvidence: the stitched pageview is the one a sensor
// seeing both front ends makes, which read the container's HTML: the
// late objects are in the load (without the HTML's evidence, replayed
// from the store, they would all be after-load), the favicon after it.
func TestStitchKeepsHTMLEvidence(t *testing.T) {
	got, b := evStitched(t, tempDuck(t, "evidence"))
	p, want := got.Pageview, b.Pageviews[0]
	if p.Objects != want.Objects || p.AfterLoad != want.AfterLoad || p.End != want.End || p.Total != want.Total || p.Evidence != want.Evidence {
		t.Errorf("stitched: %d objects, %d after load, end %d, total %d, evidence %s; one sensor: %d, %d, %d, %d, %s",
			p.Objects, p.AfterLoad, p.End, p.Total, p.Evidence, want.Objects, want.AfterLoad, want.End, want.Total, want.Evidence)
	}
	if p.Declared != want.Declared {
		t.Errorf("the stitched pageview keeps declared %q, one sensor %q: a second run would group on less", p.Declared, want.Declared)
	}
}

// TestStitchWritesAfterLoadFlags: the stored transactions carry the
// stitched grouping's verdicts: the favicon fe-b kept stand-alone is
// flagged after-load, the image fe-a flagged so is not any more.
func TestStitchWritesAfterLoadFlags(t *testing.T) {
	got, b := evStitched(t, tempDuck(t, "evidence"))
	checkAfterLoadFlags(t, got.Transactions, b.Transactions)
}

// TestStitchWritesAfterLoadFlagsClickHouse: the same in the update
// mutation that sets the pageview ids (the Debian package, 18.16).
func TestStitchWritesAfterLoadFlagsClickHouse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv, err := chtest.Start(ctx, t.TempDir(), 0, 0)
	if err != nil {
		t.Fatalf("clickhouse test server: %v", err)
	}
	defer srv.Stop()
	got, b := evStitched(t, srv.URL("rtmon_evidence"))
	checkAfterLoadFlags(t, got.Transactions, b.Transactions)
	if p, want := got.Pageview, b.Pageviews[0]; p.Objects != want.Objects || p.AfterLoad != want.AfterLoad || p.Declared != want.Declared {
		t.Errorf("stitched: %d objects, %d after load, declared %q; one sensor: %d, %d, %q",
			p.Objects, p.AfterLoad, p.Declared, want.Objects, want.AfterLoad, want.Declared)
	}
}

// checkAfterLoadFlags compares the stored transactions' FlagAfterLoad with
// the one-sensor grouping's.
func checkAfterLoadFlags(t *testing.T, stored, want []*reconstruct.Transaction) {
	t.Helper()
	after := map[string]bool{}
	for _, tx := range want {
		after[tx.ID] = tx.Flags&reconstruct.FlagAfterLoad != 0
	}
	if len(stored) != len(want) {
		t.Errorf("the stitched pageview holds %d transactions, want %d", len(stored), len(want))
	}
	for _, tx := range stored {
		if got := tx.Flags&reconstruct.FlagAfterLoad != 0; got != after[tx.ID] {
			t.Errorf("transaction %s (%s): stored after-load %v, want %v", tx.ID, tx.URL, got, after[tx.ID])
		}
	}
}
