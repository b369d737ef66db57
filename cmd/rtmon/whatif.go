package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/pipeline"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/whatif"
)

type whatifOptions struct {
	records     string
	captures    []string
	storeURL    string
	maxTx       int
	sensor      string
	rulesFile   string
	rules       []string
	priorities  []string
	classesFile string
	format      string
	window      time.Duration
	reportDelay string
	stat        string
	synTimeout  time.Duration
	synAttempts int
	serverModel string
	members     int
	edges       []time.Duration
	exportRules string
	exportRank  int
	exportClass string
}

func newWhatifCommand() *cobra.Command {
	var o whatifOptions
	cmd := &cobra.Command{
		Use:   "whatif (--records DIR | --store URL | FILE...) [--rules FILE | --rule 'IF ... THEN ...' ...]",
		Short: "Predict per-class response times under RLM management rules",
		Long: `whatif replays records under RLM rules: those rtmon analyze --out DIR wrote
(pageviews when DIR/pageviews.jsonl exists, else transactions), those of a
store (--store, with the web page's bounds), or capture files analyzed on the
spot (with --classes if given). It prints, per
class, the measured and predicted response-time distributions, then ranks
each rule and each pair of rules by the gain for every class and the cost to
the others. Without rules it ranks the standard candidates: FAST SYN GAP 200ms,
FAST SYN/ACK GAP 200ms, SPLICE (and SPLICE TERMINATE TLS on HTTPS), REMOVE
EMBEDS, REWRITE EMBEDS ABOVE 100KB RATIO 0.25, and DROP SYN for each low-priority class while RT_HIGH exceeds the
high-priority classes' measured 75th percentile.

Rules: IF <cond> THEN <action>[, <action>], one per line, # comments, e.g.
  IF IP.SRC != 10.4.*.* AND RT_HIGH > 3.0s THEN DROP SYN, HALT FAST SYN`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.captures = args
			sources := 0
			for _, set := range []bool{o.records != "", o.storeURL != "", len(args) > 0} {
				if set {
					sources++
				}
			}
			if sources != 1 {
				return fmt.Errorf("whatif: give exactly one of --records DIR, --store URL or capture files")
			}
			return runWhatif(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.records, "records", "", "directory written by rtmon analyze --out")
	f.StringVar(&o.rulesFile, "rules", "", "file of rules, one per line")
	f.StringArrayVar(&o.rules, "rule", nil, "a rule (repeatable)")
	f.StringSliceVar(&o.priorities, "priority", nil, "class priorities, e.g. premium=high,others=low (unlisted: low)")
	f.StringVar(&o.classesFile, "classes", "", "the client classes file (YAML) given to analyze; its priorities mark high and low classes")
	f.StringVar(&o.format, "format", "text", "output: text or json")
	f.DurationVar(&o.window, "window", 30*time.Second, "sliding window of the RT conditions")
	f.StringVar(&o.stat, "stat", "median", "window statistic: median or mean")
	f.StringVar(&o.reportDelay, "report-delay", "live", "how long after a unit ends the conditions see it: live (as rtmon live reports it: a pageview 8s after its end: its idle gap passed, its records settled, then the live feed's once-a-second publishing; a transaction at once) or a duration (0: at once)")
	f.DurationVar(&o.synTimeout, "syn-timeout", 0, "every client's initial SYN retransmission timeout, doubling (e.g. 3s classic, 1s Linux); default: each client's schedule learned from the capture")
	f.IntVar(&o.synAttempts, "syn-attempts", 3, "SYNs a client sends before its connection fails")
	f.StringVar(&o.serverModel, "server-model", "linear", "how the server answers changed load: linear (server time scales with concurrency; SYN losses stay as measured) or queue (a worker pool and backlog fitted on the capture: queueing and SYN drops at a full queue follow the load)")
	f.IntVar(&o.members, "members", 8, "with --server-model queue: replays pooled into a FAST SYN prediction (each moves the copies' and resent requests' timers by up to 1 ms; such replays are chaotic, one is one draw); 1: a single replay")
	f.DurationSliceVar(&o.edges, "edges", nil, "histogram bucket lower bounds (default 0,0.5s,1s,...,60s)")
	f.StringVar(&o.storeURL, "store", "", "read the records from a store (memory:, duckdb:PATH, clickhouse://...)")
	f.IntVar(&o.maxTx, "max-transactions", 200000, "with --store: newest transactions read at most")
	f.StringVar(&o.sensor, "sensor", "", "with --store: replay one sensor's records only (one front end's traffic, which its own splicer's actions act on)")
	f.StringVar(&o.exportRules, "export-rules", "", "write the top-ranked rule set (or the rules given, when nothing is ranked) as a rules file for the front end, its predicted effect, model and assumptions in comments (- for stdout, instead of the report)")
	f.IntVar(&o.exportRank, "export-rank", 1, "with --export-rules: the rank to export")
	f.StringVar(&o.exportClass, "export-class", "", "with --export-rules: the class whose ranking to export from (default: the first high-priority class)")
	return cmd
}

func (o whatifOptions) options() (whatif.Options, error) {
	opts := whatif.Options{Window: o.window, Stat: whatif.Stat(o.stat), SYNTimeout: o.synTimeout,
		SYNAttempts: o.synAttempts, Priorities: map[string]whatif.Priority{}, ServerModel: whatif.ServerModel(o.serverModel),
		Members: o.members}
	for _, e := range o.edges {
		opts.Edges = append(opts.Edges, int64(e))
	}
	pairs := o.priorities
	if o.classesFile != "" {
		// The same classes file analyze used: its priorities say who is high.
		classes, err := pageview.LoadClasses(o.classesFile)
		if err != nil {
			return opts, fmt.Errorf("--classes: %w", err)
		}
		for _, r := range append([]pageview.Rule{{Class: classes.Default}}, classes.Rules...) {
			if r.Class.Priority != "" {
				pairs = append(pairs, r.Class.Name+"="+r.Class.Priority)
			}
		}
	}
	for _, p := range pairs {
		name, prio, err := whatif.ParsePriority(p)
		if err != nil {
			return opts, err
		}
		opts.Priorities[name] = prio
	}
	return opts, nil
}

// reportDelayFor is --report-delay for the dataset d.
func (o whatifOptions) reportDelayFor(d *whatif.Dataset) (time.Duration, error) {
	if o.reportDelay == "" || o.reportDelay == "live" {
		return d.LiveReportDelay(), nil
	}
	v, err := time.ParseDuration(o.reportDelay)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("--report-delay %q: want live or a duration of 0 or more", o.reportDelay)
	}
	return v, nil
}

