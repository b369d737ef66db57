package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/synth"
	"github.com/rtmon/rtmon/whatif"
)

// analyzedRecords generates a lossy workload and writes its records as
// rtmon analyze --out does.
func analyzedRecords(t *testing.T) string {
	t.Helper()
	in := filepath.Join(t.TempDir(), "w.pcap")
	wl := synth.Workload{Seed: 5, Clients: 8, Duration: 10 * time.Second, SYNLossRate: 0.2}
	if _, err := synth.GenerateFile(in, synth.Options{Nanosecond: true}, wl); err != nil {
		t.Fatal(err)
	}
	o := defaultAnalyze()
	o.out = t.TempDir()
	if err := runAnalyze(context.Background(), &bytes.Buffer{}, []string{in}, o); err != nil {
		t.Fatal(err)
	}
	return o.out
}

// wantUnit: pageviews when analyze wrote them, else transactions.
func wantUnit(t *testing.T, dir string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "pageviews.jsonl")); err == nil {
		return "pageview"
	}
	return "transaction"
}

func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestWhatifRulesJSON(t *testing.T) {
	dir := analyzedRecords(t)
	out, err := runCmd(t, "whatif", "--records", dir, "--format", "json",
		"--rule", "IF IP.SRC == * THEN FAST SYN GAP 200ms", "--rule", "IF RT > 100ms THEN REWRITE EMBEDS")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rep struct {
		Unit        string
		Result      whatif.Result
		Ranking     []whatif.Ranked
		Assumptions map[string]string
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	c := rep.Result.Class(whatif.DefaultClass)
	if rep.Unit != wantUnit(t, dir) || c == nil || c.Measured.N == 0 || c.Predicted.Mean >= c.Measured.Mean {
		t.Fatalf("unexpected result: %s", out)
	}
	// Two singles and their pair, for the one class.
	if len(rep.Ranking) != 3 || rep.Ranking[0].Gain < rep.Ranking[2].Gain {
		t.Errorf("ranking: %+v", rep.Ranking)
	}
	if rep.Assumptions["FAST SYN GAP 200ms"] == "" {
		t.Errorf("assumptions: %v", rep.Assumptions)
	}
}

func TestWhatifStandardCandidatesText(t *testing.T) {
	dir := analyzedRecords(t)
	rules := filepath.Join(t.TempDir(), "classes.yaml")
	if err := os.WriteFile(rules, []byte("# everyone in one low-priority class\ndefault: { name: default, priority: low }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCmd(t, "whatif", "--records", dir, "--classes", rules)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"unit: " + wantUnit(t, dir), "class default (low priority)", "ranking for default",
		"IF IP.SRC == * THEN FAST SYN GAP 200ms", "IF IP.SRC == * THEN SPLICE; IF IP.SRC == * THEN REMOVE EMBEDS", "assumptions:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestWhatifErrors(t *testing.T) {
	dir := analyzedRecords(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rule", "IF RT > 3 THEN SPLICE"}, "line 1, column 9: expected a duration"},
		{[]string{"--priority", "premium=urgent"}, "want class=high or class=low"},
		{[]string{"--format", "xml"}, "--format"},
		{[]string{"--window", "1ms"}, "window"},
	} {
		_, err := runCmd(t, append([]string{"whatif", "--records", dir}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.args, err, tc.want)
		}
	}
	if _, err := runCmd(t, "whatif", "--records", filepath.Join(dir, "missing")); err == nil {
		t.Error("missing records directory accepted")
	}
}

// The classes file analyze reads also gives whatif its priorities.
func TestWhatifPrioritiesFromClassesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "classes.yaml")
	yaml := "classes:\n  - name: premium\n    priority: high\n    match: \"IP.SRC == 10.4.*.*\"\ndefault: { name: rest, priority: low }\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	opts, err := whatifOptions{classesFile: path, stat: "median"}.options()
	if err != nil {
		t.Fatal(err)
	}
	if opts.Priorities["premium"] != whatif.High || opts.Priorities["rest"] != whatif.Low {
		t.Errorf("priorities %v", opts.Priorities)
	}
	os.WriteFile(path, []byte("classes:\n  - name: x\n    match: \"10.4.*.300\"\n"), 0o644)
	if _, err := (whatifOptions{classesFile: path}).options(); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("bad pattern error: %v", err)
	}
}

