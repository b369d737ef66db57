package store_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/storetest"
)

// The overview's histogram edges must lie on the rollup grid, or its
// histogram could not be read from rollups exactly.
func TestOverviewEdgesOnRollupGrid(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, "memory:", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	on := store.LogEdges(int64(time.Millisecond), int64(100*time.Second), 100)
	if _, err := s.Summary(ctx, store.SummaryQuery{Edges: on}); err != nil {
		t.Fatalf("edges of the overview rejected: %v", err)
	}
	off := store.LogEdges(int64(time.Millisecond), int64(100*time.Second), 99)
	if _, err := s.Summary(ctx, store.SummaryQuery{Edges: off}); err == nil {
		t.Fatal("edges off the rollup grid accepted")
	}
	if _, err := s.Summary(ctx, store.SummaryQuery{Step: 90 * time.Second}); err == nil {
		t.Fatal("a series step of 90 s accepted")
	}
}

func TestRollupEstimateWithinBound(t *testing.T) {
	if store.RollupRelError > 0.008 || store.RollupRelError < 0.007 {
		t.Fatalf("RollupRelError = %v, want about 0.76%%", store.RollupRelError)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		v := int64(math.Exp(rng.Float64()*math.Log(1e13/1e3)) * 1e3)
		b := store.RollupBucket(v)
		if store.RollupEdges[b] > v || (b+1 < len(store.RollupEdges) && store.RollupEdges[b+1] <= v) {
			t.Fatalf("RollupBucket(%d) = %d: [%d, %d)", v, b, store.RollupEdges[b], store.RollupEdges[b+1])
		}
		if b == len(store.RollupEdges)-1 {
			continue
		}
		est := store.RollupEstimate(b, 0, math.MaxInt64)
		if e := math.Abs(float64(est-v)) / float64(v); e > store.RollupRelError {
			t.Fatalf("estimate of %d is %d: error %.5f > %.5f", v, est, e, store.RollupRelError)
		}
		// Clamping to the group's extremes only moves the estimate
		// towards the values.
		if got := store.RollupEstimate(b, v, v); got != v {
			t.Fatalf("estimate clamped to [%d, %d] = %d", v, v, got)
		}
	}
}