func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}

func (o whatifOptions) parseRules() ([]whatif.Rule, error) {
	var rules []whatif.Rule
	if o.rulesFile != "" {
		b, err := readBounded(o.rulesFile, whatif.MaxRuleSource)
		if err != nil {
			return nil, fmt.Errorf("--rules: %w", err)
		}
		rs, err := whatif.ParseRules(string(b))
		if err != nil {
			return nil, fmt.Errorf("--rules %s: %w", o.rulesFile, err)
		}
		rules = append(rules, rs...)
	}
	for _, src := range o.rules {
		r, err := whatif.ParseRule(src)
		if err != nil {
			return nil, fmt.Errorf("--rule %q: %w", src, err)
		}
		rules = append(rules, r)
	}
	if len(rules) > whatif.MaxRules {
		return nil, fmt.Errorf("%d rules, at most %d", len(rules), whatif.MaxRules)
	}
	return rules, nil
}

// maxRankedSingles bounds the pairwise ranking (n singles make n(n-1)/2 pairs).
const maxRankedSingles = 30

type whatifReport struct {
	Unit        string                     `json:"unit"`
	Units       int                        `json:"units"`
	LoadModel   whatif.LoadModel           `json:"load_model"`
	Result      *whatif.Result             `json:"result,omitempty"`
	Assumptions map[string]string          `json:"assumptions"`
	Ranking     []whatif.Ranked            `json:"ranking,omitempty"`
	Measured    []whatif.ClassResult       `json:"measured,omitempty"`
	Priorities  map[string]whatif.Priority `json:"priorities,omitempty"`
	// SYNSchedules: how DROP SYN times each class's retransmissions.
	SYNSchedules []whatif.SYNScheduleSummary `json:"syn_schedules"`
	// ServerModel made the predictions; Queue is its fit when "queue".
	ServerModel whatif.ServerModel `json:"server_model"`
	Queue       *whatif.QueueModel `json:"queue_model,omitempty"`
}

