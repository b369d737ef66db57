package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rtmon/rtmon/compare"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/query"
	"github.com/rtmon/rtmon/web"
)

type compareOptions struct {
	storeURL         string
	aFrom, aTo       string
	bFrom, bTo       string
	at               string
	window           time.Duration
	class            string
	aClass, bClass   string
	aSensor, bSensor string
	format           string
	maxSamples       int
	resamples        int
	alpha            float64
	seed             uint64
}

func newCompareCommand() *cobra.Command {
	var o compareOptions
	cmd := &cobra.Command{
		Use:   "compare --store URL (--at T [--window 30m] | --a-from T --a-to T --b-from T --b-to T)",
		Short: "Compare the response times of two ranges per class: differences and whether they are more than noise",
		Long: `compare reads two sides from a store, A and B: two time ranges (--a-from/--a-to
and --b-from/--b-to, or --at T with --window W for the W before T against the W
after it), two classes (--a-class/--b-class) or two sensors (--a-sensor/--b-sensor).
Per class and component (transactions: total, tconn, tserver, ttransfer;
pageviews: total) it prints count, median, p90 and p99 of each side, the
differences B - A, bootstrap confidence intervals of the median and p90
differences, the Mann-Whitney U test's p-value and a verdict: "slower,
significant", "faster, significant", "no significant change" or "too few
samples". Each side reads at most --max-samples records per class, chosen
by a hash of their ids: the same records give the same answer.
Times: RFC 3339, YYYY-MM-DDTHH:MM[:SS] (UTC), YYYY-MM-DD or ns since the epoch.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCompare(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.storeURL, "store", "", "the store to read (duckdb:PATH, clickhouse://...)")
	f.StringVar(&o.aFrom, "a-from", "", "side A from (inclusive)")
	f.StringVar(&o.aTo, "a-to", "", "side A to (exclusive)")
	f.StringVar(&o.bFrom, "b-from", "", "side B from (inclusive)")
	f.StringVar(&o.bTo, "b-to", "", "side B to (exclusive)")
	f.StringVar(&o.at, "at", "", "compare the --window before this time (A) with the --window after it (B)")
	f.DurationVar(&o.window, "window", 30*time.Minute, "with --at: the length of each side")
	f.StringVar(&o.class, "class", "", "only this class")
	f.StringVar(&o.aClass, "a-class", "", "side A is this class (with --b-class: compare two classes)")
	f.StringVar(&o.bClass, "b-class", "", "side B is this class")
	f.StringVar(&o.aSensor, "a-sensor", "", "side A: only records of this sensor")
	f.StringVar(&o.bSensor, "b-sensor", "", "side B: only records of this sensor")
	f.StringVar(&o.format, "format", "text", "output: text, json or csv")
	f.IntVar(&o.maxSamples, "max-samples", 5000, "records sampled per class and side at most")
	f.IntVar(&o.resamples, "resamples", 1000, "bootstrap resamples")
	f.Float64Var(&o.alpha, "alpha", 0.05, "significance level")
	f.Uint64Var(&o.seed, "seed", 1, "sampling and bootstrap seed")
	return cmd
}

// request turns the flags into a comparison.
func (o compareOptions) request() (compare.Request, error) {
	req := compare.Request{Class: o.class, MaxPerClass: o.maxSamples,
		Options: compare.Options{Alpha: o.alpha, Resamples: o.resamples, Seed: o.seed}}
	req.A.Class, req.B.Class, req.A.Sensor, req.B.Sensor = o.aClass, o.bClass, o.aSensor, o.bSensor
	if o.at != "" {
		if o.aFrom != "" || o.aTo != "" || o.bFrom != "" || o.bTo != "" {
			return req, fmt.Errorf("compare: --at excludes --a-from/--a-to/--b-from/--b-to")
		}
		t, err := web.ParseTime(o.at)
		if err != nil {
			return req, fmt.Errorf("--at: %w", err)
		}
		if o.window <= 0 {
			return req, fmt.Errorf("--window %v: want a positive duration", o.window)
		}
		req.A.Range = query.TimeRange{From: t - int64(o.window), To: t}
		req.B.Range = query.TimeRange{From: t, To: t + int64(o.window)}
		return req, nil
	}
	for _, p := range []struct {
		name string
		s    string
		dst  *int64
	}{{"--a-from", o.aFrom, &req.A.Range.From}, {"--a-to", o.aTo, &req.A.Range.To},
		{"--b-from", o.bFrom, &req.B.Range.From}, {"--b-to", o.bTo, &req.B.Range.To}} {
		t, err := web.ParseTime(p.s)
		if err != nil {
			return req, fmt.Errorf("%s: %w", p.name, err)
		}
		*p.dst = t
	}
	for _, r := range []query.TimeRange{req.A.Range, req.B.Range} {
		if r.To != 0 && r.To <= r.From {
			return req, fmt.Errorf("compare: a range ends before it starts")
		}
	}
	if req.A.Range == req.B.Range && req.A.Class == "" && req.A.Sensor == req.B.Sensor {
		return req, fmt.Errorf("compare: the two sides are the same: give two ranges (--at, --a-from ...), two classes or two sensors")
	}
	return req, nil
}

func runCompare(ctx context.Context, w io.Writer, o compareOptions) error {
	if o.storeURL == "" {
		return fmt.Errorf("compare: --store is required")
	}
	switch o.format {
	case "text", "json", "csv":
	default:
		return fmt.Errorf("--format %q: want text, json or csv", o.format)
	}
	req, err := o.request()
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, o.storeURL, store.Options{})
	if err != nil {
		return fmt.Errorf("--store %s: %w", o.storeURL, err)
	}
	defer st.Close()
	rep, err := compare.Run(ctx, st, req)
	if err != nil {
		return err
	}
	switch o.format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	case "csv":
		return writeCompareCSV(w, rep)
	}
	return writeCompareText(w, rep)
}

func sideText(s compare.Side) string {
	out := rangeText(s.Range)
	if s.Class != "" {
		out += " class " + s.Class
	}
	if s.Sensor != "" {
		out += " sensor " + s.Sensor
	}
	return out
}

func rangeText(r query.TimeRange) string {
	at := func(ns int64, open string) string {
		if ns == 0 {
			return open
		}
		return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
	}
	return "[" + at(r.From, "start") + ", " + at(r.To, "end") + ")"
}

// ms formats ns as milliseconds.
func ms(ns float64) string { return strconv.FormatFloat(ns/1e6, 'f', 1, 64) }

func msI(ns int64) string { return ms(float64(ns)) }

func pct(x float64) string { return fmt.Sprintf("%+.0f%%", 100*x) }

func writeCompareText(w io.Writer, rep *compare.Report) error {
	fmt.Fprintf(w, "A: %s\nB: %s\n", sideText(rep.A), sideText(rep.B))
	fmt.Fprintf(w, "Mann-Whitney U at alpha %g; %.0f%% bootstrap intervals of B - A from %d resamples; at most %d records per class and side; times in ms\n",
		rep.Alpha, 100*rep.Confidence, rep.Resamples, rep.MaxPerClass)
	if len(rep.Classes) == 0 {
		fmt.Fprintln(w, "\nno records in either range")
	}
	for _, c := range rep.Classes {
		fmt.Fprintf(w, "\n%s: %s (transactions: A %d, B %d)\n", c.Class, c.Verdict, c.CountA, c.CountB)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "\tn A\tn B\tmedian A\tmedian B\tdelta\t%\tCI\tp90 A\tp90 B\tdelta\t%\tCI\tp99 A\tp99 B\tp-value\tverdict\t")
		for _, r := range c.Rows {
			fmt.Fprintf(tw, "%s %s\t%d\t%d\t%s\t%s\t%s\t%s\t[%s, %s]\t%s\t%s\t%s\t%s\t[%s, %s]\t%s\t%s\t%.3g\t%s\t\n",
				r.Kind, r.Component, r.A.N, r.B.N, msI(r.A.Median), msI(r.B.Median), msI(r.DeltaMedian), pct(r.RelMedian),
				ms(r.MedianCI.Lo), ms(r.MedianCI.Hi), msI(r.A.P90), msI(r.B.P90), msI(r.DeltaP90), pct(r.RelP90),
				ms(r.P90CI.Lo), ms(r.P90CI.Hi), msI(r.A.P99), msI(r.B.P99), r.PValue, r.Verdict)
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("compare output: %w", err)
		}
	}
	return nil
}

func writeCompareCSV(w io.Writer, rep *compare.Report) error {
	cw := csv.NewWriter(w)
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	_ = cw.Write([]string{"class", "kind", "component", "n_a", "n_b", "median_a_ns", "median_b_ns", "p90_a_ns", "p90_b_ns",
		"p99_a_ns", "p99_b_ns", "delta_median_ns", "rel_median", "median_ci_lo_ns", "median_ci_hi_ns", "delta_p90_ns", "rel_p90",
		"p90_ci_lo_ns", "p90_ci_hi_ns", "delta_p99_ns", "rel_p99", "p_value", "verdict"})
	for _, c := range rep.Classes {
		for _, r := range c.Rows {
			_ = cw.Write([]string{c.Class, string(r.Kind), r.Component, strconv.Itoa(r.A.N), strconv.Itoa(r.B.N),
				i(r.A.Median), i(r.B.Median), i(r.A.P90), i(r.B.P90), i(r.A.P99), i(r.B.P99),
				i(r.DeltaMedian), f(r.RelMedian), f(r.MedianCI.Lo), f(r.MedianCI.Hi), i(r.DeltaP90), f(r.RelP90),
				f(r.P90CI.Lo), f(r.P90CI.Hi), i(r.DeltaP99), f(r.RelP99), f(r.PValue), r.Verdict})
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("compare csv: %w", err)
	}
	return nil
}
