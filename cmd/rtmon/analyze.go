package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"runtime/debug"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/export"
	"github.com/rtmon/rtmon/pipeline"
	"github.com/rtmon/rtmon/reconstruct"
)

const defaultIdle = reconstruct.DefaultIdleTimeout

// analyzeOptions are the flag values of analyze (and, embedded, of live);
// config turns them into a pipeline.Config.
type analyzeOptions struct {
	format      string
	out         string
	serverPorts []uint
	serverNets  []string
	maxConns    int
	maxMemory   string
	workers     int
	// keepSecrets, redactParams, redactQuery and clientKey: see addPrivacyFlags.
	keepSecrets  bool
	redactParams []string
	redactQuery  bool
	clientKey    string
	idle         time.Duration
	progress     bool
	reader       string
	classes      string
	har          string
	// storeURL, if set, receives every record (see store.Open).
	storeURL string
	sensor   string
	rollups  string // "on" or "off": store.Options.Rollups
	// keyLog: an NSS key log file (--keylog) whose secrets decrypt HTTPS.
	keyLog string
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
	addPrivacyFlags(f, &o)
	addMemoryFlag(f, &o)
	addKeyLogFlag(f, &o)
	return cmd
}

// runtimeMemory is what the Go runtime, goroutine stacks and the
// summary's sketches may take beside --max-memory.
const runtimeMemory = 64 << 20

// config parses the flag values into a pipeline configuration (without
// its input).
func (o analyzeOptions) config() (pipeline.Config, error) {
	cfg := pipeline.DefaultConfig()
	cfg.Tracker.MaxConnections, cfg.Tracker.IdleTimeout = o.maxConns, o.idle
	if o.workers < 0 {
		return cfg, fmt.Errorf("--workers %d: want 0 (one per core) or more", o.workers)
	}
	cfg.Workers = o.workers
	if err := o.privacyConfig(&cfg); err != nil {
		return cfg, err
	}
	var err error
	if cfg.MaxMemory, err = o.memoryBudget(); err != nil {
		return cfg, err
	}
	for _, p := range o.serverPorts {
		if p == 0 || p > 65535 {
			return cfg, fmt.Errorf("--server-port %d: want 1-65535", p)
		}
		cfg.Tracker.ServerPorts = append(cfg.Tracker.ServerPorts, uint16(p))
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
		cfg.Tracker.ServerNets = append(cfg.Tracker.ServerNets, p)
	}
	format, err := export.ParseFormat(o.format)
	if err != nil {
		return cfg, fmt.Errorf("--format: %w", err)
	}
	switch o.reader {
	case "pcapgo", "": // live has no files to read
		cfg.FileReader = capture.ReaderPcapgo
	case "libpcap":
		cfg.FileReader = capture.ReaderLibpcap
	default:
		return cfg, fmt.Errorf("--reader %q: want pcapgo or libpcap", o.reader)
	}
	cfg.Format, cfg.OutDir, cfg.HARDir, cfg.ClassesFile = format, o.out, o.har, o.classes
	cfg.StoreURL, cfg.StoreOptions = o.storeURL, o.storeOptions()
	if cfg.Tracker.KeyLog, err = o.openKeyLog(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func runAnalyze(ctx context.Context, stdout io.Writer, files []string, o analyzeOptions) error {
	cfg, err := o.config()
	if err != nil {
		return err
	}
	cfg.Files = files
	return runPipeline(ctx, stdout, cfg, o.progress)
}

// runPipeline runs the pipeline to the end of its input and prints the
// store's counters and the summary; offline and live capture share it.
func runPipeline(ctx context.Context, stdout io.Writer, cfg pipeline.Config, progress bool) error {
	if cfg.MaxMemory > 0 {
		// The stages count their live state; the collector would let the
		// heap grow to twice that before collecting (GOGC). The soft limit
		// makes it collect before the process passes the budget plus room
		// for the runtime.
		debug.SetMemoryLimit(cfg.MaxMemory + runtimeMemory)
	}
	var bar *progressbar.ProgressBar
	if progress {
		cfg.Progress = func(done, total int64) {
			if bar == nil {
				bar = progressbar.DefaultBytes(total, "analyzing")
			}
			_ = bar.Set64(done)
		}
	}
	p, err := pipeline.New(cfg)
	if err != nil {
		return err
	}
	if err := p.Start(ctx); err != nil {
		return err
	}
	err = p.Wait()
	if bar != nil {
		_ = bar.Finish()
		fmt.Fprintln(os.Stderr)
	}
	if ws, ok := p.StoreStats(); ok {
		fmt.Fprintf(stdout, "store: %d records written, %d duplicates skipped, %d queued, %d retries\n",
			ws.Written, ws.Duplicates, ws.Queued, ws.Retries)
	}
	var readErr *pipeline.ReadError
	if err != nil && !errors.As(err, &readErr) {
		return err
	}
	if err := p.WriteSummary(stdout); err != nil {
		return err
	}
	if readErr != nil {
		slog.Error("input ended early; records up to that point were written", "err", readErr.Err)
		return exitError(2)
	}
	return nil
}
