package whatif

// Reading one time range's records from a store, for the what-if page and
// rtmon whatif --store, with bounds on what is read and so on the queries.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

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
	// SearchConnections pages connections of a range, newest first.
	SearchConnections(ctx context.Context, q query.ConnectionSearch) (query.ConnectionResult, error)
}

// ReadLimits bound what ReadStore reads and so the queries it makes: at
// most MaxTransactions/10,000+1 Search pages of each kind and
// MaxConnections/10,000+1 SearchConnections pages. Zero values take the
// defaults.
type ReadLimits struct {
	// MaxTransactions: the newest transactions read (default 200,000).
	MaxTransactions int
	// MaxConnections: the newest connections read from the span of the
	// transactions that opened one (default MaxTransactions, which a
	// connection per transaction reaches).
	MaxConnections int
	// Sensor, if set, reads one sensor's records only: one front end's
	// traffic, which its own splicer's actions would act on.
	Sensor string
}

func (l ReadLimits) withDefaults() ReadLimits {
	if l.MaxTransactions <= 0 {
		l.MaxTransactions = 200_000
	}
	if l.MaxConnections <= 0 {
		l.MaxConnections = l.MaxTransactions
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
	// ConnectionsTruncated: the span held more than MaxConnections
	// connections and the oldest were not read. NoConnection:
	// fresh-connection transactions whose connection record is missing,
	// LossyNoConnection those of them whose connect time shows a lost SYN
	// or SYN/ACK (the SYN models and SPLICE leave them as measured).
	ConnectionsTruncated bool `json:"connections_truncated"`
	NoConnection         int  `json:"no_connection"`
	LossyNoConnection    int  `json:"lossy_no_connection"`
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
// transactions, the pageviews from the oldest of them on, and the newest
// MaxConnections connections of the span in which the transactions that
// opened a connection saw it open. CLI and page both read through it, so
// they replay the same data.
func ReadStore(ctx context.Context, q Querier, rng query.TimeRange, lim ReadLimits) (*Records, error) {
	lim = lim.withDefaults()
	r := &Records{Limits: lim}
	txs, matching, err := searchNewest(ctx, q, query.Transactions, rng, lim,
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
	pvs, _, err := searchNewest(ctx, q, query.Pageviews, rng, lim,
		func(res query.SearchResult) []*pageview.Pageview { return res.Pageviews },
		func(p *pageview.Pageview) string { return p.ID })
	if err != nil {
		return nil, err
	}
	conns, err := r.readConnections(ctx, q, txs)
	if err != nil {
		return nil, err
	}
	r.countMissing(txs, conns)
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

// searchNewest pages one kind of rng through Search (pageNewest).
func searchNewest[T any](ctx context.Context, q Querier, k query.Kind, rng query.TimeRange, lim ReadLimits,
	records func(query.SearchResult) []T, id func(T) string) ([]T, int64, error) {
	return pageNewest(ctx, string(k), lim.MaxTransactions, func(ctx context.Context, off int) ([]T, int64, error) {
		res, err := q.Search(ctx, query.SearchQuery{Kind: k, Range: rng, Sensor: lim.Sensor, Offset: off, Limit: searchPage})
		return records(res), res.Total, err
	}, id)
}

// pageNewest reads pages of what (page answers one at an offset, with the
// number matching), newest first, until it has limit records or the
// store has no more; it returns them (each id once) and the number
// matching.
func pageNewest[T any](ctx context.Context, what string, limit int,
	page func(ctx context.Context, off int) ([]T, int64, error), id func(T) string) ([]T, int64, error) {
	var out []T
	var matching int64
	seen := map[string]bool{}
	for off := 0; ; off += searchPage {
		recs, total, err := page(ctx, off)
		if err != nil {
			return nil, 0, fmt.Errorf("whatif: reading %s: %w", what, err)
		}
		if off == 0 {
			matching = total
		}
		for _, x := range recs {
			if !seen[id(x)] {
				seen[id(x)] = true
				out = append(out, x)
			}
		}
		if len(recs) < searchPage || len(out) >= limit || int64(off+searchPage) >= total {
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

// connectionSpan is the FirstSeen range of the connections txs opened,
// false when none opened one. Only such a transaction (Tconn > 0) needs
// the record (its SYN and SYN/ACK times); the others would lend only
// their MSS, for which the model has a default. Its Start is its first
// SYN's capture time less half the client RTT (reconstruct's timing), so
// the connection was first seen in [Start, Start+RTTClient].
func connectionSpan(txs []*reconstruct.Transaction) (query.TimeRange, bool) {
	var span query.TimeRange
	found := false
	for _, t := range txs {
		if t.Tconn <= 0 {
			continue
		}
		hi := t.Start + max(t.RTTClient, 0) + 1
		if !found {
			span, found = query.TimeRange{From: t.Start, To: hi}, true
		}
		span.From, span.To = min(span.From, t.Start), max(span.To, hi)
	}
	return span, found
}

// readConnections reads the newest MaxConnections connections of the span
// txs opened theirs in, in pages of the store's bulk read.
func (r *Records) readConnections(ctx context.Context, q Querier, txs []*reconstruct.Transaction) ([]*reconstruct.Connection, error) {
	span, ok := connectionSpan(txs)
	if !ok {
		return nil, nil
	}
	limit := r.Limits.MaxConnections
	conns, matching, err := pageNewest(ctx, "connections", limit, func(ctx context.Context, off int) ([]*reconstruct.Connection, int64, error) {
		res, err := q.SearchConnections(ctx, query.ConnectionSearch{Range: span, Sensor: r.Limits.Sensor, Offset: off, Limit: searchPage})
		return res.Connections, res.Total, err
	}, func(c *reconstruct.Connection) string { return c.ID })
	if err != nil {
		return nil, err
	}
	if len(conns) >= limit && matching > int64(limit) {
		r.Loaded.ConnectionsTruncated = true
		conns = conns[:limit]
	}
	return conns, nil
}

// countMissing counts the transactions that opened a connection whose
// record was not read.
func (r *Records) countMissing(txs []*reconstruct.Transaction, conns []*reconstruct.Connection) {
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
}

// lossyHandshake guesses from a transaction alone that its connection's
// handshake lost a SYN or SYN/ACK: the connect time exceeds the client RTT
// by more than the shortest retransmission timeout (200 ms) can explain
// otherwise. An unknown RTT counts as lossy. It tells, of the transactions
// whose connection was not read, those the SYN models would have acted on.
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
	if l.ConnectionsTruncated {
		notes = append(notes, fmt.Sprintf("Only the newest %d connections of this span were read: choose a shorter range to see all.", lim.MaxConnections))
	}
	if l.NoConnection > 0 {
		notes = append(notes, fmt.Sprintf("%d transactions opened a connection whose record was not read (%d of them with a lost SYN or SYN/ACK): FAST SYN, FAST SYN/ACK and SPLICE leave them as measured, REWRITE EMBEDS assumes a 1460-byte MSS.",
			l.NoConnection, l.LossyNoConnection))
	}
	return notes
}
