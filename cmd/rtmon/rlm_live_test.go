package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/pipeline"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/query"
	"github.com/rtmon/rtmon/web"
)

// TestRLMLiveAnnotatesFlips drives rtmon live's RLM watcher as the
// pipeline would (its sink in the config, records in packet time) over a
// premium stream that flaps around 2 s: the first flip is annotated at
// once, the rest within the minute fold into one note written when packet
// time has moved a minute on, and /metrics shows the rule's state.
func TestRLMLiveAnnotatesFlips(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	feed := web.NewLiveFeed()
	cfg := pipeline.Config{Feed: feed}
	// A window of an hour: the ticks (wall clock) cannot empty it during
	// the test, whatever the machine's speed.
	o := rlmOptions{rules: []string{"IF RT_HIGH > 2s THEN DROP SYN"}, priorities: []string{"premium=high"},
		window: time.Hour, stat: "median"}
	stop, err := o.watch(ctx, &cfg, st, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if len(cfg.Sinks) != 1 {
		t.Fatalf("%d sinks added", len(cfg.Sinks))
	}
	sink := cfg.Sinks[0]
	srv, err := web.NewServer(web.Config{Store: st, Live: feed})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC).UnixNano()
	// Premium response times, one every 3 s: the flaps fold unless 47 s
	// of wall clock passes between two lines (the ticks move packet time
	// with it).
	secs := []int64{3, 1, 3, 1, 3, 1}
	var premium []int64
	var flips []int64 // packet times where the lower median crosses 2 s
	on := false
	for i, s := range secs {
		start, rt := t0+int64(i)*int64(3*time.Second), s*int64(time.Second) // ends in order
		premium = append(premium, rt)
		sorted := slices.Sorted(slices.Values(premium))
		if now := sorted[(len(sorted)-1)/2] > int64(2*time.Second); now != on {
			on, flips = now, append(flips, start+rt)
		}
		if i%2 == 0 {
			sink.Pageview(&pageview.Pageview{ID: fmt.Sprint("p", i), Class: "premium", Start: start, End: start + rt, Total: rt})
		} else {
			// A stand-alone transaction is a unit too.
			sink.Transaction(&reconstruct.Transaction{ID: fmt.Sprint("t", i), Class: "premium", Start: start, End: start + rt, Total: rt})
		}
		// Neither a slow low-priority unit nor a transaction inside a
		// pageview moves RT_HIGH.
		sink.Pageview(&pageview.Pageview{ID: fmt.Sprint("b", i), Class: "basic", Start: start, End: start + rt, Total: 20 * int64(time.Second)})
		sink.Transaction(&reconstruct.Transaction{ID: fmt.Sprint("e", i), PageviewID: "p0", Class: "premium", Start: start, End: start + rt, Total: 20 * int64(time.Second)})
	}
	if len(flips) < 3 {
		t.Fatalf("the stream should flap, flips %v", flips)
	}
	first := waitAnnotations(t, st, 1)
	want := "RLM rule 1 on: IF RT_HIGH > 2s THEN DROP SYN (RT_HIGH 3.00s over the 1h0m0s window)"
	if a := first[0]; a.Text != want || a.TimeMs != flips[0]/1e6 || a.Source != query.SourceRtmon || !slices.Equal(a.Tags, []string{"rlm"}) {
		t.Errorf("first annotation %+v, want %q at %d", a, want, flips[0]/1e6)
	}
	metrics := scrape(t, ts.URL+"/metrics")
	if wantOn := fmt.Sprintf(`rtmon_rlm_rule_active{rule="1"} %d`, b2n(on)); !strings.Contains(metrics, wantOn) {
		t.Errorf("metrics lack %q", wantOn)
	}
	// A minute of packet time later the folded flips are written as one.
	late := t0 + int64(2*time.Minute)
	sink.Pageview(&pageview.Pageview{ID: "late", Class: "basic", Start: late, End: late + 1, Total: 1})
	got := waitAnnotations(t, st, 2)
	slices.SortFunc(got, func(a, b query.Annotation) int { return int(a.TimeMs - b.TimeMs) })
	last := got[1]
	state := map[bool]string{true: "on", false: "off"}[on]
	if !strings.HasPrefix(last.Text, "RLM rule 1 "+state+": ") || last.TimeMs != flips[len(flips)-1]/1e6 ||
		!strings.Contains(last.Text, fmt.Sprintf("; %d earlier flips within a minute folded", len(flips)-2)) {
		t.Errorf("folded annotation %+v (flips %v)", last, flips)
	}
	metrics = scrape(t, ts.URL+"/metrics")
	wantFlip := fmt.Sprintf(`rtmon_rlm_rule_last_flip_timestamp_seconds{rule="1"} %g`, float64(flips[len(flips)-1])/1e9)
	if !strings.Contains(metrics, wantFlip) {
		t.Errorf("metrics lack %q", wantFlip)
	}
}

