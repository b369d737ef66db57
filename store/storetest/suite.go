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
	s := open(t)
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	data := Dataset()
	ref := writeDataset(t, s, data)
	t.Run("Queries", func(t *testing.T) { checkQueries(t, s, ref) })
	t.Run("Dedup", func(t *testing.T) { checkDedup(t, s, data, ref) })
	t.Run("Sanitize", func(t *testing.T) { checkSanitize(t, s) })
	t.Run("PageviewExact", func(t *testing.T) { checkPageviewExact(t, s) })
	t.Run("Errors", func(t *testing.T) { checkErrors(t, s) })
	if reopen == nil {
		return
	}
	t.Run("Reopen", func(t *testing.T) {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		closed = true
		checkReopen(t, s, reopen, data, ref)
	})
}

// writeDataset writes data, three batches in four with WriteBatch and the
// fourth streamed, flushes, and returns the reference holding the same.
func writeDataset(t *testing.T, s store.Store, data []store.Batch) *Ref {
	ctx := context.Background()
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
	if total := ref.total(); st.Written != total || st.Queued != 0 || st.Duplicates != 0 {
		t.Fatalf("stats after first write = %+v, want Written %d", st, total)
	}
	return ref
}

// total is the number of records ref holds.
func (r *Ref) total() int64 { return int64(len(r.Conns) + len(r.Txs) + len(r.Pvs)) }

// checkDedup writes the same capture again, plus a batch repeating ids
// within itself: nothing is stored twice.
func checkDedup(t *testing.T, s store.Store, data []store.Batch, ref *Ref) {
	ctx := context.Background()
	total := ref.total()
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
}

// checkSanitize: overlong and invalid UTF-8 text is stored cut and valid.
func checkSanitize(t *testing.T, s store.Store) {
	ctx := context.Background()
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
}

// checkPageviewExact: two pageviews of one client on one interface,
// overlapping in time, plus an object whose connection was opened before
// its pageview started: only the pageview id can tell them apart.
func checkPageviewExact(t *testing.T, s store.Store) {
	ctx := context.Background()
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
}

// checkErrors: bad queries are refused, a missing pageview is ErrNotFound.
func checkErrors(t *testing.T, s store.Store) {
	ctx := context.Background()
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
}

// checkReopen: writes after Close are refused; the reopened store has
// the data and takes a re-ingest as duplicates.
func checkReopen(t *testing.T, s store.Store, reopen func(t *testing.T) store.Store, data []store.Batch, ref *Ref) {
	ctx := context.Background()
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

// Records compare by value (none and empty are the same list).
func values[T any](ps []*T) []T {
	out := []T{}
	for _, p := range ps {
		out = append(out, *p)
	}
	return out
}

func normTx(ts []*reconstruct.Transaction) []reconstruct.Transaction { return values(ts) }
func normPv(ps []*pageview.Pageview) []pageview.Pageview             { return values(ps) }

// normConn also takes nil and empty SYN time lists as the same.
func normConn(cs []*reconstruct.Connection) []reconstruct.Connection {
	out := values(cs)
	for i := range out {
		c := &out[i]
		if len(c.SYNTimes) == 0 {
			c.SYNTimes = nil
		}
		if len(c.SYNACKTimes) == 0 {
			c.SYNACKTimes = nil
		}
	}
	return out
}

func sprint(v any) string { return fmt.Sprintf("%+v", v) }
