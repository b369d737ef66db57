package whatif

import (
	"cmp"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
)

// liveUnit is one unit of the synthetic stream.
type liveUnit struct {
	class     string
	start, rt int64
}

func (u liveUnit) end() int64 { return u.start + u.rt }

// liveStream: premium (high) and basic (low) units every ~100 ms for two
// minutes; premium's response times climb past 2 s in the middle minute and
// fall back, basic's stay slow throughout (so RT_HIGH must not see them).
// Each time carries a unique ns offset, so no two events tie.
func liveStream() []liveUnit {
	rng := rand.New(rand.NewPCG(17, 4))
	base := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC).UnixNano()
	var us []liveUnit
	for i := range 1200 {
		start := base + int64(i)*int64(100*time.Millisecond) + int64(i)
		class, rt := "basic", int64(3*time.Second)+rng.Int64N(int64(2*time.Second))
		if i%2 == 0 {
			class = "premium"
			rt = int64(500*time.Millisecond) + rng.Int64N(int64(time.Second))
			if i > 400 && i < 800 {
				rt += int64(time.Duration(i-400) * 10 * time.Millisecond) // up to +4 s
			}
		}
		us = append(us, liveUnit{class, start, rt + int64(i)*7})
	}
	return us
}

var liveOpts = Options{Priorities: map[string]Priority{"premium": High}, Window: 5 * time.Second, WindowSamples: 20}

func liveRule(t *testing.T) Rule {
	r, err := ParseRule("IF RT_HIGH > 2s AND CLASS == basic THEN DROP SYN")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestLiveRulesFlipWhereTheWindowSays: fed completions in order, the rule
// turns on and off at the records where a brute-force window over the
// stream (premium completions within the last Window, the newest
// WindowSamples of them, lower median) crosses 2 s.
func TestLiveRulesFlipWhereTheWindowSays(t *testing.T) {
	us := liveStream()
	slices.SortFunc(us, func(a, b liveUnit) int { return cmp.Compare(a.end(), b.end()) })
	var want []int // record indices where the rule flips
	on := false
	for k, u := range us {
		var vals []int64
		for _, p := range us[:k+1] {
			if p.class == "premium" && p.end() >= u.end()-int64(liveOpts.Window) {
				vals = append(vals, p.rt)
			}
		}
		vals = vals[max(0, len(vals)-liveOpts.WindowSamples):]
		slices.Sort(vals)
		now := len(vals) > 0 && vals[(len(vals)-1)/2] > int64(2*time.Second)
		if now != on {
			want, on = append(want, k), now
		}
	}
	if len(want) < 2 {
		t.Fatalf("the stream should turn the rule on and off, flips at %v", want)
	}
	l, err := NewLiveRules([]Rule{liveRule(t)}, liveOpts)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for k, u := range us {
		for _, f := range l.Observe(u.end(), u.class, u.rt) {
			if f.Rule != 0 || f.At != u.end() || f.On != (len(got)%2 == 0) {
				t.Fatalf("record %d: flip %+v", k, f)
			}
			if len(f.Metrics) != 1 || f.Metrics[0].Name != "RT_HIGH" || !f.Metrics[0].OK ||
				(f.Metrics[0].Value > int64(2*time.Second)) != f.On {
				t.Errorf("record %d: metrics %+v", k, f.Metrics)
			}
			got = append(got, k)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("flips at records %v, want %v", got, want)
	}
	if l.Active()[0] != on {
		t.Errorf("active %v at the end, want %v", l.Active(), on)
	}
}

// TestLiveRulesMatchTheReplay: the what-if's replay judges the rule at each
// unit's arrival; judging the live evaluator at the same moments, over the
// same completions, gives the same answer for every unit the rule's class
// condition selects.
func TestLiveRulesMatchTheReplay(t *testing.T) {
	us := liveStream()
	var txs []*reconstruct.Transaction
	client := netip.MustParseAddr("192.0.2.1")
	for i, u := range us {
		txs = append(txs, &reconstruct.Transaction{ID: "t" + strconv.Itoa(i), Client: client, Class: u.class,
			Start: u.start, End: u.end(), Total: u.rt})
	}
	d, err := NewDataset(nil, txs, nil)
	if err != nil {
		t.Fatal(err)
	}
	o, err := liveOpts.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	rules := []Rule{liveRule(t)}
	out, st := d.replay(rules, &o, LoadModel{}, &loadDelta{}, nil)

	// The live side: completions and arrivals in time order.
	type ev struct {
		t    int64
		unit int
		done bool
	}
	var evs []ev
	for i, r := range out {
		if r.Predicted != r.Measured {
			t.Fatalf("unit %d: the rule changed its time (%d -> %d): not a pure observation", i, r.Measured, r.Predicted)
		}
		evs = append(evs, ev{r.Start, i, false}, ev{r.Start + r.Measured, i, true})
	}
	slices.SortFunc(evs, func(a, b ev) int { return cmp.Compare(a.t, b.t) })
	l, err := NewLiveRules(rules, liveOpts)
	if err != nil {
		t.Fatal(err)
	}
	flips, ons := 0, 0
	for _, e := range evs {
		if e.done {
			flips += len(l.Observe(e.t, out[e.unit].Class, out[e.unit].Measured))
			continue
		}
		flips += len(l.Judge(e.t))
		if out[e.unit].Class != "basic" {
			continue // the rule's CLASS condition leaves premium units alone
		}
		live := l.Active()[0]
		if live != st[e.unit].act.any {
			t.Fatalf("unit %d at %d: live says %v, the replay %v", e.unit, e.t, live, st[e.unit].act.any)
		}
		if live {
			ons++
		}
	}
	if flips < 2 || ons == 0 || ons == len(out)/2 {
		t.Errorf("vacuous: %d flips, on for %d of %d basic units", flips, ons, len(out)/2)
	}
}

// TestLiveRulesBounded: classes no rule names keep no window of their own,
// whatever the traffic's classes; late records count from the latest time.
func TestLiveRulesBounded(t *testing.T) {
	l, err := NewLiveRules([]Rule{liveRule(t)}, liveOpts)
	if err != nil {
		t.Fatal(err)
	}
	at := int64(time.Hour)
	for i := range 500 {
		l.Observe(at+int64(i), "c"+strconv.Itoa(i), int64(time.Second))
	}
	if n := len(l.r.windows); n > 3 {
		t.Errorf("%d windows for 500 classes", n)
	}
	for _, w := range l.r.windows {
		if len(w.val) > liveOpts.WindowSamples {
			t.Errorf("window of %d values, limit %d", len(w.val), liveOpts.WindowSamples)
		}
	}
	// A record from before the window is ignored, one just late joins at
	// the newest time (the windows stay in completion order).
	if f := l.Observe(at-int64(time.Minute), "premium", int64(time.Minute)); f != nil {
		t.Errorf("stale record flipped %+v", f)
	}
	l.Observe(at, "premium", int64(time.Minute))
	w := l.r.windows["high"]
	if w == nil || !slices.IsSorted(w.at) || w.at[len(w.at)-1] != at+499 {
		t.Errorf("high window %+v", w)
	}
}