func runWhatif(ctx context.Context, stdout io.Writer, o whatifOptions) error {
	if o.format != "text" && o.format != "json" {
		return fmt.Errorf("--format %q: want text or json", o.format)
	}
	opts, err := o.options()
	if err != nil {
		return err
	}
	rules, err := o.parseRules()
	if err != nil {
		return err
	}
	d, err := o.dataset(ctx)
	if err != nil {
		return err
	}
	if opts.ReportDelay, err = o.reportDelayFor(d); err != nil {
		return err
	}
	rep := whatifReport{Units: d.Units(), LoadModel: d.LoadModel(), Priorities: opts.Priorities,
		Unit: d.UnitName(), SYNSchedules: d.SYNSchedules(opts), ServerModel: whatif.ServerLinear}
	if opts.ServerModel == whatif.ServerQueue {
		m, err := d.QueueModel(opts)
		if err != nil {
			return err
		}
		rep.ServerModel, rep.Queue = whatif.ServerQueue, &m
	}
	var singles [][]whatif.Rule
	if len(rules) > 0 {
		if rep.Result, err = d.Evaluate(rules, opts); err != nil {
			return err
		}
		if len(rules) > 1 {
			for _, r := range rules {
				singles = append(singles, []whatif.Rule{r})
			}
		}
	} else {
		if singles, err = d.StandardCandidates(opts); err != nil {
			return err
		}
		base, err := d.Evaluate(nil, opts)
		if err != nil {
			return err
		}
		rep.Measured = base.Classes
	}
	candidates := singles
	if len(singles) <= maxRankedSingles {
		candidates = whatif.Pairs(singles)
	}
	if len(candidates) > 0 {
		if rep.Ranking, err = d.Rank(candidates, opts); err != nil {
			return err
		}
	}
	rep.Assumptions = whatif.Assumptions(append([][]whatif.Rule{rules}, singles...)...)
	if o.exportRules != "" {
		if err := exportWhatifRules(stdout, d, &rep, rules, opts, o); err != nil || o.exportRules == "-" {
			return err
		}
	}
	if o.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	writeWhatifText(stdout, &rep)
	return nil
}

func dur(ns int64) string { return whatif.ReadableDuration(ns) }

