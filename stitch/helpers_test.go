package stitch

import (
	"context"
	"hash/fnv"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/synth"
)

// item is one record in the order the tracker emitted it.
type item struct {
	tx   *reconstruct.Transaction
	conn *reconstruct.Connection
}

type itemSink struct{ items []item }

func (s *itemSink) Connection(c *reconstruct.Connection)    { s.items = append(s.items, item{conn: c}) }
func (s *itemSink) Transaction(tx *reconstruct.Transaction) { s.items = append(s.items, item{tx: tx}) }

// connID is the connection a record belongs to.
func (it item) connID() string {
	if it.tx != nil {
		return it.tx.ConnectionID
	}
	return it.conn.ID
}

// capture reconstructs a synthetic capture of browsers loading pages:
// several clients, each page's objects over up to six parallel connections,
// some SYN losses.
func synthItems(t *testing.T, wl synth.Workload) []item {
	t.Helper()
	path := filepath.Join(t.TempDir(), "browse.pcap")
	if _, err := synth.GenerateFile(path, synth.Options{Nanosecond: true}, wl); err != nil {
		t.Fatal(err)
	}
	src, err := capture.OpenFiles([]string{path}, capture.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out := &itemSink{}
	tr := reconstruct.NewTracker(reconstruct.Config{}, out)
	if err := tr.ReadFrom(src, nil); err != nil {
		t.Fatal(err)
	}
	tr.Flush()
	return out.items
}

// sensorOf splits connections between two front ends by a hash of the
// connection, as ECMP does: one client's connections land on both.
func sensorOf(connID string) string {
	h := fnv.New32a()
	h.Write([]byte(connID))
	if h.Sum32()%2 == 0 {
		return "fe-a"
	}
	return "fe-b"
}

// copyItems copies the records, so each grouping stamps its own.
func copyItems(items []item) []item {
	out := make([]item, len(items))
	for i, it := range items {
		if it.tx != nil {
			c := *it.tx
			out[i].tx = &c
		} else {
			c := *it.conn
			out[i].conn = &c
		}
	}
	return out
}

// groupedSink keeps what a Grouper forwards.
type groupedSink struct {
	batch store.Batch
}

func (s *groupedSink) Connection(c *reconstruct.Connection) {
	s.batch.Connections = append(s.batch.Connections, c)
}
func (s *groupedSink) Transaction(tx *reconstruct.Transaction) {
	s.batch.Transactions = append(s.batch.Transactions, tx)
}
func (s *groupedSink) Pageview(p *pageview.Pageview) {
	s.batch.Pageviews = append(s.batch.Pageviews, p)
}

// group runs the live pipeline's grouping over items in their order.
func group(items []item) store.Batch {
	out := &groupedSink{}
	g := pageview.NewGrouper(pageview.Config{}, nil, out)
	for _, it := range items {
		if it.tx != nil {
			g.Transaction(it.tx)
		} else {
			g.Connection(it.conn)
		}
	}
	g.Flush()
	return out.batch
}

// writeSensors stores each sensor's own records and pageviews, as each
// sensor's pipeline does with its sensor id, into the store at url.
func writeSensors(t *testing.T, url string, items []item) {
	writeSensorsWith(t, url, items, store.Options{})
}

func writeSensorsWith(t *testing.T, url string, items []item, opts store.Options) {
	t.Helper()
	per := map[string][]item{}
	for _, it := range copyItems(items) {
		per[sensorOf(it.connID())] = append(per[sensorOf(it.connID())], it)
	}
	for _, sensor := range []string{"fe-a", "fe-b"} {
		if len(per[sensor]) == 0 {
			t.Fatalf("sensor %s saw nothing", sensor)
		}
		opts.Sensor = sensor
		st, err := store.Open(context.Background(), url, opts)
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
}

// snapshot is what the store holds of a range: each pageview, and the
// pageview id of each transaction.
type snapshot struct {
	pvs  map[string]*pageview.Pageview
	txPV map[string]string
	n    int // pageview rows (a duplicate id would show here)
}

func readSnapshot(t *testing.T, st store.Store, r store.TimeRange) snapshot {
	t.Helper()
	ctx := context.Background()
	s := snapshot{pvs: map[string]*pageview.Pageview{}, txPV: map[string]string{}}
	for off := 0; ; off += 10000 {
		res, err := st.Search(ctx, store.SearchQuery{Kind: store.Pageviews, Range: r, Limit: 10000, Offset: off})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range res.Pageviews {
			s.pvs[p.ID] = p
			s.n++
		}
		if len(res.Pageviews) < 10000 {
			break
		}
	}
	for off := 0; ; off += 10000 {
		res, err := st.Search(ctx, store.SearchQuery{Kind: store.Transactions, Range: r, Limit: 10000, Offset: off})
		if err != nil {
			t.Fatal(err)
		}
		for _, tx := range res.Transactions {
			s.txPV[tx.ID] = tx.PageviewID
		}
		if len(res.Transactions) < 10000 {
			break
		}
	}
	return s
}

// members lists each pageview's transaction ids, sorted.
func (s snapshot) members() map[string][]string {
	out := map[string][]string{}
	for tx, pv := range s.txPV {
		if pv != "" {
			out[pv] = append(out[pv], tx)
		}
	}
	for _, m := range out {
		slices.Sort(m)
	}
	return out
}

func openStore(t *testing.T, url string) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), url, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func tempDuck(t *testing.T, name string) string {
	return "duckdb:" + filepath.Join(t.TempDir(), name+".db")
}
