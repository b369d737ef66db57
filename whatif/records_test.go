package whatif

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store/query"
	"github.com/rtmon/rtmon/synth"
)

// memQuerier answers ReadStore's queries from memory as the stores do:
// Search and SearchConnections newest first by (start, id). It counts the
// queries.
type memQuerier struct {
	conns []*reconstruct.Connection
	txs   []*reconstruct.Transaction
	pvs   []*pageview.Pageview
	fail  error // returned by every query when set

	mu                     sync.Mutex
	searches, connSearches int
}

func inRange(r query.TimeRange, t int64) bool {
	return t >= r.From && (r.To == 0 || t < r.To)
}

func newestPage[T any](all []T, r query.TimeRange, offset, limit int, start func(T) int64, id func(T) string) ([]T, int64) {
	var m []T
	for _, x := range all {
		if inRange(r, start(x)) {
			m = append(m, x)
		}
	}
	slices.SortFunc(m, func(a, b T) int { return cmp.Or(cmp.Compare(start(b), start(a)), strings.Compare(id(a), id(b))) })
	lo, hi := min(offset, len(m)), min(offset+min(limit, searchPage), len(m))
	return m[lo:hi], int64(len(m))
}

func (m *memQuerier) Search(ctx context.Context, q query.SearchQuery) (query.SearchResult, error) {
	m.mu.Lock()
	m.searches++
	m.mu.Unlock()
	var res query.SearchResult
	if m.fail != nil {
		return res, m.fail
	}
	switch q.Kind {
	case query.Transactions:
		res.Transactions, res.Total = newestPage(m.txs, q.Range, q.Offset, q.Limit, func(t *reconstruct.Transaction) int64 { return t.Start },
			func(t *reconstruct.Transaction) string { return t.ID })
	case query.Pageviews:
		res.Pageviews, res.Total = newestPage(m.pvs, q.Range, q.Offset, q.Limit, func(p *pageview.Pageview) int64 { return p.Start },
			func(p *pageview.Pageview) string { return p.ID })
	}
	return res, nil
}

func (m *memQuerier) SearchConnections(ctx context.Context, q query.ConnectionSearch) (query.ConnectionResult, error) {
	m.mu.Lock()
	m.connSearches++
	m.mu.Unlock()
	var res query.ConnectionResult
	if m.fail != nil {
		return res, m.fail
	}
	res.Connections, res.Total = newestPage(m.conns, q.Range, q.Offset, q.Limit, func(c *reconstruct.Connection) int64 { return c.FirstSeen },
		func(c *reconstruct.Connection) string { return c.ID })
	return res, nil
}

// synthRecords is a lossy synthetic capture, reconstructed, with the
// generator's pageviews.
func synthRecords(t *testing.T) *memQuerier {
	t.Helper()
	wl := synth.Workload{Seed: 3, Clients: 20, Duration: 20 * time.Second, SYNLossRate: 0.2, SYNACKLossRate: 0.1}
	recs, truth := synthCapture(t, wl)
	pvs, _ := truthPageviews(t, recs, truth)
	return &memQuerier{conns: recs.conns, txs: recs.txs, pvs: pvs}
}

func TestReadStoreReadsEverythingInBoundedQueries(t *testing.T) {
	m := synthRecords(t)
	r, err := ReadStore(context.Background(), m, query.TimeRange{}, ReadLimits{})
	if err != nil {
		t.Fatal(err)
	}
	// Every connection a transaction opened is read, in the span they
	// opened in.
	opened := map[string]bool{}
	for _, tx := range m.txs {
		if tx.Tconn > 0 {
			opened[tx.ConnectionID] = true
		}
	}
	for _, c := range r.Connections {
		delete(opened, c.ID)
	}
	l := r.Loaded
	if l.Transactions != len(m.txs) || l.Pageviews != len(m.pvs) || l.Connections == 0 || l.Connections > len(m.conns) || len(opened) != 0 ||
		l.Matching != int64(len(m.txs)) || l.Truncated || l.ConnectionsTruncated || l.NoConnection != 0 || len(r.Notes()) != 0 {
		t.Errorf("loaded %+v, notes %q; have %d transactions, %d pageviews, %d connections; %d opened not read",
			l, r.Notes(), len(m.txs), len(m.pvs), len(m.conns), len(opened))
	}
	if !slices.IsSortedFunc(r.Transactions, func(a, b *reconstruct.Transaction) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), strings.Compare(a.ID, b.ID))
	}) || !slices.IsSortedFunc(r.Connections, func(a, b *reconstruct.Connection) int {
		return cmp.Or(cmp.Compare(a.FirstSeen, b.FirstSeen), strings.Compare(a.ID, b.ID))
	}) {
		t.Error("records not in start order")
	}
	// One page of each kind: no query per pageview.
	if m.searches != 2 || m.connSearches != 1 || r.Limits != (ReadLimits{MaxTransactions: 200_000, MaxConnections: 200_000}) {
		t.Errorf("%d searches, %d connection searches; limits %+v", m.searches, m.connSearches, r.Limits)
	}
	// Read through the store or handed over, the replay is the same.
	ds, err := r.Dataset()
	if err != nil {
		t.Fatal(err)
	}
	direct, err := NewDataset(m.conns, m.txs, m.pvs)
	if err != nil {
		t.Fatal(err)
	}
	rules := "IF IP.SRC == * THEN FAST SYN GAP 200ms, SPLICE"
	a, b := eval(t, ds, rules, Options{}), eval(t, direct, rules, Options{})
	if fmt.Sprint(a.Classes) != fmt.Sprint(b.Classes) {
		t.Errorf("replay of the records read differs:\n%+v\n%+v", a.Classes, b.Classes)
	}
}

