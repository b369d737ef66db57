package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/export"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/web"
)

const defaultIdle = reconstruct.DefaultIdleTimeout

type analyzeOptions struct {
	format      string
	out         string
	serverPorts []uint
	serverNets  []string
	maxConns    int
	idle        time.Duration
	progress    bool
	reader      string
	live        bool // cancellation is the normal end of input, not an interruption
	classes     string
	har         string
	// storeURL, if set, receives every record (see store.Open).
	storeURL string
	sensor   string
	rollups  string
	// store, if set, is an already open store the records also go to
	// (demo and live share theirs with the UI); runPipeline flushes it but
	// leaves closing to its owner.
	store store.Store
	// sinks receive every record too.
	sinks []pageview.Sink
	// feed, if set, gets live counters and points for the UI.
	feed *web.LiveFeed
}

func newAnalyzeCommand() *cobra.Command {
	var o analyzeOptions
	cmd := &cobra.Command{
		Use:   "analyze FILE...",
		Short: "Reconstruct connections and transactions from capture files and summarise response times",
		Long: `analyze reads pcap or pcapng files (optionally gzip-compressed; several files
are merged in timestamp order), reconstructs TCP connections and HTTP/1.x
transactions, and prints a per-component summary of client-perceived response
time, then transactions grouped into pageviews per client class. With --out it
also writes connections, transactions and pageviews as JSON Lines or CSV; with
--har, one HAR file per pageview.

A truncated file yields every record it held; the command then exits with status 2.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAnalyze(cmd.Context(), cmd.OutOrStdout(), args, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "jsonl", "record format: jsonl or csv")
	f.StringVar(&o.out, "out", "", "directory for connections.* and transactions.* (none: summary only)")
	f.UintSliceVar(&o.serverPorts, "server-port", nil, "server port(s), to orient connections whose handshake was not captured")
	f.StringSliceVar(&o.serverNets, "server-net", nil, "server address prefix(es), e.g. 203.0.113.0/24")
	f.IntVar(&o.maxConns, "max-connections", reconstruct.DefaultMaxConnections, "connection table bound; the least recently active is evicted past it")
	f.DurationVar(&o.idle, "idle-timeout", defaultIdle, "end connections idle this long (capture time)")
	f.BoolVar(&o.progress, "progress", term.IsTerminal(int(os.Stderr.Fd())), "show a progress bar")
	f.StringVar(&o.reader, "reader", "pcapgo", "file reader: pcapgo or libpcap")
	f.StringVar(&o.classes, "classes", "", "client classes file (YAML); default: one class for everyone")
	f.StringVar(&o.har, "har", "", "write one HAR 1.2 file per pageview into this directory")
	addStoreFlags(f, &o)
	return cmd
}

func (o analyzeOptions) trackerConfig() (reconstruct.Config, error) {
	cfg := reconstruct.Config{MaxConnections: o.maxConns, IdleTimeout: o.idle}
	for _, p := range o.serverPorts {
		if p == 0 || p > 65535 {
			return cfg, fmt.Errorf("--server-port %d: want 1-65535", p)
		}
		cfg.ServerPorts = append(cfg.ServerPorts, uint16(p))
	}
	for _, s := range o.serverNets {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return cfg, fmt.Errorf("--server-net %q: %w", s, err)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		cfg.ServerNets = append(cfg.ServerNets, p)
	}
	return cfg, nil
}

func runAnalyze(ctx context.Context, stdout io.Writer, files []string, o analyzeOptions) error {
	cfg, err := o.trackerConfig()
	if err != nil {
		return err
	}
	format, err := export.ParseFormat(o.format)
	if err != nil {
		return fmt.Errorf("--format: %w", err)
	}
	var fopts capture.FileOptions
	switch o.reader {
	case "pcapgo":
		fopts.Reader = capture.ReaderPcapgo
	case "libpcap":
		fopts.Reader = capture.ReaderLibpcap
	default:
		return fmt.Errorf("--reader %q: want pcapgo or libpcap", o.reader)
	}
	src, err := capture.OpenFiles(files, fopts)
	if err != nil {
		return err
	}
	defer src.Close()
	return runPipeline(ctx, stdout, src, o, cfg, format)
}

// runPipeline moves packets from src through reconstruction into the record
// files and the summary; offline and live capture share it from the first
// decoded packet on.
func runPipeline(ctx context.Context, stdout io.Writer, src capture.Source, o analyzeOptions, cfg reconstruct.Config, format export.Format) error {
	classes := pageview.DefaultClasses()
	if o.classes != "" {
		var err error
		if classes, err = pageview.LoadClasses(o.classes); err != nil {
			return err
		}
	}
	summary := export.NewSummary()
	classSummary := pageview.NewClassSummary()
	outputs := pageview.Tee{pageview.Records(summary), classSummary}
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close() // after an error: best effort, the first error is already on its way
		}
	}()
	if o.out != "" {
		records, err := export.NewRecordWriter(o.out, format)
		if err != nil {
			return err
		}
		closers = append(closers, records)
		pageviews, err := export.NewPageviewWriter(o.out, format)
		if err != nil {
			return err
		}
		closers = append(closers, pageviews)
		outputs = append(outputs, pageview.Records(records), pageviews)
	}
	if o.har != "" {
		har, err := export.NewHARDir(o.har)
		if err != nil {
			return err
		}
		closers = append(closers, har)
		outputs = append(outputs, har)
	}
	st := o.store
	if st == nil && o.storeURL != "" {
		var err error
		if st, err = openStore(ctx, o); err != nil {
			return err
		}
		defer st.Close() // after an error; the normal path closes below and reports
	}
	if st != nil {
		outputs = append(outputs, st)
	}
	for _, s := range o.sinks {
		outputs = append(outputs, s)
	}
	var bar *progressbar.ProgressBar
	if o.progress {
		_, total := src.Progress()
		bar = progressbar.DefaultBytes(total, "analyzing")
	}
	var grouperOut pageview.Sink = outputs
	if o.feed != nil {
		grouperOut = o.feed.Observe(outputs)
	}
	grouper := pageview.NewGrouper(pageview.Config{}, classes, grouperOut)
	var trackerOut reconstruct.Sink = grouper
	var hook func(*reconstruct.Tracker)
	if o.feed != nil {
		// Tap before the grouper, which holds transactions for seconds: the
		// live chart must follow traffic within 2 s.
		trackerOut = o.feed.Tap(grouper, func(a netip.Addr) string { name, _ := classes.Classify(a); return name })
		snap := &statsSnapshot{}
		hook = func(tr *reconstruct.Tracker) { snap.set(web.StatsFrom(src.Stats(), tr.Stats(), storeStats(st))) }
		go o.feed.Run(ctx, time.Second, snap.get)
	}
	readErr := pump(ctx, src, reconstruct.NewTracker(cfg, trackerOut), summary, bar, hook)
	grouper.Flush()
	if o.live && ctx.Err() != nil {
		readErr = nil
	}
	if bar != nil {
		_ = bar.Finish()
		fmt.Fprintln(os.Stderr)
	}
	toClose := closers
	closers = nil
	for _, c := range toClose {
		if err := c.Close(); err != nil {
			return err
		}
	}
	if st != nil {
		if err := finishStore(st, o.store == nil, stdout); err != nil {
			return err
		}
	}
	if readErr != nil {
		summary.Errors = append(summary.Errors, readErr.Error())
	}
	summary.WriteText(stdout)
	fmt.Fprintln(stdout)
	if err := classSummary.WriteText(stdout); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	if readErr != nil {
		slog.Error("input ended early; records up to that point were written", "err", readErr)
		return exitError(2)
	}
	return nil
}

// pump moves packets from src through the tracker until the input ends, then
// flushes the tracker and fills the summary's input counters. The returned
// error is a read error after which everything read before it was processed.
func pump(ctx context.Context, src capture.Source, tracker *reconstruct.Tracker, summary *export.Summary, bar *progressbar.ProgressBar, hook func(*reconstruct.Tracker)) error {
	start := time.Now()
	every := 0 // the tracker's default
	if hook != nil {
		every = 16 // live dashboards: counters fresh at any packet rate that matters
	}
	readErr := tracker.ReadFromEvery(src, every, func() error {
		if hook != nil {
			hook(tracker)
		}
		if bar != nil {
			done, _ := src.Progress()
			_ = bar.Set64(done)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted: %w", ctx.Err())
		}
		return nil
	})
	summary.Elapsed = time.Since(start)
	st := src.Stats()
	summary.Tracker = tracker.Stats()
	summary.Malformed = st.Decode.Map()
	for _, s := range st.Sources {
		summary.Packets += s.Frames
		summary.Bytes += s.Bytes
		if s.Live {
			if summary.CaptureDrops == nil {
				summary.CaptureDrops = map[string]uint64{}
			}
			summary.CaptureDrops[s.Name+" dropped"] += s.Capture.Dropped
			summary.CaptureDrops[s.Name+" ifdropped"] += s.Capture.IfDropped
		}
	}
	return readErr
}

// statsSnapshot hands pipeline counters from the packet loop to the live
// feed's goroutine: the tracker and the source are not safe to read
// concurrently, so the loop copies them here as it goes.
type statsSnapshot struct {
	mu sync.Mutex
	v  web.PipelineStats
}

func (s *statsSnapshot) set(v web.PipelineStats) {
	s.mu.Lock()
	s.v = v
	s.mu.Unlock()
}

func (s *statsSnapshot) get() web.PipelineStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.v
}

func storeStats(st store.Store) store.WriterStats {
	if st == nil {
		return store.WriterStats{}
	}
	return st.Stats()
}
