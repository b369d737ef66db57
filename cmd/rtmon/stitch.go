package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/stitch"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/web"
)

type stitchOptions struct {
	storeURL         string
	from, to         string
	lag              time.Duration
	partition        string
	window, margin   time.Duration
	classes          string
	ignoreCheckpoint bool
	every            time.Duration
	format           string
}

func newStitchCommand() *cobra.Command {
	var o stitchOptions
	cmd := &cobra.Command{
		Use:   "stitch --store URL [--from T] [--to T] [--partition k/n] [--every 1m]",
		Short: "Group every sensor's transactions into pageviews per client across sensors",
		Long: `stitch reads the transactions all sensors stored for a time range, groups
them per client across sensors into pageviews (the grouping rtmon live uses),
and stores each pageview seen by more than one sensor in the place of the
partial ones the sensors made; the transactions then name it. Pageviews seen
by one sensor stay as it grouped them. It works a --window at a time, reading
--margin more on each side, and records after each window how far its
partition got: a second run resumes there, and a run over a range already
stitched changes nothing. --partition k/n takes the clients whose address
hashes to k modulo n, so n stitchers can run side by side.
--to defaults to now less --lag (records still arriving are not stitched);
--from defaults to the checkpoint. With --every it runs again at that interval
until interrupted. See docs/pageviews.md.
Times: RFC 3339, YYYY-MM-DDTHH:MM[:SS] (UTC), YYYY-MM-DD or ns since the epoch.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStitch(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.storeURL, "store", "", "the store every sensor writes to (duckdb:PATH, clickhouse://...)")
	f.StringVar(&o.from, "from", "", "stitch pageviews starting from this time (default: the partition's checkpoint)")
	f.StringVar(&o.to, "to", "", "up to this time, exclusive (default: now - --lag)")
	f.DurationVar(&o.lag, "lag", 5*time.Minute, "without --to: leave the newest records this long to arrive")
	f.StringVar(&o.partition, "partition", "0/1", "k/n: the clients whose address hashes to k modulo n")
	f.DurationVar(&o.window, "window", stitch.DefaultWindow, "time stitched per pass (bounds memory)")
	f.DurationVar(&o.margin, "margin", stitch.DefaultMargin, "read this much more on each side of a window (longer than any pageview)")
	f.StringVar(&o.classes, "classes", "", "the sensors' classes file (classes and priorities of stitched pageviews)")
	f.BoolVar(&o.ignoreCheckpoint, "ignore-checkpoint", false, "start at --from even when the checkpoint is past it")
	f.DurationVar(&o.every, "every", 0, "run again at this interval until interrupted (0: once)")
	f.StringVar(&o.format, "format", "text", "output: text or json")
	return cmd
}

// parsePartition reads "k/n".
func parsePartition(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	k, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || k < 0 || k >= n {
		return 0, 0, fmt.Errorf("--partition %q: want k/n with 0 <= k < n", s)
	}
	return k, n, nil
}

// config turns the flags into a run's configuration at wall time now.
func (o stitchOptions) config(now time.Time) (stitch.Config, error) {
	cfg := stitch.Config{Window: o.window, Margin: o.margin, IgnoreCheckpoint: o.ignoreCheckpoint}
	var err error
	if cfg.Part, cfg.Parts, err = parsePartition(o.partition); err != nil {
		return cfg, err
	}
	if o.from != "" {
		if cfg.From, err = web.ParseTime(o.from); err != nil {
			return cfg, fmt.Errorf("--from: %w", err)
		}
	}
	cfg.To = now.Add(-o.lag).UnixNano()
	if o.to != "" {
		if cfg.To, err = web.ParseTime(o.to); err != nil {
			return cfg, fmt.Errorf("--to: %w", err)
		}
	}
	if o.classes != "" {
		if cfg.Classes, err = pageview.LoadClasses(o.classes); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

func runStitch(ctx context.Context, out io.Writer, o stitchOptions) error {
	if o.storeURL == "" {
		return errors.New("stitch: --store is required")
	}
	if o.format != "text" && o.format != "json" {
		return fmt.Errorf("stitch: --format %q: want text or json", o.format)
	}
	if _, err := o.config(time.Now()); err != nil {
		return err
	}
	st, err := store.Open(ctx, o.storeURL, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	acc, err := store.StitchingOf(st)
	if err != nil {
		return err
	}
	for {
		cfg, err := o.config(time.Now())
		if err != nil {
			return err
		}
		stats, err := stitch.Run(ctx, acc, cfg)
		if err != nil {
			return err
		}
		if err := printStitch(out, o.format, stats); err != nil {
			return err
		}
		if o.every <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.every):
		}
		// Later passes resume from the checkpoint.
		o.from, o.ignoreCheckpoint = "", false
	}
}

func printStitch(out io.Writer, format string, s stitch.Stats) error {
	if format == "json" {
		return json.NewEncoder(out).Encode(s)
	}
	_, err := fmt.Fprintf(out, "stitched up to %s: %d windows, %d transactions, %d pageviews, %d across sensors, %d written, %d replaced\n",
		time.Unix(0, s.Done).UTC().Format(time.RFC3339), s.Windows, s.Transactions, s.Pageviews, s.Stitched, s.Written, s.Deleted)
	return err
}