func writeWhatifText(w io.Writer, rep *whatifReport) {
	m := rep.LoadModel
	fmt.Fprintf(w, "unit: %s (%d)\nload model: server time = %s + %s x concurrency (%d samples)\n",
		rep.Unit, rep.Units, dur(int64(m.Intercept)), dur(int64(m.Slope)), m.Samples)
	if q := rep.Queue; q != nil {
		writeQueueModel(w, q)
	}
	fmt.Fprintln(w, "SYN retransmissions (DROP SYN):")
	for _, s := range rep.SYNSchedules {
		fmt.Fprintf(w, "  class %s: %s, then x%g per attempt (%s", s.Class, dur(int64(s.Schedule.Initial)), s.Schedule.Growth, s.Schedule.Source)
		if s.Schedule.LinuxLinear {
			fmt.Fprint(w, "; Linux's linear timeouts: giving up when doubling would")
		}
		if s.OwnClients > 0 {
			fmt.Fprintf(w, "; %d of %d clients on their own", s.OwnClients, s.Clients)
		}
		fmt.Fprintln(w, ")")
	}
	classes := rep.Measured
	if rep.Result != nil {
		fmt.Fprintf(w, "\nrules (RT over the last %s, each unit seen %s after it ended):\n",
			dur(int64(rep.Result.Window)), dur(int64(rep.Result.ReportDelay)))
		for _, r := range rep.Result.Rules {
			fmt.Fprintln(w, "  "+r)
		}
		classes = rep.Result.Classes
	}
	for _, c := range classes {
		fmt.Fprintf(w, "\nclass %s (%s priority): %d (%d pageviews, %d stand-alone transactions)\n",
			c.Class, c.Priority, c.Measured.N, c.Pageviews, c.Transactions)
		if rep.Result == nil {
			fmt.Fprintf(w, "  mean %s  p50 %s  p90 %s  p99 %s\n", dur(c.Measured.Mean), dur(c.Measured.P50), dur(c.Measured.P90), dur(c.Measured.P99))
			continue
		}
		fmt.Fprintf(w, "  %-16s %10s %10s\n", "", "measured", "predicted")
		for _, row := range []struct {
			name string
			a, b int64
		}{{"mean", c.Measured.Mean, c.Predicted.Mean}, {"p50", c.Measured.P50, c.Predicted.P50},
			{"p90", c.Measured.P90, c.Predicted.P90}, {"p99", c.Measured.P99, c.Predicted.P99}} {
			fmt.Fprintf(w, "  %-16s %10s %10s\n", row.name, dur(row.a), dur(row.b))
		}
		for i, e := range c.Measured.Edges {
			if c.Measured.Counts[i] == 0 && c.Predicted.Counts[i] == 0 {
				continue
			}
			label := ">= " + dur(e)
			if i+1 < len(c.Measured.Edges) {
				label = "[" + dur(e) + ", " + dur(c.Measured.Edges[i+1]) + ")"
			}
			fmt.Fprintf(w, "  %-16s %10d %10d\n", label, c.Measured.Counts[i], c.Predicted.Counts[i])
		}
		if c.Band != nil {
			fmt.Fprintf(w, "  %-16s %9.1f%% %9.1f%%  (p50, p90: %s)\n", "model band", 100*c.Band[0], 100*c.Band[1], whatif.BandSource(c.BandFree))
		}
		if r := c.MembersP90; r != nil {
			fmt.Fprintf(w, "  %-16s %10s %10s  (the lowest and highest p90 of the %d replays pooled)\n", "members' p90", dur(r[0]), dur(r[1]), rep.Result.Members)
		}
		fmt.Fprintf(w, "  affected %d, SYN dropped %d, failed %d\n", c.Affected, c.Dropped, c.Failed)
	}
	if len(rep.Ranking) > 0 {
		class := ""
		for _, r := range rep.Ranking {
			if r.Class != class {
				class = r.Class
				fmt.Fprintf(w, "\nranking for %s (gain in mean and p90; cost = largest rise of another class's mean):\n", class)
			}
			cost := dur(r.Cost)
			if r.CostClass != "" {
				cost += " (" + r.CostClass + ")"
			}
			band := ""
			if r.Band != nil {
				band = fmt.Sprintf(" (model band ±%.1f%% at p90", 100*r.Band[1])
				if r.BandFree {
					band += ", every SYN judged by the model"
				}
				band += ")"
			}
			fmt.Fprintf(w, "  %9s %9s  cost %-16s failed %-4d %s%s\n", dur(r.Gain), dur(r.GainP90), cost, r.Failed, strings.Join(r.Rules, "; "), band)
		}
	}
	fmt.Fprintln(w, "\nassumptions:")
	for _, k := range slices.Sorted(maps.Keys(rep.Assumptions)) {
		fmt.Fprintf(w, "  %s: %s\n", k, rep.Assumptions[k])
	}
}

