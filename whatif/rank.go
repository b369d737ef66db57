package whatif

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rtmon/rtmon/reconstruct"
)

// MaxCandidates bounds the rule sets one Rank call replays.
const MaxCandidates = 500

// Ranked is one candidate rule set judged for one class.
type Ranked struct {
	Rules []string `json:"rules"`
	Class string   `json:"class"`
	// Gain: measured minus predicted mean for Class (ns; positive = faster);
	// GainP90 likewise for the 90th percentile.
	Gain    int64 `json:"gain_ns"`
	GainP90 int64 `json:"gain_p90_ns"`
	// Cost: the largest rise of the predicted mean over the measured one
	// among the other classes (ns, >= 0): what the others pay.
	Cost int64 `json:"cost_ns"`
	// CostClass is the class paying Cost ("" when nobody pays).
	CostClass string `json:"cost_class,omitempty"`
	// Failed: units predicted to fail, all classes.
	Failed int `json:"failed"`
	// Band (queue model): the class's null replay error at the median and
	// p90, relative; a gain within it is not distinguishable from the
	// model's own error.
	Band     *[2]float64 `json:"band,omitempty"`
	BandFree bool        `json:"band_free,omitempty"` // see ClassResult.BandFree
}

// Rank replays every candidate rule set and ranks them per class: by Gain
// (largest first), then by Cost (smallest first), ties in candidate order.
// The result holds one entry per class and candidate, classes in name order.
// The replays are independent, so they are spread over the cores; each
// core's share is consecutive candidates and the parts are joined in order,
// so the stable sort gives the order one core would.
func (d *Dataset) Rank(candidates [][]Rule, opts Options) ([]Ranked, error) {
	if len(candidates) > MaxCandidates {
		return nil, fmt.Errorf("whatif: %d candidate rule sets, at most %d", len(candidates), MaxCandidates)
	}
	n := max(1, min(runtime.GOMAXPROCS(0), len(candidates)))
	parts := make([][]Ranked, n)
	var g errgroup.Group
	for i := range n {
		lo, hi := i*len(candidates)/n, (i+1)*len(candidates)/n
		g.Go(func() (err error) {
			parts[i], err = d.judge(candidates[lo:hi], opts)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := slices.Concat(parts...)
	slices.SortStableFunc(out, func(a, b Ranked) int {
		return cmp.Or(strings.Compare(a.Class, b.Class), cmp.Compare(b.Gain, a.Gain), cmp.Compare(a.Cost, b.Cost))
	})
	return out, nil
}

// judge replays each candidate and rates it for every class, unsorted.
func (d *Dataset) judge(candidates [][]Rule, opts Options) ([]Ranked, error) {
	var out []Ranked
	for _, rs := range candidates {
		res, err := d.Evaluate(rs, opts)
		if err != nil {
			return nil, fmt.Errorf("whatif: evaluating %s: %w", strings.Join(res.rulesOr(rs), "; "), err)
		}
		failed := 0
		for _, c := range res.Classes {
			failed += c.Failed
		}
		for _, c := range res.Classes {
			r := Ranked{Rules: res.Rules, Class: c.Class, Failed: failed, Band: c.Band, BandFree: c.BandFree,
				Gain:    c.Measured.Mean - c.Predicted.Mean,
				GainP90: c.Measured.P90 - c.Predicted.P90}
			for _, o := range res.Classes {
				if o.Class == c.Class {
					continue
				}
				if rise := o.Predicted.Mean - o.Measured.Mean; rise > r.Cost {
					r.Cost, r.CostClass = rise, o.Class
				}
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func (r *Result) rulesOr(rs []Rule) []string {
	if r != nil {
		return r.Rules
	}
	var s []string
	for _, x := range rs {
		s = append(s, x.String())
	}
	return s
}

// Assumptions maps each action of the rule sets (by its text) to its
// model's assumptions (Action.Assumptions), for showing next to a result.
func Assumptions(sets ...[]Rule) map[string]string {
	out := map[string]string{}
	for _, rs := range sets {
		for _, r := range rs {
			for _, a := range r.Actions {
				out[a.String()] = a.Assumptions()
			}
		}
	}
	return out
}

// Pairs returns every single rule set and every union of two of them: the
// "small rule sets" Rank compares.
func Pairs(singles [][]Rule) [][]Rule {
	out := slices.Clone(singles)
	for i := range singles {
		for j := i + 1; j < len(singles); j++ {
			out = append(out, slices.Concat(singles[i], singles[j]))
		}
	}
	return out
}

// StandardCandidates is the candidate set evaluated when the user gives no
// rules: FAST SYN GAP 200ms, FAST SYN/ACK GAP 200ms, SPLICE, REMOVE EMBEDS,
// REWRITE EMBEDS ABOVE 100KB RATIO 0.25 for everybody (and SPLICE TERMINATE
// TLS when the capture holds HTTPS: the two splicers differ there), and, for each
// low-priority class, DROP SYN while RT_HIGH exceeds the high-priority
// classes' measured 75th percentile (when some class is high priority).
func (d *Dataset) StandardCandidates(opts Options) ([][]Rule, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	var out [][]Rule
	srcs := []string{
		"IF IP.SRC == * THEN FAST SYN GAP 200ms",
		"IF IP.SRC == * THEN FAST SYN/ACK GAP 200ms",
		"IF IP.SRC == * THEN SPLICE",
		"IF IP.SRC == * THEN REMOVE EMBEDS",
		"IF IP.SRC == * THEN REWRITE EMBEDS ABOVE 100KB RATIO 0.25",
	}
	if d.hasTLS() {
		srcs = slices.Insert(srcs, 3, "IF IP.SRC == * THEN SPLICE TERMINATE TLS")
	}
	for _, src := range srcs {
		r, err := ParseRule(src)
		if err != nil {
			return nil, fmt.Errorf("whatif: standard candidate: %w", err)
		}
		out = append(out, []Rule{r})
	}
	var high []int64
	for _, u := range d.units {
		if priorityOf(&o, u.class) == High {
			high = append(high, u.total)
		}
	}
	if len(high) == 0 {
		return out, nil
	}
	p75 := NewDistribution(high, o.Edges).P75
	for _, c := range d.classes {
		if priorityOf(&o, c) != Low || !validClassName(c) {
			continue
		}
		r := Rule{Cond: &And{&ClassCond{Class: c}, &RTCond{Metric: MetricHigh, Op: OpGT, Value: time.Duration(p75)}},
			Actions: []Action{{Kind: DropSYN}}}
		out = append(out, []Rule{r})
	}
	return out, nil
}

// validClassName reports whether a class name can be written in a rule.
func validClassName(c string) bool {
	if c == "" || strings.ContainsAny(c, "*/:") {
		return false
	}
	for _, r := range c {
		if !isWordByte(r) {
			return false
		}
	}
	return true
}

// hasTLS reports whether some transaction was carried over TLS.
func (d *Dataset) hasTLS() bool {
	for i := range d.txs {
		if d.txs[i].tx.Flags&reconstruct.FlagTLS != 0 {
			return true
		}
	}
	return false
}
