package whatif

// Reading one time range's records from a store, for the what-if page and
// rtmon whatif --store, with bounds on what is read and so on the queries.

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store/query"
)

// Querier is what ReadStore asks of a store: two of query.Querier's
// methods under their names there. Defined here, by the one who calls
// them, so any store that can answer them (the full store, a read-only
// querier, a test double) will do.
type Querier interface {
	// Search pages transactions or pageviews of a range, newest first.
	Search(ctx context.Context, q query.SearchQuery) (query.SearchResult, error)
	// PageviewByID returns a pageview with its transactions' connections,
	// the only way the store hands out connection records.
	PageviewByID(ctx context.Context, id string) (*query.PageviewDetail, error)
}

// ReadLimits bound what ReadStore reads and so the queries it makes: at
// most MaxTransactions/10,000+1 Search pages of each kind and
// MaxConnectionLookups PageviewByID calls. Zero values take the defaults.
type ReadLimits struct {
	// MaxTransactions: the newest transactions read (default 200,000).
	MaxTransactions int
	// MaxConnectionLookups and ConnectionBudget bound the pageviews whose
	// connections are read (default 20,000 lookups, 15 s). The store
	// returns connections only with their pageview, so each costs a
	// PageviewByID, which scans the transactions table. Pageviews whose
	// handshakes look lossy are read first: there the SYN models act.
	MaxConnectionLookups int
	ConnectionBudget     time.Duration
}

func (l ReadLimits) withDefaults() ReadLimits {
	if l.MaxTransactions <= 0 {
		l.MaxTransactions = 200_000
	}
	if l.MaxConnectionLookups <= 0 {
		l.MaxConnectionLookups = 20_000
	}
	if l.ConnectionBudget <= 0 {
		l.ConnectionBudget = 15 * time.Second
	}
	return l
}

// Loaded counts the records ReadStore read.
type Loaded struct {
	Transactions int `json:"transactions"`
	Pageviews    int `json:"pageviews"`
	Connections  int `json:"connections"`
	// Matching counts the transactions in the requested range; more than
	// Transactions when Truncated.
	Matching  int64 `json:"matching_transactions"`
	Truncated bool  `json:"truncated"`
	// ConnLookupsSkipped: pageviews whose connections were not read
	// (MaxConnectionLookups, ConnectionBudget); NoConnection:
	// fresh-connection transactions whose connection record is missing,
	// LossyNoConnection those of them whose connect time shows a lost SYN
	// or SYN/ACK (the SYN models and SPLICE leave them as measured).
	ConnLookupsSkipped int `json:"conn_lookups_skipped"`
	NoConnection       int `json:"no_connection"`
	LossyNoConnection  int `json:"lossy_no_connection"`
}

// Records are one time range's records as ReadStore read them, each kind
// ordered by start time (connections by FirstSeen), then id: a fixed order
// makes the replay independent of the store's paging, since units starting
// together are taken in input order.
type Records struct {
	Connections  []*reconstruct.Connection
	Transactions []*reconstruct.Transaction
	Pageviews    []*pageview.Pageview
	// Range is what was read: the requested range, with From raised past
	// the cut when transactions were truncated, so that pageviews and
	// transactions cover the same span.
	Range  query.TimeRange
	Loaded Loaded
	// Limits are the bounds applied, defaults filled in.
	Limits ReadLimits
}

// Dataset builds the replay-ready dataset of the records.
func (r *Records) Dataset() (*Dataset, error) {
	d, err := NewDataset(r.Connections, r.Transactions, r.Pageviews)
	if err != nil {
		return nil, fmt.Errorf("whatif dataset: %w", err)
	}
	return d, nil
}

// searchPage is the store's largest search page.
const searchPage = 10000

