package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
)

// T0 is the synthetic data's first start: 2026-11-28 00:00 UTC; the data
// spans two days so that several partitions are involved.
var T0 = time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC).UnixNano()

// Dataset returns the conformance data: batches of about 600 transactions.
func Dataset() []store.Batch {
	g := NewGen(7, T0, int64(2*24*time.Hour)/3000)
	var out []store.Batch
	for i := 0; i < 12; i++ {
		out = append(out, g.Next(600))
	}
	return out
}

// Run is the conformance suite. open must return a new, empty store; reopen
// (optional) reopens the same storage after Close for the persistence check.
func Run(t *testing.T, open func(t *testing.T) store.Store, reopen func(t *testing.T) store.Store) {
	ctx := context.Background()
	s := open(t)
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	data := Dataset()
	ref := NewRef()
	for i, b := range data {
		ref.Add(b)
		if i%4 == 3 {
			// Stream through the pageview.Sink side too.
			for _, c := range b.Connections {
				s.Connection(c)
			}
			for _, tx := range b.Transactions {
				s.Transaction(tx)
			}
			for _, p := range b.Pageviews {
				s.Pageview(p)
			}
			continue
		}
		if err := s.WriteBatch(ctx, b); err != nil {
			t.Fatalf("WriteBatch: %v", err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	st := s.Stats()
	total := int64(len(ref.Conns) + len(ref.Txs) + len(ref.Pvs))
	if st.Written != total || st.Queued != 0 || st.Duplicates != 0 {
		t.Fatalf("stats after first write = %+v, want Written %d", st, total)
	}

	t.Run("Queries", func(t *testing.T) { checkQueries(t, s, ref) })

	t.Run("Dedup", func(t *testing.T) {
		// The same capture again, plus a batch repeating ids within itself.
		for _, b := range data {
			if err := s.WriteBatch(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		twice := store.Batch{Transactions: append(append([]*reconstruct.Transaction{}, data[0].Transactions[:5]...), data[0].Transactions[:5]...)}
		if err := s.WriteBatch(ctx, twice); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		st := s.Stats()
		if st.Written != total || st.Duplicates != total+10 {
			t.Fatalf("after re-ingest stats = %+v, want Written %d Duplicates %d", st, total, total+10)
		}
		checkQueries(t, s, ref)
	})

	t.Run("Sanitize", func(t *testing.T) {
		long := "/" + strings.Repeat("é", 3000) // 6001 bytes
		bad := "/bad\xff\xfe-path"
		g := NewGen(99, T0+int64(3*24*time.Hour), 1e6)
		b := g.Next(2)
		b.Transactions[0].URL = long
		b.Transactions[0].UserAgent = "UA\x00\xc3"
		b.Transactions[1].URL = bad
		if err := s.WriteBatch(ctx, b); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		r := store.TimeRange{From: T0 + int64(3*24*time.Hour)}
		res, err := s.Search(ctx, store.SearchQuery{Range: r, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]*reconstruct.Transaction{}
		for _, tx := range res.Transactions {
			got[tx.ID] = tx
		}
		u := got[b.Transactions[0].ID].URL
		if len(u) > 2048 || len(u) < 2046 || !utf8.ValidString(u) || !strings.HasPrefix(long, u) {
			t.Errorf("long URL stored as %d bytes (valid %v), want a 2047-2048 byte valid prefix", len(u), utf8.ValidString(u))
		}
		if ua := got[b.Transactions[0].ID].UserAgent; !utf8.ValidString(ua) || !strings.HasPrefix(ua, "UA\x00") {
			t.Errorf("user agent stored as %q", ua)
		}
		if u := got[b.Transactions[1].ID].URL; u != "/bad\uFFFD-path" {
			t.Errorf("invalid UTF-8 URL stored as %q", u)
		}
	})

	t.Run("PageviewExact", func(t *testing.T) {
		// Two pageviews of one client on one interface, overlapping in
		// time, plus an object whose connection was opened before its
		// pageview started: only the pageview id can tell them apart.
		g := NewGen(123, T0+int64(4*24*time.Hour), 1e6)
		var b store.Batch
		for len(b.Pageviews) < 2 {
			nb := g.Next(1)
			b.Connections = append(b.Connections, nb.Connections...)
			b.Transactions = append(b.Transactions, nb.Transactions...)
			b.Pageviews = append(b.Pageviews, nb.Pageviews...)
		}
		p1, p2 := b.Pageviews[0], b.Pageviews[1]
		for _, tx := range b.Transactions {
			tx.Client, tx.Interface, tx.Class = p1.Client, p1.Interface, p1.Class
			switch tx.PageviewID {
			case p2.ID:
				tx.Start = p1.Start + (tx.Start-p2.Start)%max(p1.End-p1.Start, 1)
			case p1.ID:
			default:
				tx.PageviewID = p2.ID
			}
		}
		p2.Client, p2.Interface, p2.Start, p2.End = p1.Client, p1.Interface, p1.Start, p1.End
		early := *b.Transactions[0]
		early.ID, early.Index, early.Start = early.ID+"-early", 99, p1.Start-int64(time.Second)
		b.Transactions = append(b.Transactions, &early)
		ref := NewRef()
		ref.Add(b)
		if err := s.WriteBatch(ctx, b); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for _, p := range []*pageview.Pageview{p1, p2} {
			got, err := s.PageviewByID(ctx, p.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := ref.PageviewByID(p.ID)
			same(t, "exact pageview transactions", normTx(got.Transactions), normTx(want.Transactions))
			same(t, "exact pageview connections", normConn(got.Connections), normConn(want.Connections))
			for _, tx := range got.Transactions {
				if tx.PageviewID != p.ID {
					t.Errorf("pageview %s returned transaction %s of pageview %q", p.ID, tx.ID, tx.PageviewID)
				}
			}
		}
		if n := len(ref.PageviewByID(p1.ID).Transactions); n < 2 {
			t.Fatalf("pageview %s has %d transactions; the test needs the early one too", p1.ID, n)
		}
	})

	t.Run("Errors", func(t *testing.T) {
		r := store.TimeRange{From: T0}
		if _, err := s.Histogram(ctx, store.HistogramQuery{Range: r, Component: "bogus", Edges: []int64{0, 1}}); err == nil {
			t.Error("bad component accepted")
		}
		if _, err := s.Percentiles(ctx, store.PercentileQuery{Range: r, Kind: "bogus", Qs: []float64{0.5}}); err == nil {
			t.Error("bad kind accepted")
		}
		if _, err := s.Percentiles(ctx, store.PercentileQuery{Range: r, Qs: []float64{1.5}}); err == nil {
			t.Error("quantile 1.5 accepted")
		}
		if _, err := s.Search(ctx, store.SearchQuery{Range: r, Client: "10.x.1.1"}); err == nil {
			t.Error("bad client accepted")
		}
		if _, err := s.TopSlow(ctx, store.TopQuery{Range: r, By: "bogus"}); err == nil {
			t.Error("bad top-by accepted")
		}
		// A missing pageview is ErrNotFound, told from a failure by
		// errors.Is (the web answers 404 for it, 500 for the rest).
		if _, err := s.PageviewByID(ctx, "no-such-pageview"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("missing pageview: err %v, want ErrNotFound", err)
		}
		// A hostile filter is a value, not SQL.
		res, err := s.Search(ctx, store.SearchQuery{Range: r, URLContains: "' OR 1=1 --", Class: "x' OR '1'='1"})
		if err != nil || res.Total != 0 {
			t.Errorf("injection-shaped filter: total %d err %v", res.Total, err)
		}
	})

	if reopen == nil {
		return
	}
	t.Run("Reopen", func(t *testing.T) {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		closed = true
		// Writes after Close are refused, not lost silently: WriteBatch
		// says ErrClosed, a streamed record is counted as rejected.
		if err := s.WriteBatch(ctx, data[0]); !errors.Is(err, store.ErrClosed) {
			t.Errorf("WriteBatch after Close: err %v, want ErrClosed", err)
		}
		s.Transaction(data[0].Transactions[0])
		if st := s.Stats(); st.Rejected != 1 {
			t.Errorf("a record streamed after Close: Rejected = %d, want 1", st.Rejected)
		}
		s2 := reopen(t)
		defer s2.Close()
		// Migrations are idempotent and the data is still there.
		r := store.TimeRange{From: T0, To: T0 + int64(3*24*time.Hour)}
		c, err := s2.Counters(ctx, r, "")
		if err != nil {
			t.Fatal(err)
		}
		if want := ref.Counters(r, ""); c != want {
			t.Fatalf("after reopen counters = %+v, want %+v", c, want)
		}
		if err := s2.WriteBatch(ctx, data[0]); err != nil {
			t.Fatal(err)
		}
		if err := s2.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if st := s2.Stats(); st.Written != 0 || st.Duplicates != int64(data[0].Len()) {
			t.Fatalf("re-ingest after reopen stats = %+v", st)
		}
	})
}

// Ranges used by the query checks: everything, one middle slice, one
// that starts and ends inside minutes, one inside a minute, empty.
func ranges() []store.TimeRange {
	return []store.TimeRange{
		{From: T0},
		{From: T0 + int64(7*time.Hour), To: T0 + int64(30*time.Hour)},
		{From: T0 + int64(3*time.Hour+17*time.Second+3), To: T0 + int64(20*time.Hour+41*time.Second)},
		{From: T0 + int64(5*time.Hour+10*time.Second), To: T0 + int64(5*time.Hour+50*time.Second)},
		{From: T0 - int64(time.Hour), To: T0},
	}
}

func same(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		gs, ws := strings.TrimSpace(strings.ReplaceAll(sprint(got), "\n", " ")), sprint(want)
		if len(gs) > 600 {
			gs = gs[:600]
		}
		if len(ws) > 600 {
			ws = ws[:600]
		}
		t.Errorf("%s:\n got %s\nwant %s", what, gs, ws)
	}
}

func checkQueries(t *testing.T, s store.Store, ref *Ref) {
	ctx := context.Background()
	qs := []float64{0, 0.25, 0.5, 0.9, 0.95, 0.99, 1}
	edgeSets := [][]int64{store.LogEdges(1e5, 1e10, 40), store.LinearEdges(50e6, 20), {0}}
	for _, r := range ranges() {
		for _, k := range []store.Kind{store.Transactions, store.Pageviews} {
			for _, class := range []string{"", "gold"} {
				for _, c := range store.Components(k) {
					for _, e := range edgeSets {
						q := store.HistogramQuery{Kind: k, Range: r, Class: class, Component: c, Edges: e}
						got, err := s.Histogram(ctx, q)
						if err != nil {
							t.Fatalf("Histogram(%+v): %v", q, err)
						}
						same(t, "Histogram "+string(k)+" "+c, got, ref.Histogram(q))
					}
					pq := store.PercentileQuery{Kind: k, Range: r, Class: class, Component: c, Qs: qs}
					got, err := s.Percentiles(ctx, pq)
					if err != nil {
						t.Fatalf("Percentiles(%+v): %v", pq, err)
					}
					same(t, "Percentiles "+string(k)+" "+c, got, ref.Percentiles(pq))
				}
				pq := store.PercentileQuery{Kind: k, Range: r, Class: class, Component: "total", Qs: qs, Bucket: time.Hour}
				got, err := s.PercentileSeries(ctx, pq)
				if err != nil {
					t.Fatalf("PercentileSeries: %v", err)
				}
				same(t, "PercentileSeries "+string(k), got, ref.PercentileSeries(pq))
				for _, by := range []string{"url", "server", "client"} {
					tq := store.TopQuery{Kind: k, Range: r, Class: class, By: by, Limit: 10, MinCount: 2}
					got, err := s.TopSlow(ctx, tq)
					if err != nil {
						t.Fatalf("TopSlow(%+v): %v", tq, err)
					}
					same(t, "TopSlow "+by, got, ref.TopSlow(tq))
				}
			}
		}
		for _, class := range []string{"", "gold", "silver", "bronze", "none"} {
			got, err := s.Counters(ctx, r, class)
			if err != nil {
				t.Fatalf("Counters: %v", err)
			}
			same(t, "Counters "+class, got, ref.Counters(r, class))
		}
		got, err := s.Classes(ctx, r)
		if err != nil {
			t.Fatalf("Classes: %v", err)
		}
		if got == nil {
			got = []string{}
		}
		same(t, "Classes", got, ref.Classes(r))
		for _, k := range []store.Kind{store.Transactions, store.Pageviews} {
			for _, class := range []string{"", "gold", "none"} {
				for _, step := range []time.Duration{0, time.Minute, time.Hour} {
					q := store.SummaryQuery{Kind: k, Range: r, Class: class, Edges: store.LogEdges(1e6, 1e11, 100), Qs: qs, Step: step}
					got, err := s.Summary(ctx, q)
					if err != nil {
						t.Fatalf("Summary(%+v): %v", q, err)
					}
					got.Recomputed = 0
					same(t, fmt.Sprintf("Summary %s %q step %v", k, class, step), got, ref.Summary(q))
				}
				sq := store.SumQuery{Kind: k, Range: r, Class: class}
				got, err := s.ComponentSums(ctx, sq)
				if err != nil {
					t.Fatalf("ComponentSums(%+v): %v", sq, err)
				}
				same(t, "ComponentSums "+string(k)+" "+class, got, ref.ComponentSums(sq))
			}
		}
	}
	for _, k := range []store.Kind{store.Transactions, store.Pageviews} {
		got, err := s.Extent(ctx, k)
		if err != nil {
			t.Fatalf("Extent(%s): %v", k, err)
		}
		want := ref.Extent(k)
		if want.N == 0 {
			t.Fatalf("Extent(%s): reference has no records", k)
		}
		same(t, "Extent "+string(k), got, want)
	}
	// Sanity on the data itself: every class has data, so the checks above
	// compared non-trivial answers.
	if c := ref.Counters(ranges()[0], "gold"); c.Transactions < 1000 || c.SYNLosses == 0 || c.IncompleteTx == 0 {
		t.Fatalf("synthetic data too thin: %+v", c)
	}

	searches := []store.SearchQuery{
		{Range: ranges()[0], Limit: 20},
		{Range: ranges()[0], Limit: 20, Offset: 20},
		{Range: ranges()[1], Client: "10.1.0.0/16", Limit: 30, Offset: 5},
		{Range: ranges()[0], Client: "10.2.*.*", Status: 500},
		{Range: ranges()[0], Client: "2001:db8::/32", URLContains: "page-1"},
		{Range: ranges()[0], Client: ref.Txs[10].Client.String()},
		// The forms classes and what-if rules take, read the same way.
		{Range: ranges()[0], Client: "10.*.0.*"},
		{Range: ranges()[0], Client: "IP.SRC != 10.2.*.*"},
		{Range: ranges()[0], Client: "::ffff:10.1.0.0/112"},
		{Range: ranges()[0], Client: "!= 2001:db8::/32"},
		{Range: ranges()[0], Client: "::/0"},
		{Kind: store.Pageviews, Range: ranges()[0], Client: "*"},
		{Range: ranges()[0], Class: "silver", MinTotal: 200e6, Limit: 7, Offset: 3},
		{Range: ranges()[0], URLContains: "ünïcode"},
		{Range: ranges()[0], URLContains: "100%25"},
		{Kind: store.Pageviews, Range: ranges()[0], Class: "gold", MinTotal: 100e6, Limit: 15},
		{Kind: store.Pageviews, Range: ranges()[1], Client: "198.51.100.0/24", Status: 404},
	}
	for _, sq := range searches {
		got, err := s.Search(ctx, sq)
		if err != nil {
			t.Fatalf("Search(%+v): %v", sq, err)
		}
		want := ref.Search(sq)
		if want.Total == 0 && sq.Status == 0 && sq.Offset == 0 {
			t.Errorf("search %+v matches nothing in the reference; pick a better filter", sq)
		}
		same(t, "Search total", got.Total, want.Total)
		same(t, "Search transactions", normTx(got.Transactions), normTx(want.Transactions))
		same(t, "Search pageviews", normPv(got.Pageviews), normPv(want.Pageviews))
	}

	for _, i := range []int{0, 17, len(ref.Pvs) - 1} {
		id := ref.Pvs[i].ID
		got, err := s.PageviewByID(ctx, id)
		if err != nil {
			t.Fatalf("PageviewByID(%s): %v", id, err)
		}
		want := ref.PageviewByID(id)
		same(t, "Pageview", normPv([]*pageview.Pageview{got.Pageview}), normPv([]*pageview.Pageview{want.Pageview}))
		same(t, "Pageview transactions", normTx(got.Transactions), normTx(want.Transactions))
		same(t, "Pageview connections", normConn(got.Connections), normConn(want.Connections))
		if len(got.Transactions) == 0 || len(got.Connections) == 0 {
			t.Errorf("pageview %s came back without transactions or connections", id)
		}
	}
}

// Records compare by value; nil and empty flag lists are the same.
func normTx(ts []*reconstruct.Transaction) []reconstruct.Transaction {
	out := []reconstruct.Transaction{}
	for _, t := range ts {
		c := *t
		out = append(out, c)
	}
	return out
}

func normPv(ps []*pageview.Pageview) []pageview.Pageview {
	out := []pageview.Pageview{}
	for _, p := range ps {
		c := *p
		out = append(out, c)
	}
	return out
}

func normConn(cs []*reconstruct.Connection) []reconstruct.Connection {
	out := []reconstruct.Connection{}
	for _, x := range cs {
		c := *x
		if len(c.SYNTimes) == 0 {
			c.SYNTimes = nil
		}
		if len(c.SYNACKTimes) == 0 {
			c.SYNACKTimes = nil
		}
		out = append(out, c)
	}
	return out
}

func sprint(v any) string { return fmt.Sprintf("%+v", v) }
