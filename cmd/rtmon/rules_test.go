package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/web"
)

const rulesClasses = `classes:
  - name: premium
    priority: high
    match: "10.4.0.0/16"
    slo:
      - {kind: pageview, under: 2s, target: 95%}
      - {kind: transaction, under: 250ms, target: 99.9%, window: 7d}
  - {name: partners, priority: high, match: "198.51.100.0/25"}
  - name: steady
    match: "10.5.0.0/16"
    slo: [{kind: pageview, under: 2s, target: 95%}]
default: {name: others, priority: low}
`

// runRules runs `rtmon rules` on a classes file and returns the rules
// file it wrote and what it printed on standard error.
func runRules(t *testing.T, classes string) (string, string, error) {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "classes.yaml"), filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(in, []byte(classes), 0o644); err != nil {
		t.Fatal(err)
	}
	root := newRootCommand()
	var stderr bytes.Buffer
	root.SetErr(&stderr)
	root.SetArgs([]string{"rules", "--classes", in, "--out", out})
	if err := root.Execute(); err != nil {
		return "", stderr.String(), err
	}
	return out, stderr.String(), nil
}

func loadRules(t *testing.T, path string) promRuleFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f promRuleFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("rules are not the rules format: %v\n%s", err, b)
	}
	return f
}

func TestRulesShape(t *testing.T) {
	path, stderr, err := runRules(t, rulesClasses)
	if err != nil || stderr != "" {
		t.Fatalf("rules: %v %s", err, stderr)
	}
	f := loadRules(t, path)
	var groups []string
	for _, g := range f.Groups {
		groups = append(groups, g.Name)
	}
	if !slices.Equal(groups, []string{"rtmon-slo-premium", "rtmon-slo-steady"}) {
		t.Fatalf("groups %v: want one per class with objectives, in file order", groups)
	}
	records, alerts := map[string]int{}, map[string][]promRule{}
	for _, r := range f.Groups[0].Rules {
		if r.Record != "" {
			records[r.Record]++
		} else {
			alerts[r.Alert] = append(alerts[r.Alert], r)
		}
	}
	for _, w := range []string{"5m", "30m", "1h", "2h", "6h", "1d", "3d"} {
		if records["rtmon:slo_error_ratio:rate"+w] != 2 {
			t.Errorf("premium's two objectives want an error ratio over %s each: %v", w, records)
		}
	}
	for _, name := range []string{"rtmon:slo_burn_rate:rate1h", "rtmon:slo_burn_rate:rate6h", "rtmon:slo_burn_rate:rate3d",
		"rtmon:slo_attainment:ratio", "rtmon:slo_error_budget_remaining:ratio"} {
		if records[name] != 2 {
			t.Errorf("%s recorded %d times, want 2", name, records[name])
		}
	}
	page, ticket := alerts["RtmonSLOFastBurn"], alerts["RtmonSLOSlowBurn"]
	if len(page) != 2 || len(ticket) != 2 {
		t.Fatalf("alerts %v", alerts)
	}
	p := page[0]
	if p.Labels["severity"] != "page" || p.Labels["class"] != "premium" || p.Labels["slo"] != "pageview:2s:95%:30d" || ticket[0].Labels["severity"] != "ticket" {
		t.Errorf("page alert labels %v, ticket %v", p.Labels, ticket[0].Labels)
	}
	for _, want := range []string{`rtmon:slo_error_ratio:rate1h{class="premium",kind="pageviews",slo="pageview:2s:95%:30d"} > (14.4 * 0.05)`,
		`rtmon:slo_error_ratio:rate5m{`, `> (6 * 0.05)`, "rate30m{"} {
		if !strings.Contains(p.Expr, want) {
			t.Errorf("page alert lacks %q:\n%s", want, p.Expr)
		}
	}
	if !strings.Contains(ticket[0].Expr, "rate1d{") || !strings.Contains(ticket[0].Expr, "(3 * 0.05)") || !strings.Contains(ticket[0].Expr, "(1 * 0.05)") {
		t.Errorf("ticket alert:\n%s", ticket[0].Expr)
	}
	// A 7-day window spends the same share of its budget: 2% in 1h is
	// 14.4 * 7/30 = 3.36 times the budget.
	if !strings.Contains(page[1].Expr, "(3.36 * 0.001)") || !strings.Contains(page[1].Expr, `kind="transactions"`) {
		t.Errorf("7d objective's page alert:\n%s", page[1].Expr)
	}
	if s := p.Annotations["summary"]; !strings.Contains(s, "95% of pageviews under 2s over 30d") || !strings.Contains(s, "premium") {
		t.Errorf("summary %q does not say which objective burns", s)
	}
	if d := p.Annotations["description"]; !strings.Contains(d, "le=1.995262314") || !strings.Contains(d, "14.4 times over 1h and 5m") {
		t.Errorf("description %q", d)
	}
}

