package store_test

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/query"
	"github.com/rtmon/rtmon/store/storetest"
)

// Two front ends' sensors write into one store; the per-sensor breakdown
// and every sensor filter must answer for exactly one front end's records.

func TestSensorsDuckDB(t *testing.T) {
	path := filepath.Join(t.TempDir(), "two.db")
	// DuckDB has one writer per file: the sensors take turns.
	checkSensors(t, func(sensor string, write func(store.Store)) store.Store {
		s, err := store.Open(context.Background(), "duckdb:"+path, store.Options{Sensor: sensor})
		if err != nil {
			t.Fatal(err)
		}
		write(s)
		return s
	}, true)
}

func TestSensorsClickHouse(t *testing.T) {
	url := needCH(t).URL(freshDB())
	checkSensors(t, func(sensor string, write func(store.Store)) store.Store {
		s, err := store.Open(context.Background(), url, store.Options{Sensor: sensor, SpillDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		write(s)
		return s
	}, false)
}

// checkSensors writes generated records as sensors "fe-a" and "fe-b"
// (open returns a store that has written; closeEach: close it before the
// next opens) and checks Sensors, Search, SearchConnections and
// Percentiles with and without the sensor filter against references
// built from each sensor's own batch.
func checkSensors(t *testing.T, open func(sensor string, write func(store.Store)) store.Store, closeEach bool) {
	ctx := context.Background()
	refs := map[string]*storetest.Ref{}
	var last store.Store
	var stitched string
	for i, sensor := range []string{"fe-a", "fe-b"} {
		g := storetest.NewGen(uint64(11+i), storetest.T0+int64(i)*1e11, 1e9)
		b := g.Next(600 + 400*i)
		if i == 0 {
			// A pageview stitched across both front ends, stored under its
			// container's sensor: a search by either finds it.
			b.Pageviews[0].Sensors = []string{"fe-a", "fe-b"}
			stitched = b.Pageviews[0].ID
		}
		refs[sensor] = storetest.NewRef()
		refs[sensor].Add(b)
		s := open(sensor, func(s store.Store) {
			if err := s.WriteBatch(ctx, b); err != nil {
				t.Fatal(err)
			}
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		})
		if closeEach && i == 0 {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Cleanup(func() { s.Close() })
		last = s
	}
	got, err := last.Sensors(ctx, query.TimeRange{})
	if err != nil {
		t.Fatal(err)
	}
	// fe-b wrote more transactions, so it is listed first.
	if len(got) != 2 || got[0].Sensor != "fe-b" || got[1].Sensor != "fe-a" {
		t.Fatalf("sensors %+v, want fe-b then fe-a", got)
	}
	for _, sc := range got {
		ref := refs[sc.Sensor]
		first, lastStart := ref.Txs[0].Start, ref.Txs[0].Start
		for _, tx := range ref.Txs {
			first, lastStart = min(first, tx.Start), max(lastStart, tx.Start)
		}
		want := query.SensorCounts{Sensor: sc.Sensor, Connections: int64(len(ref.Conns)), Transactions: int64(len(ref.Txs)),
			Pageviews: int64(len(ref.Pvs)), First: first, Last: lastStart}
		if sc != want {
			t.Errorf("sensor %s: %+v, want %+v", sc.Sensor, sc, want)
		}
		checkSensorFilters(t, last, sc.Sensor, ref)
	}
	if none, err := last.Search(ctx, query.SearchQuery{Sensor: "fe-c"}); err != nil || none.Total != 0 {
		t.Errorf("sensor fe-c: %d matches, %v; want none", none.Total, err)
	}
	// fe-b's pageviews are its own and the one stitched with fe-a; a name
	// that is part of another, or spans the list's separator, is none.
	for sensor, want := range map[string]int{"fe-b": len(refs["fe-b"].Pvs) + 1, "fe": 0, "a,fe-b": 0, "fe-a,fe-b": 0} {
		res, err := last.Search(ctx, query.SearchQuery{Kind: query.Pageviews, Sensor: sensor, Limit: 10000})
		found := slices.ContainsFunc(res.Pageviews, func(p *pageview.Pageview) bool { return p.ID == stitched })
		if err != nil || res.Total != int64(want) || found != (want > 0) {
			t.Errorf("pageviews of sensor %q: %d (stitched one found: %v), %v; want %d", sensor, res.Total, found, err, want)
		}
	}
	// fe-b started later: a range ending at fe-a's first record holds
	// fe-a alone.
	aFirst, bFirst := earliest(refs["fe-a"]), earliest(refs["fe-b"])
	if aFirst >= bFirst {
		t.Fatalf("fe-a's records start at %d, not before fe-b's at %d", aFirst, bFirst)
	}
	if cut, err := last.Sensors(ctx, query.TimeRange{To: aFirst + 1}); err != nil || len(cut) != 1 || cut[0].Sensor != "fe-a" {
		t.Errorf("sensors up to fe-a's first record: %+v, %v; want fe-a alone", cut, err)
	}
}

// earliest is the first start time of any of ref's records.
func earliest(ref *storetest.Ref) int64 {
	first := ref.Txs[0].Start
	for _, tx := range ref.Txs {
		first = min(first, tx.Start)
	}
	for _, c := range ref.Conns {
		first = min(first, c.FirstSeen)
	}
	for _, p := range ref.Pvs {
		first = min(first, p.Start)
	}
	return first
}

func checkSensorFilters(t *testing.T, s store.Store, sensor string, ref *storetest.Ref) {
	ctx := context.Background()
	res, err := s.Search(ctx, query.SearchQuery{Sensor: sensor, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	var ids, want []string
	for _, tx := range res.Transactions {
		ids = append(ids, tx.ID)
	}
	for _, tx := range ref.Txs {
		want = append(want, tx.ID)
	}
	slices.Sort(ids)
	slices.Sort(want)
	if res.Total != int64(len(ref.Txs)) || !slices.Equal(ids, want) {
		t.Errorf("%s: search found %d (%d read), want exactly its %d transactions", sensor, res.Total, len(ids), len(want))
	}
	if sensor == "fe-a" {
		// fe-b's are checked with the pageview stitched from both.
		pvs, err := s.Search(ctx, query.SearchQuery{Kind: query.Pageviews, Sensor: sensor, Limit: 10000})
		if err != nil || pvs.Total != int64(len(ref.Pvs)) {
			t.Errorf("%s: %d pageviews (%v), want %d", sensor, pvs.Total, err, len(ref.Pvs))
		}
	}
	conns, err := s.SearchConnections(ctx, query.ConnectionSearch{Sensor: sensor, Limit: 10000})
	if err != nil || conns.Total != int64(len(ref.Conns)) || len(conns.Connections) != len(ref.Conns) {
		t.Errorf("%s: %d connections (%v), want %d", sensor, conns.Total, err, len(ref.Conns))
	}
	pq := query.PercentileQuery{Kind: query.Transactions, Sensor: sensor, Component: "total", Qs: []float64{0.5, 0.9, 0.99}}
	gotP, err := s.Percentiles(ctx, pq)
	if err != nil {
		t.Fatal(err)
	}
	if wantP := ref.Percentiles(pq); !samePercentiles(gotP, wantP) {
		t.Errorf("%s: percentiles %+v, want %+v", sensor, gotP, wantP)
	}
	checkSensorOverview(t, s, sensor, ref)
}

// checkSensorOverview checks the reads of the overview's exact path (the
// one a sensor's overview takes) with the sensor filter: each must equal
// the reference of that sensor's records alone (whose queries ignore
// Sensor).
func checkSensorOverview(t *testing.T, s store.Store, sensor string, ref *storetest.Ref) {
	ctx := context.Background()
	same := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %s %+v\nwant %+v", sensor, what, got, want)
		}
	}
	for _, k := range []query.Kind{query.Transactions, query.Pageviews} {
		hq := query.HistogramQuery{Kind: k, Sensor: sensor, Component: "total", Edges: []int64{0, 1e8, 5e8, 2e9}}
		gotH, err := s.Histogram(ctx, hq)
		if err != nil {
			t.Fatal(err)
		}
		same(string(k)+" histogram", gotH, ref.Histogram(hq))
		sq := query.SumQuery{Kind: k, Sensor: sensor}
		gotS, err := s.ComponentSums(ctx, sq)
		if err != nil {
			t.Fatal(err)
		}
		same(string(k)+" component sums", gotS, ref.ComponentSums(sq))
	}
	for _, by := range []string{"url", "server", "client"} {
		tq := query.TopQuery{Kind: query.Transactions, Sensor: sensor, By: by, Limit: 10}
		gotT, err := s.TopSlow(ctx, tq)
		if err != nil {
			t.Fatal(err)
		}
		same("top "+by, gotT, ref.TopSlow(tq))
	}
	gotC, err := s.SensorCounters(ctx, query.TimeRange{}, "", sensor)
	if err != nil {
		t.Fatal(err)
	}
	same("counters", gotC, ref.Counters(query.TimeRange{}, ""))
}

func samePercentiles(a, b []query.ClassPercentiles) bool {
	return slices.EqualFunc(a, b, func(x, y query.ClassPercentiles) bool {
		return x.Class == y.Class && x.Count == y.Count && slices.Equal(x.Values, y.Values)
	})
}

// TestSensorNameRefused: a name rows could not carry as it is (a comma
// would split a stitched pageview's sensor list) is refused at open.
func TestSensorNameRefused(t *testing.T) {
	for _, name := range []string{"fe-a,fe-b", "fe\n", strings.Repeat("x", 65)} {
		s, err := store.Open(context.Background(), "duckdb:"+filepath.Join(t.TempDir(), "s.db"), store.Options{Sensor: name})
		if err == nil {
			s.Close()
			t.Errorf("sensor %q: opened, want refused", name)
		}
	}
	s, err := store.Open(context.Background(), "duckdb:"+filepath.Join(t.TempDir(), "s.db"), store.Options{Sensor: "fe-a.dc1:443"})
	if err != nil {
		t.Fatalf("sensor fe-a.dc1:443: %v", err)
	}
	s.Close()
}
