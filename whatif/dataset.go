package whatif

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

// Bounds on what Load reads.
const (
	MaxRecords    = 20_000_000 // per file
	maxRecordLine = 1 << 20
)

// DefaultClass is the class of records that carry none.
const DefaultClass = "default"

// Dataset is an immutable, replay-ready view of one capture's records.
// Evaluate and Rank may be called concurrently.
type Dataset struct {
	txs       []txInfo
	units     []unit
	pageviews bool
	classes   []string
	model     LoadModel
	conc      []int32 // measured concurrency at each transaction's service start
	starts    []int64 // sorted service starts and ends, for concurrency queries
	ends      []int64
	syn       synSchedules // the clients' SYN retransmission schedules
	// ghosts: connections whose every SYN was dropped and whose client
	// gave up (no transaction): load the queue model can let in.
	ghosts []*reconstruct.Connection
	// qfits: queue models fitted so far (Evaluate fits lazily).
	qmu   sync.Mutex
	qfits map[queueFitKey]*queueFit
}

type txInfo struct {
	tx    *reconstruct.Transaction
	conn  *reconstruct.Connection // nil when the connection record is missing
	fresh bool                    // the first transaction on a captured handshake
	prev  int                     // previous transaction on the same connection, -1
	embed bool
	unit  int
}

type unit struct {
	id        string
	class     string
	client    netip.Addr
	start     int64
	end       int64
	total     int64
	txs       []int // by Start
	container int   // -1 when unknown
	// standalone: a transaction that belongs to no pageview (an API call,
	// a load generator's fetch), replayed as a unit of one object.
	standalone bool
}

// Load reads DIR/connections.jsonl, DIR/transactions.jsonl and, when present,
// DIR/pageviews.jsonl as written by rtmon analyze --out DIR.
func Load(dir string) (*Dataset, error) {
	conns, err := readJSONL[reconstruct.Connection](filepath.Join(dir, "connections.jsonl"))
	if err != nil {
		return nil, err
	}
	txs, err := readJSONL[reconstruct.Transaction](filepath.Join(dir, "transactions.jsonl"))
	if err != nil {
		return nil, err
	}
	pvs, err := readJSONL[pageview.Pageview](filepath.Join(dir, "pageviews.jsonl"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return NewDataset(conns, txs, pvs)
}

// readJSONL reads one record of type T per non-blank line of path.
func readJSONL[T any](path string) ([]*T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("whatif: %w", err)
	}
	defer f.Close()
	var out []*T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), maxRecordLine)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		if n > MaxRecords {
			return nil, fmt.Errorf("whatif: %s: more than %d records", path, MaxRecords)
		}
		rec := new(T)
		if err := json.Unmarshal(line, rec); err != nil {
			return nil, fmt.Errorf("whatif: %s line %d: %w", path, n, err)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("whatif: reading %s: %w", path, err)
	}
	return out, nil
}

// NewDataset builds a dataset from records in memory. pvs may be nil: the
// transactions are then the units. A transaction belongs to the pageview its
// PageviewID names; without one, to the pageview whose ContainerID names it,
// else to the pageview of the same client whose [Start, End] holds its start
// (the latest started). A transaction in no pageview is a unit of its own
// (stand-alone: API calls, load generators), so every unit of traffic is
// replayed. A transaction's class is its own Class, else its connection's,
// else DefaultClass; a pageview's is its own.
func NewDataset(conns []*reconstruct.Connection, txs []*reconstruct.Transaction, pvs []*pageview.Pageview) (*Dataset, error) {
	return newDataset(conns, txs, pvs)
}

func newDataset(conns []*reconstruct.Connection, txs []*reconstruct.Transaction, pvs []*pageview.Pageview) (*Dataset, error) {
	byID := make(map[string]*reconstruct.Connection, len(conns))
	for _, c := range conns {
		byID[c.ID] = c
	}
	d := &Dataset{pageviews: len(pvs) > 0}
	// Transactions in time order; per connection, by index.
	order := slices.Clone(txs)
	slices.SortStableFunc(order, func(a, b *reconstruct.Transaction) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), strings.Compare(a.ID, b.ID))
	})
	last := map[string]int{}
	d.txs = make([]txInfo, len(order))
	for i, t := range order {
		c := byID[t.ConnectionID]
		ti := txInfo{tx: t, conn: c, prev: -1, unit: -1}
		if j, ok := last[t.ConnectionID]; ok && t.ConnectionID != "" {
			ti.prev = j
		}
		last[t.ConnectionID] = i
		ti.fresh = t.Tconn > 0 && c != nil && len(c.SYNTimes) > 0 && ti.prev < 0
		d.txs[i] = ti
	}
	classOf := func(i int) string {
		t := d.txs[i]
		if t.tx.Class != "" {
			return t.tx.Class
		}
		if t.conn != nil && t.conn.Class != "" {
			return t.conn.Class
		}
		return DefaultClass
	}
	if !d.pageviews {
		for i, t := range d.txs {
			d.txs[i].unit = len(d.units)
			// Without pageviews, every non-HTML response counts as embedded.
			d.txs[i].embed = !strings.HasPrefix(strings.ToLower(t.tx.ContentType), "text/html")
			d.units = append(d.units, unit{id: t.tx.ID, class: classOf(i), client: t.tx.Client,
				start: t.tx.Start, end: t.tx.End, total: t.tx.Total, txs: []int{i}, container: -1})
		}
	} else {
		d.linkPageviews(pvs, classOf)
	}
	slices.SortStableFunc(d.units, func(a, b unit) int { return cmp.Compare(a.start, b.start) })
	for ui := range d.units {
		for _, ti := range d.units[ui].txs {
			d.txs[ti].unit = ui
		}
	}
	seen := map[string]bool{}
	for _, u := range d.units {
		if !seen[u.class] {
			seen[u.class] = true
			d.classes = append(d.classes, u.class)
		}
	}
	used := make(map[string]bool, len(txs))
	for _, t := range txs {
		used[t.ConnectionID] = true
	}
	for _, c := range conns {
		if !used[c.ID] && len(c.SYNTimes) > 0 && c.Established == 0 {
			d.ghosts = append(d.ghosts, c)
		}
	}
	slices.Sort(d.classes)
	d.syn = learnSYNSchedules(conns, func(c *reconstruct.Connection) string {
		return cmp.Or(c.Class, DefaultClass)
	})
	d.measureLoad()
	return d, nil
}