// A writer that stopped between inserting records and recomputing their
// minutes, or one that does not keep the rollups, leaves stale rollups; the
// next Summary finds the minutes whose counts differ, recomputes them and
// answers exactly as if nothing had happened, once. Here a writer with
// rollups on stores the first half and one with rollups off the second.
func TestSummaryRecomputesStaleMinutes(t *testing.T) {
	for _, url := range []string{"duckdb:" + filepath.Join(t.TempDir(), "stale.duckdb"), needCH(t).URL(freshDB())} {
		t.Run(url[:6], func(t *testing.T) {
			ctx := context.Background()
			spill := t.TempDir()
			open := func(rollups string) store.Store {
				s, err := store.Open(ctx, url, store.Options{Rollups: rollups, SpillDir: spill})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			ref := storetest.NewRef()
			data := storetest.Dataset()
			half := len(data) / 2
			write := func(s store.Store, bs []store.Batch) {
				for _, b := range bs {
					ref.Add(b)
					if err := s.WriteBatch(ctx, b); err != nil {
						t.Fatal(err)
					}
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
			write(open("on"), data[:half])
			write(open("off"), data[half:])
			s := open("on")
			defer s.Close()
			checkStaleRollupsRecomputed(t, ctx, s, ref)
		})
	}
}

func checkStaleRollupsRecomputed(t *testing.T, ctx context.Context, s store.Store, ref *storetest.Ref) {
	// Extent reads the rollups only when they hold every record.
	for _, k := range []store.Kind{store.Transactions, store.Pageviews} {
		got, err := s.Extent(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if want := ref.Extent(k); got != want {
			t.Fatalf("Extent(%s) with stale rollups = %+v, want %+v", k, got, want)
		}
	}

	q := store.SummaryQuery{Range: store.TimeRange{From: storetest.T0}, Edges: store.LogEdges(1e6, 1e11, 100),
		Qs: []float64{0.5, 0.9, 0.99}, Step: time.Hour}
	got, err := s.Summary(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if got.Recomputed == 0 {
		t.Fatal("stale minutes not noticed")
	}
	got.Recomputed = 0
	if want := ref.Summary(q); !sameSummary(got, want) {
		t.Fatalf("after recompute:\n got %+v\nwant %+v", got, want)
	}
	again, err := s.Summary(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if again.Recomputed != 0 {
		t.Fatalf("recomputed %d minutes again", again.Recomputed)
	}
}

// loadDataset stores the conformance dataset and returns its reference.
func loadDataset(t *testing.T, ctx context.Context, s store.Store) *storetest.Ref {
	t.Helper()
	ref := storetest.NewRef()
	for _, b := range storetest.Dataset() {
		ref.Add(b)
		if err := s.WriteBatch(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return ref
}

func sameSummary(a, b *store.Summary) bool {
	return fmt.Sprintf("%+v", *a) == fmt.Sprintf("%+v", *b)
}

// Rollups default on for both engines and can be switched off; anything
// but on/off is refused at Open ("auto" meant on and is gone).
func TestRollupsOption(t *testing.T) {
	ctx := context.Background()
	for _, bad := range []string{"sometimes", "auto"} {
		if _, err := store.Open(ctx, "memory:", store.Options{Rollups: bad}); err == nil {
			t.Fatalf("rollups=%s accepted", bad)
		}
	}
	for _, c := range []struct {
		url, opt string
		want     bool
	}{{"memory:", "", true}, {"memory:", "off", false}, {"memory:", "on", true}, {needCH(t).URL(freshDB()), "", true}, {needCH(t).URL(freshDB()), "off", false}} {
		s, err := store.Open(ctx, c.url, store.Options{Rollups: c.opt, SpillDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Stats().Rollups; got != c.want {
			t.Errorf("%s rollups=%q: Stats().Rollups = %v", c.url, c.opt, got)
		}
		s.Close()
	}
}

// A UI over a database user that may not write still gets its overview:
// the stale minutes' recomputed rows answer the query even when they
// cannot be stored, and the failure is counted.
func TestSummaryWithoutRollupWrites(t *testing.T) {
	onEngines(t, store.Options{Rollups: "off"}, func(t *testing.T, ctx context.Context, s store.Store) {
		ref := loadDataset(t, ctx, s)
		store.FailRollupWrites(s, true)
		defer store.FailRollupWrites(s, false)
		q := store.SummaryQuery{Range: store.TimeRange{From: storetest.T0}, Edges: store.LogEdges(1e6, 1e11, 100), Qs: []float64{0.5, 0.99}}
		for i := 0; i < 2; i++ {
			got, err := s.Summary(ctx, q)
			if err != nil {
				t.Fatalf("summary with rollup writes failing: %v", err)
			}
			if got.Recomputed == 0 {
				t.Fatal("nothing recomputed, though nothing could be stored")
			}
			got.Recomputed = 0
			if want := ref.Summary(q); !sameSummary(got, want) {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
		}
		if s.Stats().RollupErrors == 0 {
			t.Error("failed rollup writes not counted")
		}
	})
}

// Hour rows are checked like minutes: a spoiled one is noticed by the
// count, the answer comes from the minutes, and the hour is recomputed.
func TestSummaryRepairsHourRollups(t *testing.T) {
	onEngines(t, store.Options{Rollups: "on"}, func(t *testing.T, ctx context.Context, s store.Store) {
		ref := loadDataset(t, ctx, s)
		if err := store.SpoilAnHourRollup(ctx, s); err != nil {
			t.Fatal(err)
		}
		q := store.SummaryQuery{Edges: store.LogEdges(1e6, 1e11, 100), Qs: []float64{0.5, 0.99}, Step: time.Hour}
		want := ref.Summary(q)
		for i := 0; i < 2; i++ {
			got, err := s.Summary(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			got.Recomputed = 0
			if !sameSummary(got, want) {
				t.Fatalf("call %d with a spoiled hour:\n got %+v\nwant %+v", i, got, want)
			}
		}
	})
}
