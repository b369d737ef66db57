package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/web"
)

func newRulesCommand() *cobra.Command {
	var classesFile, out string
	cmd := &cobra.Command{
		Use:   "rules --classes FILE [--out FILE]",
		Short: "Write Prometheus recording and alerting rules for the classes' objectives (slo:)",
		Long: `rules reads the objectives (slo:) of a classes file and writes Prometheus
rules over rtmon's /metrics (served with the same --classes, so that the
histogram has a bucket at each threshold): per class and objective, the
error ratio over 5m, 30m, 1h, 2h, 6h, 1d and 3d, the burn rates over 1h,
6h and 3d, the attainment and the error budget left over the objective's
window, and multi-window multi-burn-rate alerts (Google SRE workbook):
RtmonSLOFastBurn (severity page: 14.4x the budget over 1h and 5m, or 6x over
6h and 30m) and RtmonSLOSlowBurn (severity ticket: 3x over 1d and 2h, or 1x
over 3d and 6h). The factors are for a 30d window; other windows scale
them so each alert still means the same share of the budget. Classes
without objectives get no rules.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			classes, err := pageview.LoadClasses(classesFile)
			if err != nil {
				return fmt.Errorf("rules: %w", err)
			}
			b, warnings, err := sloRules(classes.SLOs())
			if err != nil {
				return fmt.Errorf("rules: %w", err)
			}
			for _, w := range warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "rtmon rules: warning:", w)
			}
			if out == "" {
				_, err = cmd.OutOrStdout().Write(b)
			} else {
				err = os.WriteFile(out, b, 0o644)
			}
			if err != nil {
				return fmt.Errorf("rules: write: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&classesFile, "classes", "", "classes file (YAML) with objectives (slo:)")
	f.StringVar(&out, "out", "", "write the rules to this file (default: standard output)")
	_ = cmd.MarkFlagRequired("classes")
	return cmd
}

// The Prometheus rules file format (what promtool check rules reads).
type (
	promRuleFile struct {
		Groups []promRuleGroup `yaml:"groups"`
	}
	promRuleGroup struct {
		Name  string     `yaml:"name"`
		Rules []promRule `yaml:"rules"`
	}
	promRule struct {
		Record      string            `yaml:"record,omitempty"`
		Alert       string            `yaml:"alert,omitempty"`
		Expr        string            `yaml:"expr"`
		Labels      map[string]string `yaml:"labels,omitempty"`
		Annotations map[string]string `yaml:"annotations,omitempty"`
	}
)

// errorRatioWindows are the windows the error ratio is recorded over: the
// alerts' long and short windows. burnRateWindows are those whose burn
// rate is recorded for dashboards.
var (
	errorRatioWindows = []time.Duration{5 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour, 24 * time.Hour, 72 * time.Hour}
	burnRateWindows   = []time.Duration{time.Hour, 6 * time.Hour, 72 * time.Hour}
)

// burnCondition is one of the workbook's window pairs: the error ratio over
// both windows is above factor times the budget, where the factor burns
// share of a window's budget in the long window (2% in 1h of 30d: 14.4x).
// The short window makes the alert stop soon after the burning does.
type burnCondition struct {
	long, short time.Duration
	share       float64
}

func (b burnCondition) factor(window time.Duration) float64 {
	return b.share * float64(window) / float64(b.long)
}

type burnAlert struct {
	name, severity, speed string
	conds                 []burnCondition
}

var burnAlerts = []burnAlert{
	{"RtmonSLOFastBurn", "page", "fast", []burnCondition{{time.Hour, 5 * time.Minute, 0.02}, {6 * time.Hour, 30 * time.Minute, 0.05}}},
	{"RtmonSLOSlowBurn", "ticket", "slowly", []burnCondition{{24 * time.Hour, 2 * time.Hour, 0.10}, {72 * time.Hour, 6 * time.Hour, 0.10}}},
}

// sloRules writes the rules file for the objectives: one group per class,
// in their order. Warnings name alerts that cannot fire (a target so low
// that the burn threshold is above an error ratio of 1).
func sloRules(slos []pageview.ClassSLO) ([]byte, []string, error) {
	var f promRuleFile
	var warnings []string
	group := map[string]int{}
	for _, s := range slos {
		if err := pageview.CheckSLOClassName(s.Class); err != nil {
			return nil, nil, err
		}
		i, ok := group[s.Class]
		if !ok {
			i = len(f.Groups)
			group[s.Class] = i
			f.Groups = append(f.Groups, promRuleGroup{Name: "rtmon-slo-" + s.Class})
		}
		rules, w := objectiveRules(s)
		f.Groups[i].Rules = append(f.Groups[i].Rules, rules...)
		warnings = append(warnings, w...)
	}
	var buf bytes.Buffer
	buf.WriteString("# Prometheus rules for rtmon's objectives, written by `rtmon rules`.\n")
	if len(f.Groups) == 0 {
		buf.WriteString("# No class has an objective (slo:).\n")
		f.Groups = []promRuleGroup{}
	}
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return nil, nil, fmt.Errorf("encode rules: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, nil, fmt.Errorf("encode rules: %w", err)
	}
	return buf.Bytes(), warnings, nil
}

// objectiveRules are one objective's recording rules and alerts.
func objectiveRules(s pageview.ClassSLO) ([]promRule, []string) {
	kind, id := web.SLOKind(s.SLO), s.ID()
	budget := formatNum(1-s.Target, 10)
	labels := func(extra ...string) map[string]string {
		m := map[string]string{"slo": id}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	var rules []promRule
	for _, w := range errorRatioWindows {
		rules = append(rules, promRule{Record: errorRatioRecord(w), Expr: errorRatioExpr(s, kind, w), Labels: labels()})
	}
	sel := selector("class", s.Class, "kind", kind, "slo", id)
	for _, w := range burnRateWindows {
		rules = append(rules, promRule{Record: "rtmon:slo_burn_rate:rate" + pageview.FormatSLODuration(w),
			Expr: errorRatioRecord(w) + sel + " / " + budget, Labels: labels()})
	}
	rules = append(rules,
		promRule{Record: "rtmon:slo_attainment:ratio", Expr: goodRatioExpr(s, kind, s.Window), Labels: labels()},
		promRule{Record: "rtmon:slo_error_budget_remaining:ratio", Expr: "1 - (1 - rtmon:slo_attainment:ratio" + sel + ") / " + budget, Labels: labels()})
	var warnings []string
	for _, a := range burnAlerts {
		var conds, words []string
		for _, c := range a.conds {
			factor := c.factor(s.Window)
			if factor*(1-s.Target) >= 1 {
				warnings = append(warnings, fmt.Sprintf("class %s, objective %s: %s over %s cannot fire: %sx the %s budget is an error ratio above 1",
					s.Class, id, a.name, pageview.FormatSLODuration(c.long), formatNum(factor, 6), formatPercent(1-s.Target)))
			}
			f := formatNum(factor, 6)
			conds = append(conds, fmt.Sprintf("(%s%s > (%s * %s) and %s%s > (%s * %s))",
				errorRatioRecord(c.long), sel, f, budget, errorRatioRecord(c.short), sel, f, budget))
			words = append(words, fmt.Sprintf("%s times over %s and %s", f, pageview.FormatSLODuration(c.long), pageview.FormatSLODuration(c.short)))
		}
		rules = append(rules, promRule{Alert: a.name, Expr: strings.Join(conds, "\nor\n"),
			Labels: labels("severity", a.severity, "class", s.Class, "kind", kind),
			Annotations: map[string]string{
				"summary": fmt.Sprintf("Class %s burns the error budget of its objective %q %s", s.Class, s.String(), a.speed),
				"description": fmt.Sprintf("The share of %ss of class %s not under %s (histogram bucket le=%s) is above its error budget (%s) %s.",
					s.Kind, s.Class, pageview.FormatSLODuration(s.Under), web.SLOBucketLE(s.Under), formatPercent(1-s.Target), strings.Join(words, ", or ")),
			}})
	}
	return rules, warnings
}

func errorRatioRecord(w time.Duration) string {
	return "rtmon:slo_error_ratio:rate" + pageview.FormatSLODuration(w)
}

// errorRatioExpr is the share of the objective's records over window w
// that are not under its threshold.
func errorRatioExpr(s pageview.ClassSLO, kind string, w time.Duration) string {
	return "1 - (\n" + goodRatioExpr(s, kind, w) + "\n)"
}

// goodRatioExpr is the share of the objective's records over window w that
// are under its threshold, summed over rtmon instances (sensors).
func goodRatioExpr(s pageview.ClassSLO, kind string, w time.Duration) string {
	r := "[" + pageview.FormatSLODuration(w) + "]"
	return "  sum by (class, kind) (rate(rtmon_response_time_seconds_bucket" + selector("class", s.Class, "kind", kind, "le", web.SLOBucketLE(s.Under)) + r + "))\n/\n" +
		"  sum by (class, kind) (rate(rtmon_response_time_seconds_count" + selector("class", s.Class, "kind", kind) + r + "))"
}

// selector writes a PromQL label matcher from name, value pairs; values
// are quoted (class names were checked to need no escaping, but a
// quoted string is right whatever they hold).
func selector(kv ...string) string {
	var parts []string
	for i := 0; i+1 < len(kv); i += 2 {
		parts = append(parts, kv[i]+"="+strconv.Quote(kv[i+1]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// formatNum writes f with at most digits significant digits, so that
// 1 - 0.95 is 0.05 and 0.02 * 720 is 14.4.
func formatNum(f float64, digits int) string {
	return strconv.FormatFloat(f, 'g', digits, 64)
}

func formatPercent(r float64) string { return formatNum(r*100, 10) + "%" }