func TestRulesRefuse(t *testing.T) {
	// Parsing refuses such names already; the generator checks again.
	_, _, err := sloRules([]pageview.ClassSLO{{Class: `x"} or vector(1) #`, SLO: pageview.SLO{Kind: pageview.SLOPageview, Under: time.Second, Target: 0.9, Window: pageview.DefaultSLOWindow}}})
	if err == nil {
		t.Error("a class name that would break the rules was accepted")
	}
	if _, _, err := runRules(t, "classes:\n  - name: a\n    match: 10.0.0.0/8\n    slo: [{kind: page, under: 2s, target: 95%}]\n"); err == nil || !strings.Contains(err.Error(), "line 4:") {
		t.Errorf("bad objective: %v", err)
	}
	// A target this low leaves the page's 14.4x above an error ratio of 1.
	_, stderr, err := runRules(t, "classes: []\ndefault: {name: all, slo: [{kind: pageview, under: 2s, target: 50%}]}\n")
	if err != nil || !strings.Contains(stderr, "RtmonSLOFastBurn over 1h cannot fire") {
		t.Errorf("low target: %v, stderr %q", err, stderr)
	}
	path, _, err := runRules(t, "classes: [{name: a, match: 10.0.0.0/8}]\n")
	if err != nil {
		t.Fatal(err)
	}
	if f := loadRules(t, path); len(f.Groups) != 0 {
		t.Errorf("classes without objectives got rules: %+v", f)
	}
}

// needPromtool installs Debian's prometheus package (promtool) when it is
// missing; no Prometheus server is started.
func needPromtool(t *testing.T) string {
	t.Helper()
	const bin = "/usr/bin/promtool"
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, args := range [][]string{{"update", "-q"}, {"install", "-y", "-q", "--no-install-recommends", "prometheus"}} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("apt-get %v: %v\n%s", args, err, b)
		}
	}
	return bin
}

// promtoolTest is a `promtool test rules` file over synthetic rtmon
// histograms, one sample a minute for 5 hours: premium's pageviews are all
// under 2 s for 3 hours, then 90% are slow; steady's are 3% slow
// throughout, inside its 5% budget. The page alert must fire for premium
// once an hour of slowness is past 14.4x the budget (from 228 min), not
// before, and never for steady.
const promtoolTest = `rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'rtmon_response_time_seconds_bucket{class="premium",kind="pageviews",le="%[1]s"}'
        values: '0+100x180 18010+10x119'
      - series: 'rtmon_response_time_seconds_count{class="premium",kind="pageviews"}'
        values: '0+100x299'
      - series: 'rtmon_response_time_seconds_bucket{class="steady",kind="pageviews",le="%[1]s"}'
        values: '0+97x299'
      - series: 'rtmon_response_time_seconds_count{class="steady",kind="pageviews"}'
        values: '0+100x299'
      # another bucket, which the rules must not read
      - series: 'rtmon_response_time_seconds_bucket{class="premium",kind="pageviews",le="4.988470421"}'
        values: '0+100x299'
    promql_expr_test:
      - expr: rtmon:slo_error_ratio:rate5m{class="premium"}
        eval_time: 240m
        exp_samples:
          - {labels: '%[2]s', value: 0.9}
      - expr: rtmon:slo_burn_rate:rate1h{class="premium"}
        eval_time: 240m
        exp_samples:
          - {labels: '%[3]s', value: 18}
      - expr: rtmon:slo_attainment:ratio{class="premium"}
        eval_time: 240m
        exp_samples:
          - {labels: '%[4]s', value: 0.775}
    alert_rule_test:
      - {eval_time: 170m, alertname: RtmonSLOFastBurn, exp_alerts: []}
      - {eval_time: 170m, alertname: RtmonSLOSlowBurn, exp_alerts: []}
      - {eval_time: 200m, alertname: RtmonSLOFastBurn, exp_alerts: []}
      - {eval_time: 225m, alertname: RtmonSLOFastBurn, exp_alerts: []}
      - eval_time: 240m
        alertname: RtmonSLOFastBurn
        exp_alerts:
          - exp_labels: {class: premium, kind: pageviews, severity: page, slo: "pageview:2s:95%%:30d"}
            exp_annotations: %[5]s
      - eval_time: 290m
        alertname: RtmonSLOSlowBurn
        exp_alerts:
          - exp_labels: {class: premium, kind: pageviews, severity: ticket, slo: "pageview:2s:95%%:30d"}
            exp_annotations: %[6]s
`

