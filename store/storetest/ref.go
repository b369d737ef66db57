package storetest

import (
	"encoding/hex"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/rtmon/rtmon/addrpattern"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
)

// Ref answers the store's queries in plain Go over records held in memory;
// it is the executable form of the query contract.
type Ref struct {
	Conns   []*reconstruct.Connection
	Txs     []*reconstruct.Transaction
	Pvs     []*pageview.Pageview
	TxClass map[string]string
	seen    map[string]bool
}

// NewRef makes an empty reference.
func NewRef() *Ref { return &Ref{TxClass: map[string]string{}, seen: map[string]bool{}} }

// Add records a batch as the store would keep it (first copy of an id wins;
// a transaction without Class takes its connection's class, and is kept as
// a copy with that class, which is what the store returns).
func (r *Ref) Add(b store.Batch) {
	cc := map[string]string{}
	for _, c := range b.Connections {
		cc[c.ID] = c.Class
		if !r.seen["c"+c.ID] {
			r.seen["c"+c.ID] = true
			r.Conns = append(r.Conns, c)
		}
	}
	for _, t := range b.Transactions {
		if !r.seen["t"+t.ID] {
			r.seen["t"+t.ID] = true
			if t.Class == "" {
				c := *t
				c.Class = cc[t.ConnectionID]
				t = &c
			}
			r.Txs = append(r.Txs, t)
			r.TxClass[t.ID] = t.Class
		}
	}
	for _, p := range b.Pageviews {
		if !r.seen["p"+p.ID] {
			r.seen["p"+p.ID] = true
			r.Pvs = append(r.Pvs, p)
		}
	}
}

func inRange(r store.TimeRange, t int64) bool {
	return (r.From == 0 || t >= r.From) && (r.To == 0 || t < r.To)
}

// row is the query-relevant view of a transaction or pageview.
type row struct {
	id, class, host, url string
	client, server       netip.Addr
	start                int64
	status               int
	comp                 map[string]int64
	tx                   *reconstruct.Transaction
	pv                   *pageview.Pageview
}

func (r *Ref) rows(k store.Kind, tr store.TimeRange, class string) []row {
	var out []row
	if k == store.Pageviews {
		for _, p := range r.Pvs {
			if inRange(tr, p.Start) && (class == "" || p.Class == class) {
				out = append(out, row{p.ID, p.Class, p.Host, p.URL, p.Client, p.Server, p.Start, p.Status,
					map[string]int64{"total": p.Total, "tconn": p.Tconn, "tserver": p.Tserver, "ttransfer": p.Ttransfer, "tother": p.Tother}, nil, p})
			}
		}
		return out
	}
	for _, t := range r.Txs {
		c := r.TxClass[t.ID]
		if inRange(tr, t.Start) && (class == "" || c == class) {
			out = append(out, row{t.ID, c, t.Host, t.URL, t.Client, t.Server, t.Start, t.Status,
				map[string]int64{"total": t.Total, "tconn": t.Tconn, "ttls": t.Ttls, "trequest": t.Trequest, "tserver": t.Tserver,
					"ttransfer": t.Ttransfer, "rtt": t.RTTClient}, t, nil})
		}
	}
	return out
}

func comp(c string) string {
	if c == "" {
		return "total"
	}
	return c
}

// Histogram per the HistogramQuery contract.
func (r *Ref) Histogram(q store.HistogramQuery) []store.ClassHistogram {
	return perClass(r.rows(q.Kind, q.Range, q.Class),
		func(class string) *store.ClassHistogram {
			return &store.ClassHistogram{Class: class, Edges: q.Edges, Counts: make([]int64, len(q.Edges))}
		},
		func(h *store.ClassHistogram, x row) {
			v := x.comp[comp(q.Component)]
			b := 0
			for _, e := range q.Edges[1:] {
				if v >= e {
					b++
				}
			}
			h.Counts[b]++
			h.Total++
		})
}

// perClass folds rows into one answer per class (made by start, each row
// added by add), in class order; none if there are no rows.
func perClass[T any](rows []row, start func(class string) *T, add func(*T, row)) []T {
	by := map[string]*T{}
	for _, x := range rows {
		a := by[x.class]
		if a == nil {
			a = start(x.class)
			by[x.class] = a
		}
		add(a, x)
	}
	var out []T
	for _, class := range slices.Sorted(maps.Keys(by)) {
		out = append(out, *by[class])
	}
	return out
}