// ReadStore reads the records of rng from q: the newest MaxTransactions
// transactions, the pageviews from the oldest of them on, and, for every
// pageview with a transaction that opened a connection, that pageview's
// connections (lossy handshakes first, within MaxConnectionLookups and
// ConnectionBudget). CLI and page both read through it, so they replay the
// same data.
func ReadStore(ctx context.Context, q Querier, rng query.TimeRange, lim ReadLimits) (*Records, error) {
	lim = lim.withDefaults()
	r := &Records{Limits: lim}
	txs, matching, err := searchNewest(ctx, q, query.Transactions, rng, lim.MaxTransactions,
		func(res query.SearchResult) []*reconstruct.Transaction { return res.Transactions },
		func(t *reconstruct.Transaction) string { return t.ID })
	if err != nil {
		return nil, err
	}
	r.Loaded.Matching = matching
	// (On a live store new records shift the pages while they are read;
	// the few that are seen twice or missed then are not a truncation.)
	if len(txs) >= lim.MaxTransactions && matching > int64(lim.MaxTransactions) {
		r.Loaded.Truncated = true
		txs, rng.From = cutOldest(txs, lim.MaxTransactions)
	}
	pvs, _, err := searchNewest(ctx, q, query.Pageviews, rng, lim.MaxTransactions,
		func(res query.SearchResult) []*pageview.Pageview { return res.Pageviews },
		func(p *pageview.Pageview) string { return p.ID })
	if err != nil {
		return nil, err
	}
	ids, skipped := connectionLookups(txs, pvs, lim.MaxConnectionLookups)
	conns, late, err := readConnections(ctx, q, ids, lim.ConnectionBudget)
	if err != nil {
		return nil, err
	}
	r.Loaded.ConnLookupsSkipped = skipped + late
	have := make(map[string]bool, len(conns))
	for _, c := range conns {
		have[c.ID] = true
	}
	for _, t := range txs {
		if t.Tconn > 0 && !have[t.ConnectionID] {
			r.Loaded.NoConnection++
			if lossyHandshake(t) {
				r.Loaded.LossyNoConnection++
			}
		}
	}
	slices.SortFunc(txs, func(a, b *reconstruct.Transaction) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), strings.Compare(a.ID, b.ID))
	})
	slices.SortFunc(pvs, func(a, b *pageview.Pageview) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), strings.Compare(a.ID, b.ID))
	})
	slices.SortFunc(conns, func(a, b *reconstruct.Connection) int {
		return cmp.Or(cmp.Compare(a.FirstSeen, b.FirstSeen), strings.Compare(a.ID, b.ID))
	})
	r.Connections, r.Transactions, r.Pageviews, r.Range = conns, txs, pvs, rng
	r.Loaded.Transactions, r.Loaded.Pageviews, r.Loaded.Connections = len(txs), len(pvs), len(conns)
	return r, nil
}

// searchNewest pages one kind of rng, newest first, until it has limit
// records or the store has no more; it returns them (each id once) and
// the number matching.
func searchNewest[T any](ctx context.Context, q Querier, k query.Kind, rng query.TimeRange, limit int,
	records func(query.SearchResult) []T, id func(T) string) ([]T, int64, error) {
	var out []T
	var matching int64
	seen := map[string]bool{}
	for off := 0; ; off += searchPage {
		res, err := q.Search(ctx, query.SearchQuery{Kind: k, Range: rng, Offset: off, Limit: searchPage})
		if err != nil {
			return nil, 0, fmt.Errorf("whatif: reading %s: %w", k, err)
		}
		if off == 0 {
			matching = res.Total
		}
		page := records(res)
		for _, x := range page {
			if !seen[id(x)] {
				seen[id(x)] = true
				out = append(out, x)
			}
		}
		if len(page) < searchPage || len(out) >= limit || int64(off+searchPage) >= res.Total {
			return out, matching, nil
		}
	}
}

// cutOldest keeps the newest limit of txs (newest first), then drops the
// oldest start time's transactions, which the cut may have split; it
// returns them and the range start that now holds exactly them.
func cutOldest(txs []*reconstruct.Transaction, limit int) ([]*reconstruct.Transaction, int64) {
	if len(txs) > limit {
		txs = txs[:limit]
	}
	cut := txs[len(txs)-1].Start
	for len(txs) > 0 && txs[len(txs)-1].Start == cut {
		txs = txs[:len(txs)-1]
	}
	return txs, cut + 1
}