// TestRulesPromtool checks the generated rules with Debian's promtool and
// evaluates them over synthetic series of a class whose pageviews turn slow.
func TestRulesPromtool(t *testing.T) {
	promtool := needPromtool(t)
	path, _, err := runRules(t, rulesClasses)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(promtool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, b)
	}
	annotations := map[string]string{}
	for _, r := range loadRules(t, path).Groups[0].Rules {
		if r.Alert != "" && r.Labels["kind"] == "pageviews" {
			b, err := yaml.Marshal(r.Annotations)
			if err != nil {
				t.Fatal(err)
			}
			annotations[r.Alert] = "\n" + indent(string(b), "              ")
		}
	}
	series := func(name string) string {
		return name + `{class="premium", kind="pageviews", slo="pageview:2s:95%:30d"}`
	}
	test := fmt.Sprintf(promtoolTest, "1.995262314", series("rtmon:slo_error_ratio:rate5m"), series("rtmon:slo_burn_rate:rate1h"),
		series("rtmon:slo_attainment:ratio"), annotations["RtmonSLOFastBurn"], annotations["RtmonSLOSlowBurn"])
	testFile := filepath.Join(filepath.Dir(path), "rules_test.yaml")
	if err := os.WriteFile(testFile, []byte(test), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "test", "rules", testFile)
	cmd.Dir = filepath.Dir(path)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s\ntest file:\n%s", err, b, test)
	}
}

func indent(s, prefix string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(prefix + line)
	}
	return b.String()
}

// The UI that serve and live start with --classes exports the objectives
// and reads a bucket at each threshold.
func TestUIServesClassSLOs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "classes.yaml")
	if err := os.WriteFile(path, []byte(rulesClasses), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), "memory:", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := uiOptions{listen: "127.0.0.1:0", classes: path}.server(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Host = "127.0.0.1"
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	for _, want := range []string{`rtmon_slo_objective_ratio{class="steady",kind="pageviews",slo="pageview:2s:95%:30d"} 0.95`,
		`rtmon_slo_threshold_seconds{class="premium",kind="transactions",le="` + web.SLOBucketLE(250*time.Millisecond) + `",slo="transaction:250ms:99.9%:7d"} 0.25`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("/metrics (%d) lacks %q", rec.Code, want)
		}
	}
	if err := os.WriteFile(path, []byte("classes:\n  - {name: a, match: 10.0.0.0/8, slo: [{kind: pageview, under: 2s, target: 2}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (uiOptions{listen: "127.0.0.1:0", classes: path}).server(st, nil); err == nil || !strings.Contains(err.Error(), "line 2:") {
		t.Errorf("bad classes file: %v", err)
	}
	if newServeCommand().Flags().Lookup("classes") == nil {
		t.Error("serve has no --classes")
	}
}