func b2n(b bool) int {
	if b {
		return 1
	}
	return 0
}

// waitAnnotations waits (generously) for n annotations and returns them.
func waitAnnotations(t *testing.T, st store.Store, n int) []query.Annotation {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := st.Annotations(context.Background(), query.AnnotationQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) >= n {
			if len(got) > n {
				t.Errorf("%d annotations, want %d: %+v", len(got), n, got)
			}
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d annotations after a minute, want %d", len(got), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRLMLiveTickEndsQuietRule: with the traffic gone, the ticks move
// packet time on with the wall clock and the rule turns off when its
// window empties.
func TestRLMLiveTickEndsQuietRule(t *testing.T) {
	w, err := newRLMWatcherFrom(t, "IF RT > 1s THEN DROP SYN", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Date(2026, 12, 5, 13, 0, 0, 0, time.UTC).UnixNano()
	end := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC).UnixNano()
	w.observe(end, "x", int64(2*time.Second), wall)
	if !w.live.Active()[0] {
		t.Fatal("rule not on after a slow unit")
	}
	w.tick(wall + int64(4*time.Second))
	if !w.live.Active()[0] {
		t.Error("rule off before its window passed")
	}
	w.tick(wall + int64(6*time.Second))
	if w.live.Active()[0] || w.lastFlip[0] != end+int64(6*time.Second) {
		t.Errorf("rule active %v, last flip %d, want off at %d", w.live.Active(), w.lastFlip[0], end+int64(6*time.Second))
	}
	if n := len(w.out); n != 1 {
		t.Errorf("%d notes queued, want 1 (the off flip folds within the minute)", n)
	}
}

func newRLMWatcherFrom(t *testing.T, rule string, window time.Duration) (*rlmWatcher, error) {
	t.Helper()
	wo := whatifOptions{rules: []string{rule}, window: window, stat: "median"}
	rules, err := wo.parseRules()
	if err != nil {
		return nil, err
	}
	opts, err := wo.options()
	if err != nil {
		return nil, err
	}
	return newRLMWatcher(rules, opts)
}

// TestRLMLiveBadRule: a rule that does not parse stops rtmon live before it
// captures, naming the flag; no rules, no sink.
func TestRLMLiveBadRule(t *testing.T) {
	var cfg pipeline.Config
	if _, err := (rlmOptions{rules: []string{"IF RT_HIGH > THEN DROP SYN"}}).watch(context.Background(), &cfg, nil, ""); err == nil ||
		!strings.Contains(err.Error(), "--rule") {
		t.Errorf("error %v, want one about --rule", err)
	}
	stop, err := rlmOptions{}.watch(context.Background(), &cfg, nil, "")
	if err != nil || len(cfg.Sinks) != 0 {
		t.Errorf("no rules: err %v, %d sinks", err, len(cfg.Sinks))
	}
	stop()
}
