package compare

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/rtmon/rtmon/store/query"
)

// Sampler is what Run asks of a store (query.Querier's method of that name).
type Sampler interface {
	Sample(ctx context.Context, q query.SampleQuery) ([]query.ClassSample, error)
}

// Side selects one side's records: a time range, and optionally one
// class or one sensor. Sides naming a class compare those two classes
// (one row group, "B vs A"); otherwise each class is compared with itself.
type Side struct {
	Range  query.TimeRange `json:"range"`
	Class  string          `json:"class,omitempty"`
	Sensor string          `json:"sensor,omitempty"`
}

// Request is one comparison: B against A.
type Request struct {
	A, B Side
	// Class keeps only this class (the per-class modes); "" = every class.
	Class string
	// MaxPerClass bounds each side's sample per class and kind (default
	// 5000, at most query.SampleMax): memory and time stay bounded
	// however many records the ranges hold.
	MaxPerClass int
	Options
}

// Components compared, per kind; the first of each kind is the total.
var (
	TxComponents = []string{"total", "tconn", "tserver", "ttransfer"}
	PvComponents = []string{"total"}
)

// Row compares one component of one kind. Hist, for the totals, is the
// two samples' distributions on shared log-spaced bins.
type Row struct {
	Kind      query.Kind `json:"kind"`
	Component string     `json:"component"`
	Result
	Hist *Hist `json:"hist,omitempty"`
}

// Hist holds each side's share of its sample per bin [Edges[i], Edges[i+1]).
type Hist struct {
	Edges []int64   `json:"edges"`
	A     []float64 `json:"a"`
	B     []float64 `json:"b"`
}

// ClassReport is one class's comparison. Verdict is the transactions'
// total's: the headline a reader wants first; the rows have their own.
// CountA and CountB are the class's transactions in each side's range
// (the samples hold at most MaxPerClass of them).
type ClassReport struct {
	Class   string `json:"class"`
	Verdict string `json:"verdict"`
	CountA  int64  `json:"count_a"`
	CountB  int64  `json:"count_b"`
	Rows    []Row  `json:"rows"`
}

// Report is a whole comparison.
type Report struct {
	A           Side          `json:"a"`
	B           Side          `json:"b"`
	MaxPerClass int           `json:"max_per_class"`
	Alpha       float64       `json:"alpha"`
	Confidence  float64       `json:"confidence"`
	Resamples   int           `json:"resamples"`
	Classes     []ClassReport `json:"classes"`
}

// Run reads both sides' samples from st and compares them per class.
func Run(ctx context.Context, st Sampler, req Request) (*Report, error) {
	if (req.A.Class == "") != (req.B.Class == "") {
		return nil, errors.New("compare: give a class to both sides or to neither")
	}
	opt := req.Options.withDefaults()
	maxN := req.MaxPerClass
	if maxN <= 0 {
		maxN = 5000
	}
	maxN = min(maxN, query.SampleMax)
	rep := &Report{A: req.A, B: req.B, MaxPerClass: maxN, Alpha: opt.Alpha, Confidence: opt.Confidence, Resamples: opt.Resamples}
	type sides struct{ a, b []query.ClassSample }
	read := map[query.Kind]sides{}
	for _, k := range []query.Kind{query.Transactions, query.Pageviews} {
		comps := TxComponents
		if k == query.Pageviews {
			comps = PvComponents
		}
		var s sides
		var err error
		if s.a, err = sideSample(ctx, st, req.A, req.Class, k, comps, maxN, opt.Seed); err != nil {
			return nil, err
		}
		if s.b, err = sideSample(ctx, st, req.B, req.Class, k, comps, maxN, opt.Seed); err != nil {
			return nil, err
		}
		read[k] = s
	}
	classes := classNames(read[query.Transactions].a, read[query.Transactions].b, read[query.Pageviews].a, read[query.Pageviews].b)
	if req.A.Class != "" {
		// Two classes: each side's sample is its one class, under one name.
		classes = []string{req.B.Class + " vs " + req.A.Class}
	}
	for _, c := range classes {
		cr := ClassReport{Class: c}
		for _, k := range []query.Kind{query.Transactions, query.Pageviews} {
			a, b := pick(read[k].a, c, req.A.Class), pick(read[k].b, c, req.B.Class)
			if k == query.Transactions {
				cr.CountA, cr.CountB = a.Count, b.Count
			}
			comps := TxComponents
			if k == query.Pageviews {
				comps = PvComponents
			}
			for _, comp := range comps {
				row := Row{Kind: k, Component: comp, Result: Compare(a.Values[comp], b.Values[comp], opt)}
				if comp == "total" {
					row.Hist = histogram(a.Values[comp], b.Values[comp], 40)
				}
				cr.Rows = append(cr.Rows, row)
			}
		}
		cr.Verdict = cr.Rows[0].Verdict
		rep.Classes = append(rep.Classes, cr)
	}
	return rep, nil
}

// sideSample reads one side's sample of kind k: its own class if it names
// one, else the filter class (or every class).
func sideSample(ctx context.Context, st Sampler, s Side, filter string, k query.Kind, comps []string, maxN int, seed uint64) ([]query.ClassSample, error) {
	class := filter
	if s.Class != "" {
		class = s.Class
	}
	out, err := st.Sample(ctx, query.SampleQuery{Kind: k, Range: s.Range, Class: class, Sensor: s.Sensor,
		Components: comps, Max: maxN, Seed: seed})
	if err != nil {
		return nil, fmt.Errorf("compare: reading %s: %w", k, err)
	}
	return out, nil
}

// classNames are the classes of any sample, sorted.
func classNames(lists ...[]query.ClassSample) []string {
	var out []string
	for _, l := range lists {
		for _, cs := range l {
			if !slices.Contains(out, cs.Class) {
				out = append(out, cs.Class)
			}
		}
	}
	slices.Sort(out)
	return out
}

// pick is the sample of class c (or of own, the side's class), empty when
// the side has none.
func pick(l []query.ClassSample, c, own string) query.ClassSample {
	if own != "" {
		c = own
	}
	for _, cs := range l {
		if cs.Class == c {
			return cs
		}
	}
	return query.ClassSample{Class: c}
}

// histogram bins both samples on n log-spaced bins spanning them both,
// each side as shares of its own count, so sides of unequal sizes overlay.
func histogram(a, b []int64, n int) *Hist {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	lo, hi := int64(math.MaxInt64), int64(1)
	for _, s := range [][]int64{a, b} {
		for _, v := range s {
			lo, hi = min(lo, max(v, 1)), max(hi, v)
		}
	}
	if hi <= lo {
		hi = lo + 1
	}
	edges := make([]int64, 0, n+1)
	r := math.Pow(float64(hi+1)/float64(lo), 1/float64(n))
	for i := 0; i <= n; i++ {
		e := int64(math.Round(float64(lo) * math.Pow(r, float64(i))))
		if len(edges) == 0 || e > edges[len(edges)-1] {
			edges = append(edges, e)
		}
	}
	h := &Hist{Edges: edges, A: shares(a, edges), B: shares(b, edges)}
	return h
}

func shares(s []int64, edges []int64) []float64 {
	out := make([]float64, len(edges)-1)
	if len(s) == 0 {
		return out
	}
	for _, v := range s {
		i, _ := slices.BinarySearch(edges, v+1) // first edge > v
		out[min(max(i-1, 0), len(out)-1)]++
	}
	for i := range out {
		out[i] /= float64(len(s))
	}
	return out
}