func quantiles(vs []int64, qs []float64) []int64 {
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	out := make([]int64, len(qs))
	n := len(vs)
	for i, q := range qs {
		idx := n - 1
		if q < 1 {
			idx = min(int(q*float64(n)), n-1)
		}
		out[i] = vs[idx]
	}
	return out
}

// PercentileSeries per the contract; Bucket 0 gives Percentiles (T = 0).
func (r *Ref) PercentileSeries(q store.PercentileQuery) []store.SeriesPoint {
	type key struct {
		class string
		t     int64
	}
	vals := map[key][]int64{}
	for _, x := range r.rows(q.Kind, q.Range, q.Class) {
		k := key{class: x.class}
		if q.Bucket > 0 {
			k.t = x.start / int64(q.Bucket) * int64(q.Bucket)
		}
		vals[k] = append(vals[k], x.comp[comp(q.Component)])
	}
	var out []store.SeriesPoint
	for k, vs := range vals {
		out = append(out, store.SeriesPoint{Class: k.class, T: k.t, Count: int64(len(vs)), Values: quantiles(vs, q.Qs)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Class != out[j].Class {
			return out[i].Class < out[j].Class
		}
		return out[i].T < out[j].T
	})
	return out
}

// Percentiles per the contract.
func (r *Ref) Percentiles(q store.PercentileQuery) []store.ClassPercentiles {
	q.Bucket = 0
	var out []store.ClassPercentiles
	for _, p := range r.PercentileSeries(q) {
		out = append(out, store.ClassPercentiles{Class: p.Class, Count: p.Count, Values: p.Values})
	}
	return out
}

func countIf(n *int64, cond bool) {
	if cond {
		*n++
	}
}

// Counters per the Counters doc.
func (r *Ref) Counters(tr store.TimeRange, class string) store.Counters {
	var c store.Counters
	for _, x := range r.Conns {
		if !inRange(tr, x.FirstSeen) || (class != "" && x.Class != class) {
			continue
		}
		c.Connections++
		c.SYNLosses += int64(x.SYNLosses)
		c.SYNACKLosses += int64(x.SYNACKLosses)
		c.SYNLossGap += x.SYNLossGap
		c.SYNACKLossGap += x.SYNACKLossGap
		c.ConnRetransBytes += x.RetransBytes
		countIf(&c.ConnsWithRetrans, x.RetransBytes > 0)
		countIf(&c.IncompleteConnections, x.Flags&reconstruct.FlagIncomplete != 0)
		countIf(&c.ResetConnections, x.Flags&reconstruct.FlagReset != 0)
	}
	for _, x := range r.rows(store.Transactions, tr, class) {
		t := x.tx
		c.Transactions++
		c.TxRetransBytes += t.RetransBytes
		countIf(&c.TxWithRetrans, t.RetransBytes > 0)
		countIf(&c.IncompleteTx, t.Flags&reconstruct.FlagIncomplete != 0)
		countIf(&c.NoResponseTx, t.Flags&reconstruct.FlagNoResponse != 0)
		countIf(&c.ServerErrors, t.Status >= 500)
	}
	for _, x := range r.rows(store.Pageviews, tr, class) {
		c.Pageviews++
		countIf(&c.IncompletePageviews, x.pv.Flags&reconstruct.FlagIncomplete != 0)
	}
	return c
}

func addrHex(a netip.Addr) string {
	b := a.As16()
	return hex.EncodeToString(b[:])
}

// TopSlow per the TopQuery doc.
func (r *Ref) TopSlow(q store.TopQuery) []store.TopRow {
	type agg struct {
		key, sortKey, path string
		n, sum, mx         int64
	}
	type group struct{ a, b string }
	by := map[group]*agg{}
	for _, x := range r.rows(q.Kind, q.Range, q.Class) {
		// URLs group and sort by the (host, url) pair.
		var k, sk, path string
		switch q.By {
		case "server":
			k, sk = x.server.String(), addrHex(x.server)
		case "client":
			k, sk = x.client.String(), addrHex(x.client)
		default:
			k, sk, path = x.host+x.url, x.host, x.url
		}
		a := by[group{sk, path}]
		if a == nil {
			a = &agg{key: k, sortKey: sk, path: path}
			by[group{sk, path}] = a
		}
		a.n++
		a.sum += x.comp["total"]
		a.mx = max(a.mx, x.comp["total"])
	}
	var as []*agg
	for _, a := range by {
		if a.n >= max(q.MinCount, 1) {
			as = append(as, a)
		}
	}
	sort.Slice(as, func(i, j int) bool {
		mi, mj := as[i].sum/as[i].n, as[j].sum/as[j].n
		if mi != mj {
			return mi > mj
		}
		if as[i].sortKey != as[j].sortKey {
			return as[i].sortKey < as[j].sortKey
		}
		return as[i].path < as[j].path
	})
	lim := q.Limit
	if lim <= 0 {
		lim = 20
	}
	var out []store.TopRow
	for i, a := range as {
		if i == lim {
			break
		}
		out = append(out, store.TopRow{Key: a.key, Count: a.n, Mean: a.sum / a.n, Max: a.mx})
	}
	return out
}

// Search per the SearchQuery doc; client must be valid.
func (r *Ref) Search(q store.SearchQuery) store.SearchResult {
	var match []row
	var pat addrpattern.Pattern
	if q.Client != "" {
		pat, _ = addrpattern.Parse(q.Client)
	}
	for _, x := range r.rows(q.Kind, q.Range, q.Class) {
		if q.Client != "" && !pat.Match(x.client) {
			continue
		}
		if q.URLContains != "" && !strings.Contains(x.url, q.URLContains) {
			continue
		}
		if q.Status != 0 && x.status != q.Status {
			continue
		}
		if q.MinTotal > 0 && x.comp["total"] < q.MinTotal {
			continue
		}
		if q.ID != "" && x.id != q.ID {
			continue
		}
		if v := x.comp[comp(q.Component)]; (q.ComponentMin != 0 && v < q.ComponentMin) || (q.ComponentMax != 0 && v >= q.ComponentMax) {
			continue
		}
		match = append(match, x)
	}
	page := newestPage(match, q.Offset, q.Limit, func(x row) (int64, string) { return x.start, x.id })
	res := store.SearchResult{Total: int64(len(match))}
	for _, x := range page {
		if x.tx != nil {
			res.Transactions = append(res.Transactions, x.tx)
		} else {
			res.Pageviews = append(res.Pageviews, x.pv)
		}
	}
	return res
}

// newestPage is page [offset, offset+limit) of match ordered as searches
// order it: newest first (key's start), ties by id. limit defaults to 50.
func newestPage[T any](match []T, offset, limit int, key func(T) (int64, string)) []T {
	sort.Slice(match, func(i, j int) bool {
		si, ii := key(match[i])
		sj, ij := key(match[j])
		if si != sj {
			return si > sj
		}
		return ii < ij
	})
	if limit <= 0 {
		limit = 50
	}
	if offset >= len(match) {
		return nil
	}
	return match[offset:min(offset+limit, len(match))]
}

// SearchConnections per the ConnectionSearch doc.
func (r *Ref) SearchConnections(q store.ConnectionSearch) store.ConnectionResult {
	var match []*reconstruct.Connection
	for _, c := range r.Conns {
		if inRange(q.Range, c.FirstSeen) {
			match = append(match, c)
		}
	}
	return store.ConnectionResult{Total: int64(len(match)),
		Connections: newestPage(match, q.Offset, q.Limit, func(c *reconstruct.Connection) (int64, string) { return c.FirstSeen, c.ID })}
}

// PageviewByID per the PageviewDetail doc.
func (r *Ref) PageviewByID(id string) *store.PageviewDetail {
	var pv *pageview.Pageview
	for _, p := range r.Pvs {
		if p.ID == id {
			pv = p
		}
	}
	if pv == nil {
		return nil
	}
	d := &store.PageviewDetail{Pageview: pv}
	ids := map[string]bool{}
	for _, t := range r.Txs {
		if t.PageviewID == pv.ID {
			d.Transactions = append(d.Transactions, t)
			ids[t.ConnectionID] = true
		}
	}
	sort.Slice(d.Transactions, func(i, j int) bool {
		a, b := d.Transactions[i], d.Transactions[j]
		if a.Start != b.Start {
			return a.Start < b.Start
		}
		return a.ID < b.ID
	})
	for _, c := range r.Conns {
		if ids[c.ID] {
			d.Connections = append(d.Connections, c)
		}
	}
	sort.Slice(d.Connections, func(i, j int) bool {
		a, b := d.Connections[i], d.Connections[j]
		if a.FirstSeen != b.FirstSeen {
			return a.FirstSeen < b.FirstSeen
		}
		return a.ID < b.ID
	})
	return d
}

// Classes per the Classes doc.
func (r *Ref) Classes(tr store.TimeRange) []string {
	set := map[string]bool{}
	for _, c := range r.Conns {
		if inRange(tr, c.FirstSeen) {
			set[c.Class] = true
		}
	}
	for _, x := range r.rows(store.Transactions, tr, "") {
		set[x.class] = true
	}
	for _, x := range r.rows(store.Pageviews, tr, "") {
		set[x.class] = true
	}
	out := []string{}
	for c := range set {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// Extent per the Extent doc.
func (r *Ref) Extent(k store.Kind) store.Extent {
	var e store.Extent
	for _, x := range r.rows(k, store.TimeRange{From: -1 << 62}, "") {
		if e.N == 0 || x.start < e.First {
			e.First = x.start
		}
		if e.N == 0 || x.start > e.Last {
			e.Last = x.start
		}
		e.N++
	}
	return e
}

// ComponentSums per the ComponentSums doc.
func (r *Ref) ComponentSums(q store.SumQuery) []store.ComponentSums {
	return perClass(r.rows(q.Kind, q.Range, q.Class),
		func(class string) *store.ComponentSums {
			return &store.ComponentSums{Class: class, Sums: map[string]int64{}}
		},
		func(cs *store.ComponentSums, x row) {
			cs.Count++
			for c, v := range x.comp {
				cs.Sums[c] += v
			}
		})
}

// Summary per the Summary contract, computed from the records directly:
// a percentile is the estimate of the bucket that holds the exact
// percentile's value.
func (r *Ref) Summary(q store.SummaryQuery) *store.Summary {
	s := &store.Summary{Classes: r.Classes(q.Range), Counters: r.Counters(q.Range, q.Class)}
	for _, c := range s.Classes {
		if q.Class == "" || c == q.Class {
			s.ByClass = append(s.ByClass, store.ClassCounters{Class: c, Counters: r.Counters(q.Range, c)})
		}
	}
	if q.Edges != nil {
		s.Histograms = r.Histogram(store.HistogramQuery{Kind: q.Kind, Range: q.Range, Class: q.Class, Edges: q.Edges})
	}
	s.Sums = r.ComponentSums(store.SumQuery{Kind: q.Kind, Range: q.Range, Class: q.Class})
	estimate := func(vs []int64) []int64 {
		exact := quantiles(vs, q.Qs) // sorts vs
		out := make([]int64, len(exact))
		for i, v := range exact {
			out[i] = store.RollupEstimate(store.RollupBucket(v), vs[0], vs[len(vs)-1])
		}
		return out
	}
	type key struct {
		class string
		t     int64
	}
	byClass := map[string][]int64{}
	bySeries := map[key][]int64{}
	for _, x := range r.rows(q.Kind, q.Range, q.Class) {
		v := x.comp["total"]
		byClass[x.class] = append(byClass[x.class], v)
		if q.Step > 0 {
			k := key{x.class, x.start / int64(q.Step) * int64(q.Step)}
			bySeries[k] = append(bySeries[k], v)
		}
	}
	if len(q.Qs) > 0 {
		for _, c := range s.Classes {
			if vs := byClass[c]; len(vs) > 0 {
				s.Percentiles = append(s.Percentiles, store.ClassPercentiles{Class: c, Count: int64(len(vs)), Values: estimate(vs)})
			}
		}
		for k, vs := range bySeries {
			s.Series = append(s.Series, store.SeriesPoint{Class: k.class, T: k.t, Count: int64(len(vs)), Values: estimate(vs)})
		}
		sort.Slice(s.Series, func(i, j int) bool {
			if s.Series[i].Class != s.Series[j].Class {
				return s.Series[i].Class < s.Series[j].Class
			}
			return s.Series[i].T < s.Series[j].T
		})
	}
	return s
}