// connectionLookups picks the pageviews whose connections to read, at most
// limit of them, and counts the ones left out. Only a transaction that opened
// its connection (Tconn > 0) needs the record (its SYN and SYN/ACK times);
// the others would lend only their MSS, for which the model has a default.
// Pageviews with a lossy handshake come first, newest first within each.
func connectionLookups(txs []*reconstruct.Transaction, pvs []*pageview.Pageview, limit int) (ids []string, skipped int) {
	need := map[string]bool{}
	for _, t := range txs {
		if t.Tconn > 0 && t.PageviewID != "" {
			need[t.PageviewID] = need[t.PageviewID] || lossyHandshake(t)
		}
	}
	for _, lossy := range []bool{true, false} {
		for _, p := range pvs {
			if l, ok := need[p.ID]; ok && l == lossy {
				if len(ids) == limit {
					skipped++
					continue
				}
				ids = append(ids, p.ID)
			}
		}
	}
	return ids, skipped
}

// readConnections looks the pageviews up in parallel until budget has
// passed and returns their connections (each once) and how many lookups
// the budget cut.
func readConnections(ctx context.Context, q Querier, ids []string, budget time.Duration) ([]*reconstruct.Connection, int, error) {
	details := make([]*query.PageviewDetail, len(ids))
	var late atomic.Int64
	deadline := time.Now().Add(budget)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(2, runtime.GOMAXPROCS(0)))
	for i, id := range ids {
		g.Go(func() error {
			if time.Now().After(deadline) {
				late.Add(1)
				return nil
			}
			d, err := q.PageviewByID(gctx, id)
			if err != nil {
				return fmt.Errorf("whatif: connections of pageview %s: %w", id, err)
			}
			details[i] = d
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	var conns []*reconstruct.Connection
	seen := map[string]bool{}
	for _, d := range details {
		if d == nil {
			continue // over the budget
		}
		for _, c := range d.Connections {
			if !seen[c.ID] {
				seen[c.ID] = true
				conns = append(conns, c)
			}
		}
	}
	return conns, int(late.Load()), nil
}

// lossyHandshake guesses from a transaction alone that its connection's
// handshake lost a SYN or SYN/ACK: the connect time exceeds the client RTT
// by more than the shortest retransmission timeout (200 ms) can explain
// otherwise. An unknown RTT counts as lossy, so it is read early.
func lossyHandshake(t *reconstruct.Transaction) bool {
	return t.RTTClient <= 0 || t.Tconn-t.RTTClient > int64(150*time.Millisecond)
}

// Notes say what limited the read, in words for the page: truncation,
// connections not read.
func (r *Records) Notes() []string {
	l, lim := r.Loaded, r.Limits
	var notes []string
	if l.Truncated {
		notes = append(notes, fmt.Sprintf("Only the newest %d of the %d transactions in this range were read (from %s UTC): choose a shorter range to see all.",
			l.Transactions, l.Matching, time.Unix(0, r.Range.From).UTC().Format("2006-01-02 15:04:05")))
	}
	if l.ConnLookupsSkipped > 0 {
		notes = append(notes, fmt.Sprintf("Connections of %d pageviews were not read (at most %d lookups in %v; those whose handshakes show a loss first).",
			l.ConnLookupsSkipped, lim.MaxConnectionLookups, lim.ConnectionBudget))
	}
	if l.NoConnection > 0 {
		notes = append(notes, fmt.Sprintf("%d transactions opened a connection whose record was not read (%d of them with a lost SYN or SYN/ACK): FAST SYN, FAST SYN/ACK and SPLICE leave them as measured, REWRITE EMBEDS assumes a 1460-byte MSS.",
			l.NoConnection, l.LossyNoConnection))
	}
	return notes
}