func TestReadStoreTruncatesToTheNewest(t *testing.T) {
	// More than two search pages, many transactions per start time.
	m := &memQuerier{}
	for i := range 25_000 {
		m.txs = append(m.txs, &reconstruct.Transaction{ID: fmt.Sprintf("t%05d", i), Start: base + int64(i/7)*ms, Total: ms})
	}
	r, err := ReadStore(context.Background(), m, query.TimeRange{To: base + sec*10}, ReadLimits{MaxTransactions: 22_000})
	if err != nil {
		t.Fatal(err)
	}
	l := r.Loaded
	if !l.Truncated || l.Matching != 25_000 || l.Transactions > 22_000 || l.Transactions < 22_000-7 || r.Range.To != base+sec*10 {
		t.Fatalf("loaded %+v range %+v", l, r.Range)
	}
	// Exactly the transactions from the new start on: none split by the cut.
	n := 0
	for _, tx := range m.txs {
		if tx.Start >= r.Range.From {
			n++
		}
	}
	// No transaction opened a connection: none is looked for.
	if n != l.Transactions || r.Transactions[0].Start < r.Range.From || m.searches != 4 || m.connSearches != 0 {
		t.Errorf("%d transactions from %d on, read %d in %d searches, %d connection searches", n, r.Range.From, l.Transactions, m.searches, m.connSearches)
	}
	notes := r.Notes()
	if len(notes) != 1 || !strings.Contains(notes[0], fmt.Sprintf("newest %d of the 25000", l.Transactions)) {
		t.Errorf("notes %q", notes)
	}
}

func TestReadStoreLimitsConnections(t *testing.T) {
	m := synthRecords(t)
	r, err := ReadStore(context.Background(), m, query.TimeRange{}, ReadLimits{MaxConnections: 3})
	if err != nil {
		t.Fatal(err)
	}
	l := r.Loaded
	if l.Connections != 3 || !l.ConnectionsTruncated || l.NoConnection == 0 || l.Transactions != len(m.txs) || m.connSearches != 1 || len(r.Notes()) != 2 {
		t.Errorf("%d connection searches: %+v, notes %q", m.connSearches, l, r.Notes())
	}
	// The newest three are kept.
	byAge := slices.Clone(m.conns)
	slices.SortFunc(byAge, func(a, b *reconstruct.Connection) int {
		return cmp.Or(cmp.Compare(b.FirstSeen, a.FirstSeen), strings.Compare(a.ID, b.ID))
	})
	for _, c := range r.Connections {
		if !slices.Contains(byAge[:3], c) {
			t.Errorf("connection %s (first seen %d) read, not one of the newest", c.ID, c.FirstSeen)
		}
	}
}

// The guess from a transaction alone must catch every handshake that
// reconstruct saw lose a SYN or SYN/ACK, or LossyNoConnection undercounts.
func TestLossyHandshakeGuess(t *testing.T) {
	m := synthRecords(t)
	first := map[string]*reconstruct.Transaction{}
	for _, tx := range m.txs {
		if tx.Tconn > 0 {
			first[tx.ConnectionID] = tx
		}
	}
	lossy := 0
	for _, c := range m.conns {
		tx := first[c.ID]
		if tx == nil {
			continue
		}
		if c.SYNLosses+c.SYNACKLosses > 0 {
			lossy++
			if !lossyHandshake(tx) {
				t.Errorf("connection %s lost %d SYNs and %d SYN/ACKs but its transaction (Tconn %v, RTT %v) looks clean",
					c.ID, c.SYNLosses, c.SYNACKLosses, time.Duration(tx.Tconn), time.Duration(tx.RTTClient))
			}
		}
	}
	if lossy == 0 {
		t.Fatal("the capture has no lossy handshakes")
	}
}

func TestReadStoreErrorsSayWhat(t *testing.T) {
	boom := errors.New("engine down")
	m := &memQuerier{fail: boom}
	_, err := ReadStore(context.Background(), m, query.TimeRange{}, ReadLimits{})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "reading transactions") {
		t.Errorf("search failure: %v", err)
	}
	m = synthRecords(t)
	connsFail := &failingConnections{memQuerier: m, err: boom}
	_, err = ReadStore(context.Background(), connsFail, query.TimeRange{}, ReadLimits{})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "reading connections") {
		t.Errorf("connection read failure: %v", err)
	}
}

type failingConnections struct {
	*memQuerier
	err error
}

func (f *failingConnections) SearchConnections(ctx context.Context, q query.ConnectionSearch) (query.ConnectionResult, error) {
	return query.ConnectionResult{}, f.err
}