func (d *Dataset) linkPageviews(pvs []*pageview.Pageview, classOf func(tx int) string) {
	pvIndex := make(map[string]int, len(pvs))
	byClient := map[netip.Addr][]int{}
	for i, p := range pvs {
		class := p.Class
		if class == "" {
			class = DefaultClass
		}
		pvIndex[p.ID] = i
		byClient[p.Client] = append(byClient[p.Client], i)
		d.units = append(d.units, unit{id: p.ID, class: class, client: p.Client, start: p.Start,
			end: p.End, total: p.Total, container: -1})
	}
	containers := map[string]int{}
	for i, p := range pvs {
		if p.ContainerID != "" {
			containers[p.ContainerID] = i
		}
	}
	for ti, t := range d.txs {
		ui := -1
		if j, ok := pvIndex[t.tx.PageviewID]; ok && t.tx.PageviewID != "" {
			ui = j
		}
		if j, ok := containers[t.tx.ID]; ok {
			ui = j
		}
		if ui < 0 {
			// Without an explicit link: the client's pageview in progress at the
			// transaction's start, the latest started if several overlap.
			for _, j := range byClient[t.tx.Client] {
				u := &d.units[j]
				if u.start <= t.tx.Start && t.tx.Start <= u.end && (ui < 0 || u.start > d.units[ui].start) {
					ui = j
				}
			}
		}
		if ui < 0 {
			// Part of no pageview: a unit of its own, not an embed.
			d.units = append(d.units, unit{id: t.tx.ID, class: classOf(ti), client: t.tx.Client,
				start: t.tx.Start, end: t.tx.End, total: t.tx.Total, txs: []int{ti}, container: -1, standalone: true})
			continue
		}
		u := &d.units[ui]
		u.txs = append(u.txs, ti)
		if pvs[ui].ContainerID == t.tx.ID {
			u.container = ti
		} else {
			d.txs[ti].embed = true
		}
	}
	// Units keep positions while linking; unit indices on transactions are
	// assigned after sorting by the caller.
}

// Classes lists the classes present, sorted.
func (d *Dataset) Classes() []string { return slices.Clone(d.classes) }

// Pageviews reports whether the records held pageviews. Transactions in
// none are then stand-alone units; without pageviews every transaction is.
func (d *Dataset) Pageviews() bool { return d.pageviews }

// Units is the number of units replayed: pageviews and stand-alone
// transactions.
func (d *Dataset) Units() int { return len(d.units) }

// UnitCounts splits Units into pageviews and stand-alone transactions.
func (d *Dataset) UnitCounts() (pageviews, transactions int) {
	for i := range d.units {
		if d.isPageview(&d.units[i]) {
			pageviews++
		} else {
			transactions++
		}
	}
	return pageviews, transactions
}

// UnitName says what the units are, as the CLI and the web page print it:
// "pageview", "transaction" or "pageview and transaction".
func (d *Dataset) UnitName() string {
	pv, tx := d.UnitCounts()
	switch {
	case pv > 0 && tx > 0:
		return "pageview and transaction"
	case pv > 0:
		return "pageview"
	}
	return "transaction"
}

func (d *Dataset) isPageview(u *unit) bool { return d.pageviews && !u.standalone }

// LiveReportDelay is how long after a unit ends rtmon live reports it:
// a pageview when its idle gap has passed with no new object and the
// records that might still join it have settled (pageview.DefaultIdleGap
// plus DefaultSettle, 7 s), then liveFeedLag, 8 s in all; a transaction
// at once. It is the Options.ReportDelay of a front end driven by rtmon's
// live RT conditions.
func (d *Dataset) LiveReportDelay() time.Duration {
	if pv, _ := d.UnitCounts(); pv > 0 {
		return pageview.DefaultIdleGap + pageview.DefaultSettle + liveFeedLag
	}
	return 0
}

// liveFeedLag is how much later than its idle gap and settling a front
// end reading rtmon live sees a pageview, on average: the live feed
// publishes once a second, and a pageview closes only when the
// transactions that began before its idle gap ended have settled (under
// load, a queued one holds it open). In the 10 of 12 RT_HIGH-driven
// testbed runs whose drop switched off within the burst, the real drop
// went off 0.9 s later than a 7 s delay puts it (computed from the run's
// own records), on average, and 0.1 s later than 8 s does.
const liveFeedLag = time.Second

// LoadModel returns the load model fitted on the capture.
func (d *Dataset) LoadModel() LoadModel { return d.model }