// dataset loads the records to replay from whichever source was given.
func (o whatifOptions) dataset(ctx context.Context) (*whatif.Dataset, error) {
	if o.sensor != "" && o.storeURL == "" {
		return nil, fmt.Errorf("--sensor %q: only a store (--store) holds several sensors' records", o.sensor)
	}
	switch {
	case o.storeURL != "":
		st, err := store.Open(ctx, o.storeURL, store.Options{})
		if err != nil {
			return nil, fmt.Errorf("--store %s: %w", o.storeURL, err)
		}
		defer st.Close()
		recs, err := whatif.ReadStore(ctx, st, store.TimeRange{}, whatif.ReadLimits{MaxTransactions: o.maxTx, Sensor: o.sensor})
		if err != nil {
			return nil, err
		}
		if recs.Loaded.Truncated {
			slog.Warn("whatif: read only the newest transactions", "read", recs.Loaded.Transactions, "matching", recs.Loaded.Matching)
		}
		return recs.Dataset()
	case len(o.captures) > 0:
		var rec recordCollector
		cfg := pipeline.DefaultConfig()
		cfg.Files, cfg.ClassesFile, cfg.Sinks = o.captures, o.classesFile, []pageview.Sink{&rec}
		if err := runPipeline(ctx, io.Discard, cfg, false); err != nil {
			return nil, err
		}
		return whatif.NewDataset(rec.conns, rec.txs, rec.pvs)
	}
	return whatif.Load(o.records)
}

// recordCollector keeps every record of an in-process analysis.
type recordCollector struct {
	conns []*reconstruct.Connection
	txs   []*reconstruct.Transaction
	pvs   []*pageview.Pageview
}

func (r *recordCollector) Connection(c *reconstruct.Connection)   { r.conns = append(r.conns, c) }
func (r *recordCollector) Transaction(t *reconstruct.Transaction) { r.txs = append(r.txs, t) }
func (r *recordCollector) Pageview(p *pageview.Pageview)          { r.pvs = append(r.pvs, p) }

// writeQueueModel prints the fitted queueing server and how well its null
// replay reproduces the capture.
func writeQueueModel(w io.Writer, q *whatif.QueueModel) {
	backlog := "no SYN drops modelled"
	if q.Backlog > 0 {
		backlog = fmt.Sprintf("backlog %d of connections waiting for a worker", q.Backlog)
		if q.HalfOpenSlots {
			backlog = fmt.Sprintf("backlog %d of half-open and waiting connections", q.Backlog)
		}
	}
	free := "free at the response's first byte"
	if q.HoldsTransfer {
		free = "busy until the response's last byte"
	}
	fmt.Fprintf(w, "server model: queue, %d workers %s (%.1f%% of responses unexplained; service times per URL vary by %.1f%%), %s; SYN losses measured %d, replayed %d; %d connections left half-open; null replay within %.1f%% (%.1f%% with every SYN judged by the model)\n",
		q.Workers, free, 100*q.Unexplained, 100*q.ServiceSpread, backlog, q.SYNLossesMeasured, q.SYNLossesReplayed, q.HalfOpen, 100*q.Worst, 100*q.FreeWorst)
	for _, f := range q.Fit {
		fmt.Fprintf(w, "  class %s: server p50 %s/%s p90 %s/%s, unit p50 %s/%s/%s p90 %s/%s/%s (measured/replayed/every SYN judged), SYN losses %d/%d\n",
			f.Class, dur(f.ServerP50[0]), dur(f.ServerP50[1]), dur(f.ServerP90[0]), dur(f.ServerP90[1]),
			dur(f.UnitP50[0]), dur(f.UnitP50[1]), dur(f.FreeUnitP50), dur(f.UnitP90[0]), dur(f.UnitP90[1]), dur(f.FreeUnitP90), f.SYNLosses[0], f.SYNLosses[1])
	}
	for _, n := range q.Notes {
		fmt.Fprintln(w, "  note: "+n)
	}
}
