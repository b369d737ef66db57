package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/storetest"
)

// Several sensors writing the same minutes and classes into one store, one
// of them with its clock an hour fast and one an hour slow. When a minute's
// rollup was one row for every sensor, the newest version won: the fast
// sensor's recompute, made before the others wrote, hid their records from
// the stored rollups, and every reader had to find and recompute the
// minutes. Kept per sensor, each writer's rows cover exactly its records:
// a fresh reader's overview, of all sensors or of one, is answered from the
// stored rows alone (nothing recomputed) and equals the records' exact
// answers.
func TestRollupsPerSensor(t *testing.T) {
	ch := needCH(t)
	for _, engine := range []string{"duckdb", "clickhouse"} {
		t.Run(engine, func(t *testing.T) {
			url := "duckdb:" + filepath.Join(t.TempDir(), "sensors.duckdb")
			if engine == "clickhouse" {
				url = ch.URL(freshDB())
			}
			checkRollupsPerSensor(t, url)
		})
	}
}

func checkRollupsPerSensor(t *testing.T, url string) {
	ctx := context.Background()
	open := func(sensor string, skew time.Duration) store.Store {
		s, err := store.Open(ctx, url, store.Options{Sensor: sensor, Rollups: "on", SpillDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		store.SkewRollupClock(s, skew)
		return s
	}
	sensors := []struct {
		name string
		skew time.Duration
	}{{"fe-fast", time.Hour}, {"fe-true", 0}, {"fe-slow", -time.Hour}}
	writers := make([]store.Store, len(sensors))
	gens := make([]*storetest.Gen, len(sensors))
	for i, s := range sensors {
		writers[i] = open(s.name, s.skew)
		// The same start and pace: every sensor's records fall in the
		// same minutes (and across an hour's edge) and classes.
		gens[i] = storetest.NewGen(uint64(100+i), storetest.T0+int64(59*time.Minute+30*time.Second), int64(200*time.Millisecond))
	}
	// Turns: each writer stores a batch and its rollups, then the next;
	// the fast sensor first, so that its rows are the newest by version.
	for round := range 3 {
		for i, w := range writers {
			if err := w.WriteBatch(ctx, gens[i].Next(400)); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(ctx); err != nil {
				t.Fatalf("round %d, %s: %v", round, sensors[i].name, err)
			}
		}
	}
	reader := open("reader", 0)
	all := store.TimeRange{From: storetest.T0, To: storetest.T0 + 4*int64(time.Hour)}
	t.Run("by sensor", func(t *testing.T) { checkBySensor(t, reader, all, []string{"fe-fast", "fe-slow", "fe-true"}) })
	edges := []int64{0, int64(10 * time.Millisecond), int64(100 * time.Millisecond), int64(time.Second), int64(10 * time.Second)}
	for _, sensor := range []string{"", "fe-fast", "fe-true", "fe-slow"} {
		for _, kind := range []store.Kind{store.Transactions, store.Pageviews} {
			t.Run(fmt.Sprintf("%s/%s", sensorLabel(sensor), kind), func(t *testing.T) {
				sum, err := reader.Summary(ctx, store.SummaryQuery{Kind: kind, Range: all, Sensor: sensor, Edges: edges})
				if err != nil {
					t.Fatal(err)
				}
				if sum.Recomputed != 0 {
					t.Errorf("%d minutes recomputed: the stored rollups did not account for the records", sum.Recomputed)
				}
				raw, err := reader.SensorCounters(ctx, all, "", sensor)
				if err != nil {
					t.Fatal(err)
				}
				if raw.Transactions == 0 || raw.Pageviews == 0 {
					t.Fatalf("no records of sensor %q: %+v", sensor, raw)
				}
				if sum.Counters != raw {
					t.Errorf("rollup counters %+v\nwant the records' %+v", sum.Counters, raw)
				}
				exact, err := reader.Histogram(ctx, store.HistogramQuery{Kind: kind, Range: all, Sensor: sensor, Edges: edges})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(sum.Histograms, exact) {
					t.Errorf("rollup histograms %+v\nwant the records' %+v", sum.Histograms, exact)
				}
			})
		}
	}
}

// checkBySensor: every sensor's percentiles from one read of the rollups
// (the sensor panel's) are those of that sensor's own overview, and count
// the sensor's records per class.
func checkBySensor(t *testing.T, reader store.Store, all store.TimeRange, sensors []string) {
	ctx := context.Background()
	qs := []float64{0.5, 0.9, 0.99}
	sum, err := reader.Summary(ctx, store.SummaryQuery{Range: all, Qs: qs, BySensor: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sp := range sum.BySensor {
		got = append(got, sp.Sensor)
		one, err := reader.Summary(ctx, store.SummaryQuery{Range: all, Qs: qs, Sensor: sp.Sensor})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sp.Classes, one.Percentiles) {
			t.Errorf("sensor %s: by sensor %+v\nits own overview %+v", sp.Sensor, sp.Classes, one.Percentiles)
		}
		exact, err := reader.Percentiles(ctx, store.PercentileQuery{Range: all, Sensor: sp.Sensor, Component: "total", Qs: qs})
		if err != nil {
			t.Fatal(err)
		}
		for _, miss := range storetest.RollupPercentileMisses(sp.Classes, exact, qs) {
			t.Errorf("sensor %s by sensor: %s", sp.Sensor, miss)
		}
	}
	if !reflect.DeepEqual(got, sensors) {
		t.Errorf("sensors by sensor %v, want %v", got, sensors)
	}
}

func sensorLabel(s string) string {
	if s == "" {
		return "all"
	}
	return s
}

// A minute's rows stored by a process whose clock runs an hour fast go
// stale when records arrive that it did not roll up (here another store of
// the same sensor with rollups off, as a sensor restarted without them or
// one that died between insert and recompute). A reader on a right clock
// recomputes the minute; its rows must outrank the stale ones, so the next
// reader recomputes nothing. Versions from the reader's clock alone were
// older than the stale rows: every read recomputed the minute again.
func TestRollupRecomputeOutranksFastClock(t *testing.T) {
	ch := needCH(t)
	for _, engine := range []string{"duckdb", "clickhouse"} {
		t.Run(engine, func(t *testing.T) {
			url := "duckdb:" + filepath.Join(t.TempDir(), "fast.duckdb")
			if engine == "clickhouse" {
				url = ch.URL(freshDB())
			}
			ctx := context.Background()
			open := func(rollups string, skew time.Duration) store.Store {
				s, err := store.Open(ctx, url, store.Options{Sensor: "fe", Rollups: rollups, SpillDir: t.TempDir()})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				store.SkewRollupClock(s, skew)
				return s
			}
			gen := storetest.NewGen(7, storetest.T0+int64(59*time.Minute), int64(100*time.Millisecond))
			write := func(s store.Store) {
				if err := s.WriteBatch(ctx, gen.Next(300)); err != nil {
					t.Fatal(err)
				}
				if err := s.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			write(open("on", time.Hour))
			write(open("off", 0))
			all := store.TimeRange{From: storetest.T0, To: storetest.T0 + 3*int64(time.Hour)}
			for i, wantRecomputed := range []bool{true, false, false} {
				sum := summaryOfRecords(t, open("on", 0), store.SummaryQuery{Range: all}, fmt.Sprintf("read %d", i))
				if (sum.Recomputed > 0) != wantRecomputed {
					t.Errorf("read %d: %d minutes recomputed, want some: %v", i, sum.Recomputed, wantRecomputed)
				}
			}
		})
	}
}

// summaryOfRecords reads s's Summary for sq and checks its counters
// against the records' (of sq's sensor), saying what it checked as what.
func summaryOfRecords(t *testing.T, s store.Store, sq store.SummaryQuery, what string) *store.Summary {
	t.Helper()
	ctx := context.Background()
	sum, err := s.Summary(ctx, sq)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	raw, err := s.SensorCounters(ctx, sq.Range, "", sq.Sensor)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if sum.Counters != raw {
		t.Errorf("%s: counters %+v\nwant the records' %+v", what, sum.Counters, raw)
	}
	return sum
}
