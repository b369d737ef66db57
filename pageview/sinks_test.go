package pageview

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
)

type recordOnly struct{ txs, conns int }

func (r *recordOnly) Connection(*reconstruct.Connection)   { r.conns++ }
func (r *recordOnly) Transaction(*reconstruct.Transaction) { r.txs++ }

func TestTeeAndClassSummary(t *testing.T) {
	classes, err := ParseClasses([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	sum := NewClassSummary()
	rec := &recordOnly{}
	g := NewGrouper(Config{}, classes, Tee{Records(rec), sum})
	premium := netip.MustParseAddr("10.4.1.2")
	for i := range 100 {
		cl := cl1
		if i%4 == 0 {
			cl = premium
		}
		conn := "p" + string(rune('A'+i%26)) + string(rune('a'+i/26))
		c := mk(txSpec{conn: conn, client: cl, url: "/index.html", ct: "text/html", start: int64(i) * 20000,
			tconn: 100, tserver: int64(i) * 10, ttransfer: 100})
		o := mk(txSpec{conn: conn, idx: 1, client: cl, url: "/a.png", ct: "image/png", ref: page,
			start: int64(i)*20000 + 500, tserver: 10, ttransfer: 10})
		g.Transaction(c)
		g.Transaction(o)
		g.Connection(&reconstruct.Connection{ID: conn, Client: cl, LastSeen: o.End})
	}
	g.Transaction(obj("x", 0, "/lost.png", "http://other.example/", 3_000_000, 10, 10, 10))
	g.Flush()
	if rec.txs != 201 || rec.conns != 100 {
		t.Errorf("record sink got %d transactions, %d connections", rec.txs, rec.conns)
	}
	rows := sum.Rows()
	if len(rows) != 2 || rows[0].Class != "partners" || rows[1].Class != "premium" {
		t.Fatalf("rows %+v", rows)
	}
	o, p := rows[0], rows[1]
	if p.Pageviews != 25 || p.Transactions != 50 || p.Connections != 25 || p.Priority != "high" ||
		o.Pageviews != 75 || o.Transactions != 151 || o.StandAlone != 1 {
		t.Errorf("rows %+v", rows)
	}
	// Premium totals are 200 ms + server time i*10 ms (i = 0, 4, ... 96) + ~20 ms.
	if p.P50 < 600*time.Millisecond || p.P50 > 720*time.Millisecond || p.P99 < 1100*time.Millisecond || p.P99 > 1200*time.Millisecond {
		t.Errorf("premium percentiles %v %v %v", p.P50, p.P90, p.P99)
	}
	var buf bytes.Buffer
	if err := sum.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "premium") || !strings.Contains(buf.String(), "p99") {
		t.Errorf("text:\n%s", buf.String())
	}
}

// Records are classified once: a Classify stage in front of the Grouper
// (as for the live tap) decides, the Grouper keeps what it stamped, and the
// pageview takes its container's class and priority.
func TestClassifiedOnce(t *testing.T) {
	upstream, err := ParseClasses([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	// The Grouper's own classes would say otherwise: it must not ask them.
	own := &Classes{Default: Class{Name: "grouper", Priority: "none"}}
	out := newCollector(t)
	g := NewGrouper(Config{}, own, out)
	in := Classify(upstream, g)
	premium := netip.MustParseAddr("10.4.1.2")
	in.Transaction(mk(txSpec{conn: "a", client: premium, url: "/index.html", ct: "text/html", tconn: 100, tserver: 10, ttransfer: 10}))
	in.Transaction(mk(txSpec{conn: "a", idx: 1, client: premium, url: "/a.png", ct: "image/png", ref: page, start: 200, tserver: 10, ttransfer: 10}))
	in.Connection(&reconstruct.Connection{ID: "a", Client: premium, LastSeen: base + 300*ms})
	g.Flush()
	if len(out.txs) != 2 || len(out.pvs) != 1 || len(out.conns) != 1 {
		t.Fatalf("%d transactions, %d pageviews, %d connections", len(out.txs), len(out.pvs), len(out.conns))
	}
	for _, tx := range out.txs {
		if tx.Class != "premium" || tx.Priority != "high" {
			t.Errorf("transaction %s: class %q priority %q", tx.ID, tx.Class, tx.Priority)
		}
	}
	if p := out.pvs[0]; p.Class != "premium" || p.Priority != "high" || out.conns[0].Class != "premium" {
		t.Errorf("pageview class %q priority %q, connection class %q", p.Class, p.Priority, out.conns[0].Class)
	}
}
