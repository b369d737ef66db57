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
// Search newest first by (start, id), PageviewByID with the connections of
// the transactions stamped with the pageview's id. It counts the queries.
type memQuerier struct {
	conns []*reconstruct.Connection
	txs   []*reconstruct.Transaction
	pvs   []*pageview.Pageview
	fail  error // returned by every query when set

	mu                sync.Mutex
	searches, lookups int
}

func inRange(r query.TimeRange, t int64) bool {
	return t >= r.From && (r.To == 0 || t < r.To)
}

func newestPage[T any](all []T, q query.SearchQuery, start func(T) int64, id func(T) string) ([]T, int64) {
	var m []T
	for _, x := range all {
		if inRange(q.Range, start(x)) {
			m = append(m, x)
		}
	}
	slices.SortFunc(m, func(a, b T) int { return cmp.Or(cmp.Compare(start(b), start(a)), strings.Compare(id(a), id(b))) })
	lo, hi := min(q.Offset, len(m)), min(q.Offset+min(q.Limit, searchPage), len(m))
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
		res.Transactions, res.Total = newestPage(m.txs, q, func(t *reconstruct.Transaction) int64 { return t.Start },
			func(t *reconstruct.Transaction) string { return t.ID })
	case query.Pageviews:
		res.Pageviews, res.Total = newestPage(m.pvs, q, func(p *pageview.Pageview) int64 { return p.Start },
			func(p *pageview.Pageview) string { return p.ID })
	}
	return res, nil
}

func (m *memQuerier) PageviewByID(ctx context.Context, id string) (*query.PageviewDetail, error) {
	m.mu.Lock()
	m.lookups++
	m.mu.Unlock()
	if m.fail != nil {
		return nil, m.fail
	}
	d := &query.PageviewDetail{}
	ids := map[string]bool{}
	for _, t := range m.txs {
		if t.PageviewID == id {
			d.Transactions = append(d.Transactions, t)
			ids[t.ConnectionID] = true
		}
	}
	for _, c := range m.conns {
		if ids[c.ID] {
			d.Connections = append(d.Connections, c)
		}
	}
	return d, nil
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
	// Connections come with the transactions that used them; a pageview
	// is looked up when one of its transactions opened a connection.
	used, opened := map[string]bool{}, map[string]bool{}
	for _, tx := range m.txs {
		used[tx.ConnectionID] = true
		if tx.Tconn > 0 {
			opened[tx.PageviewID] = true
		}
	}
	l := r.Loaded
	if l.Transactions != len(m.txs) || l.Pageviews != len(m.pvs) || l.Connections != len(used) || l.Matching != int64(len(m.txs)) ||
		l.Truncated || l.ConnLookupsSkipped != 0 || l.NoConnection != 0 || len(r.Notes()) != 0 {
		t.Errorf("loaded %+v, notes %q; have %d transactions, %d pageviews, %d connections used", l, r.Notes(), len(m.txs), len(m.pvs), len(used))
	}
	if !slices.IsSortedFunc(r.Transactions, func(a, b *reconstruct.Transaction) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), strings.Compare(a.ID, b.ID))
	}) || !slices.IsSortedFunc(r.Connections, func(a, b *reconstruct.Connection) int {
		return cmp.Or(cmp.Compare(a.FirstSeen, b.FirstSeen), strings.Compare(a.ID, b.ID))
	}) {
		t.Error("records not in start order")
	}
	// One page of each kind, one lookup per pageview that opened a
	// connection.
	if m.searches != 2 || m.lookups != len(opened) || r.Limits != (ReadLimits{200_000, 20_000, 15 * time.Second}) {
		t.Errorf("%d searches, %d lookups for %d pageviews; limits %+v", m.searches, m.lookups, len(opened), r.Limits)
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
	if n != l.Transactions || r.Transactions[0].Start < r.Range.From || m.searches != 4 {
		t.Errorf("%d transactions from %d on, read %d in %d searches", n, r.Range.From, l.Transactions, m.searches)
	}
	notes := r.Notes()
	if len(notes) != 1 || !strings.Contains(notes[0], fmt.Sprintf("newest %d of the 25000", l.Transactions)) {
		t.Errorf("notes %q", notes)
	}
}

func TestReadStoreLimitsLookups(t *testing.T) {
	m := synthRecords(t)
	r, err := ReadStore(context.Background(), m, query.TimeRange{}, ReadLimits{MaxConnectionLookups: 3})
	if err != nil {
		t.Fatal(err)
	}
	l := r.Loaded
	if m.lookups != 3 || l.ConnLookupsSkipped < len(m.pvs)/2 || l.NoConnection == 0 || len(r.Notes()) != 2 {
		t.Errorf("%d lookups: %+v, notes %q", m.lookups, l, r.Notes())
	}
	// A budget already spent reads no connection at all.
	m.lookups = 0
	r, err = ReadStore(context.Background(), m, query.TimeRange{}, ReadLimits{ConnectionBudget: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Loaded.Connections != 0 || m.lookups != 0 || r.Loaded.ConnLookupsSkipped < len(m.pvs)/2 {
		t.Errorf("over budget: %+v after %d lookups", r.Loaded, m.lookups)
	}
}

// The guess from a transaction alone must catch every handshake that
// reconstruct saw lose a SYN or SYN/ACK, or those are not read first.
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
	lookupFails := &failingLookups{memQuerier: m, err: boom}
	_, err = ReadStore(context.Background(), lookupFails, query.TimeRange{}, ReadLimits{})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "connections of pageview") {
		t.Errorf("lookup failure: %v", err)
	}
}

type failingLookups struct {
	*memQuerier
	err error
}

func (f *failingLookups) PageviewByID(ctx context.Context, id string) (*query.PageviewDetail, error) {
	return nil, f.err
}
