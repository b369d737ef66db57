package compare

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rtmon/rtmon/store/query"
)

// fakeStore answers Sample from per-range, per-class values (every
// component the same values), and records the queries.
type fakeStore struct {
	byRange map[int64]map[string][]int64 // Range.From -> class -> values
	asked   []query.SampleQuery
}

func (f *fakeStore) Sample(_ context.Context, q query.SampleQuery) ([]query.ClassSample, error) {
	f.asked = append(f.asked, q)
	var out []query.ClassSample
	for class, v := range f.byRange[q.Range.From] {
		if q.Class != "" && q.Class != class {
			continue
		}
		cs := query.ClassSample{Class: class, Count: int64(len(v)), Values: map[string][]int64{}}
		for _, c := range q.Components {
			cs.Values[c] = v[:min(len(v), q.Max)]
		}
		out = append(out, cs)
	}
	return out, nil
}

func TestRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	f := &fakeStore{byRange: map[int64]map[string][]int64{
		1: {"gold": lognormal(rng, 200, 1e8, 0.3, 0), "tin": lognormal(rng, 200, 1e8, 0.3, 0)},
		2: {"gold": lognormal(rng, 200, 1e8, 0.3, 5e7), "new": lognormal(rng, 200, 1e8, 0.3, 0)},
	}}
	req := Request{A: Side{Range: query.TimeRange{From: 1, To: 2}}, B: Side{Range: query.TimeRange{From: 2, To: 3}, Sensor: "west"}, MaxPerClass: 150}
	rep, err := Run(context.Background(), f, req)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"gold": Slower, "new": TooFew, "tin": TooFew}
	if len(rep.Classes) != 3 {
		t.Fatalf("classes %+v", rep.Classes)
	}
	for i, name := range []string{"gold", "new", "tin"} {
		c := rep.Classes[i]
		if c.Class != name || c.Verdict != want[name] || len(c.Rows) != len(TxComponents)+len(PvComponents) {
			t.Errorf("class %d: %s %q, %d rows; want %s %q", i, c.Class, c.Verdict, len(c.Rows), name, want[name])
		}
	}
	gold := rep.Classes[0]
	if gold.CountA != 200 || gold.Rows[0].A.N != 150 {
		t.Errorf("gold: count %d, sample %d; want 200 and the bound 150", gold.CountA, gold.Rows[0].A.N)
	}
	h := gold.Rows[0].Hist
	sa, sb := 0.0, 0.0
	for i := range h.A {
		sa, sb = sa+h.A[i], sb+h.B[i]
	}
	if math.Abs(sa-1) > 1e-9 || math.Abs(sb-1) > 1e-9 || len(h.Edges) != len(h.A)+1 {
		t.Errorf("histogram shares sum to %v and %v, %d edges for %d bins", sa, sb, len(h.Edges), len(h.A))
	}
	for _, q := range f.asked {
		if q.Max != 150 || (q.Range.From == 2) != (q.Sensor == "west") {
			t.Errorf("query %+v: bound or sensor not passed", q)
		}
	}

	// Two classes of one range.
	req = Request{A: Side{Range: query.TimeRange{From: 1, To: 2}, Class: "tin"}, B: Side{Range: query.TimeRange{From: 1, To: 2}, Class: "gold"}}
	if rep, err = Run(context.Background(), f, req); err != nil || len(rep.Classes) != 1 ||
		rep.Classes[0].Class != "gold vs tin" || rep.Classes[0].Verdict != NoChange {
		t.Errorf("two classes: %v %+v", err, rep)
	}
	if _, err := Run(context.Background(), f, Request{A: Side{Class: "tin"}}); err == nil {
		t.Error("a class on one side only was accepted")
	}
}