// The same capture replayed from analyze's record files, from the capture
// itself and from a store gives the same measured and predicted
// distributions.
func TestWhatifSourcesAgree(t *testing.T) {
	in := filepath.Join(t.TempDir(), "w.pcap")
	wl := synth.Workload{Seed: 5, Clients: 8, Duration: 10 * time.Second, SYNLossRate: 0.2}
	if _, err := synth.GenerateFile(in, synth.Options{Nanosecond: true}, wl); err != nil {
		t.Fatal(err)
	}
	o := defaultAnalyze()
	o.out = t.TempDir()
	o.storeURL = "duckdb:" + filepath.Join(t.TempDir(), "w.duckdb")
	if err := runAnalyze(context.Background(), &bytes.Buffer{}, []string{in}, o); err != nil {
		t.Fatal(err)
	}
	rule := "IF IP.SRC == * THEN FAST SYN GAP 200ms"
	var results []*whatif.Result
	for _, src := range [][]string{{"--records", o.out}, {in}, {"--store", o.storeURL}} {
		out, err := runCmd(t, append([]string{"whatif", "--format", "json", "--rule", rule}, src...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", src, err, out)
		}
		var rep whatifReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Result == nil {
			t.Fatalf("%v: %v\n%s", src, err, out)
		}
		results = append(results, rep.Result)
	}
	for i, r := range results[1:] {
		a, b := results[0].Classes, r.Classes
		if len(a) != len(b) || len(a) == 0 {
			t.Fatalf("source %d: %d classes vs %d", i+1, len(b), len(a))
		}
		for k := range a {
			if a[k].Measured.N != b[k].Measured.N || a[k].Measured.P50 != b[k].Measured.P50 || a[k].Predicted.P50 != b[k].Predicted.P50 ||
				a[k].Predicted.P90 != b[k].Predicted.P90 {
				t.Errorf("source %d class %s: measured %+v predicted %+v; records gave %+v / %+v", i+1, a[k].Class,
					b[k].Measured, b[k].Predicted, a[k].Measured, a[k].Predicted)
			}
		}
	}
	if results[0].Classes[0].Predicted.P90 >= results[0].Classes[0].Measured.P90 {
		t.Error("FAST SYN predicted no gain on a capture with 20% SYN loss")
	}
}

// TestWhatifQueueModel: --server-model queue prints the fitted server and
// its fit, gives each class its band, and names the model in JSON; a
// wrong model name is an error.
func TestWhatifQueueModel(t *testing.T) {
	dir := analyzedRecords(t)
	rule := "IF IP.SRC == * THEN FAST SYN GAP 200ms"
	// Two rules: the ranking (singles and their pair) carries the band.
	out, err := runCmd(t, "whatif", "--records", dir, "--server-model", "queue", "--rule", rule, "--rule", "IF IP.SRC == * THEN SPLICE")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"server model: queue, ", "workers", "SYN losses measured", "model band", "model band ±"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	text := out
	out, err = runCmd(t, "whatif", "--records", dir, "--server-model", "queue", "--format", "json", "--rule", rule)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rep struct {
		ServerModel whatif.ServerModel `json:"server_model"`
		Queue       *whatif.QueueModel `json:"queue_model"`
		Result      whatif.Result
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.ServerModel != whatif.ServerQueue || rep.Queue == nil || rep.Queue.Workers < 1 || rep.Result.ServerModel != whatif.ServerQueue {
		t.Errorf("JSON does not carry the queue model: %s", out)
	}
	if c := rep.Result.Class(whatif.DefaultClass); c == nil || c.Band == nil {
		t.Errorf("class without a band: %s", out)
	}
	// The text says how well the pool's service times agree, as fitted.
	if rep.Queue != nil {
		if spread := fmt.Sprintf("service times per URL vary by %.1f%%", 100*rep.Queue.ServiceSpread); !strings.Contains(text, spread) {
			t.Errorf("text lacks %q:\n%s", spread, text)
		}
	}
	if out, err := runCmd(t, "whatif", "--records", dir, "--server-model", "magic", "--rule", rule); err == nil || !strings.Contains(err.Error(), "server model") {
		t.Errorf("--server-model magic: err %v\n%s", err, out)
	}
}

// Two front ends' sensors store into one store: replaying one sensor's
// records from it (--sensor) gives what that front end's own records give,
// not a mix of both.
func TestWhatifOneSensorOfAStore(t *testing.T) {
	storeURL := "duckdb:" + filepath.Join(t.TempDir(), "two.duckdb")
	rule := "IF IP.SRC == * THEN FAST SYN GAP 200ms"
	var own []*whatif.Result
	for i, sensor := range []string{"fe-a", "fe-b"} {
		in := filepath.Join(t.TempDir(), sensor+".pcap")
		wl := synth.Workload{Seed: int64(7 + i), Clients: 6 + 6*i, Duration: 10 * time.Second, SYNLossRate: 0.1 + 0.2*float64(i)}
		if _, err := synth.GenerateFile(in, synth.Options{Nanosecond: true}, wl); err != nil {
			t.Fatal(err)
		}
		o := defaultAnalyze()
		o.out, o.storeURL, o.sensor = t.TempDir(), storeURL, sensor
		if err := runAnalyze(context.Background(), &bytes.Buffer{}, []string{in}, o); err != nil {
			t.Fatal(err)
		}
		own = append(own, whatifJSON(t, "--records", o.out, "--rule", rule))
	}
	for i, sensor := range []string{"fe-a", "fe-b"} {
		got := whatifJSON(t, "--store", storeURL, "--sensor", sensor, "--rule", rule)
		a, b := own[i].Classes, got.Classes
		if len(a) != len(b) || len(a) == 0 {
			t.Fatalf("%s: %d classes from the store, %d from its own records", sensor, len(b), len(a))
		}
		for k := range a {
			if a[k].Measured.N != b[k].Measured.N || a[k].Measured.P50 != b[k].Measured.P50 || a[k].Predicted.P90 != b[k].Predicted.P90 {
				t.Errorf("%s class %s: from the store measured %+v predicted %+v; its own records %+v / %+v", sensor, a[k].Class,
					b[k].Measured, b[k].Predicted, a[k].Measured, a[k].Predicted)
			}
		}
	}
	both := whatifJSON(t, "--store", storeURL, "--rule", rule)
	if n, a, b := both.Classes[0].Measured.N, own[0].Classes[0].Measured.N, own[1].Classes[0].Measured.N; n != a+b {
		t.Errorf("every sensor: %d measured in the first class, want %d + %d", n, a, b)
	}
	if _, err := runCmd(t, "whatif", "--sensor", "fe-a", "--rule", rule, filepath.Join(t.TempDir(), "x.pcap")); err == nil || !strings.Contains(err.Error(), "--sensor") {
		t.Errorf("--sensor without --store: %v, want an error naming --sensor", err)
	}
}

func whatifJSON(t *testing.T, args ...string) *whatif.Result {
	t.Helper()
	out, err := runCmd(t, append([]string{"whatif", "--format", "json"}, args...)...)
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	var rep whatifReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Result == nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return rep.Result
}

// --report-delay: live is rtmon's own (a pageview's idle gap, settling and the
// live feed's publishing; none for transactions), a duration overrides it,
// anything else is refused.
func TestWhatifReportDelay(t *testing.T) {
	dir := analyzedRecords(t)
	d, err := whatif.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	live := time.Duration(0)
	if wantUnit(t, dir) == "pageview" {
		live = 8 * time.Second
	}
	for _, c := range []struct {
		flag string
		want time.Duration
		bad  bool
	}{{"live", live, false}, {"", live, false}, {"0", 0, false}, {"2s", 2 * time.Second, false}, {"-1s", 0, true}, {"soon", 0, true}} {
		got, err := whatifOptions{reportDelay: c.flag}.reportDelayFor(d)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("--report-delay %q: %v, %v; want %v (error %v)", c.flag, got, err, c.want, c.bad)
		}
	}
	if _, err := runCmd(t, "whatif", "--records", dir, "--report-delay", "soon", "--rule", "IF RT_HIGH > 1s THEN DROP SYN"); err == nil ||
		!strings.Contains(err.Error(), "--report-delay") {
		t.Errorf("a bad --report-delay: %v", err)
	}
}
