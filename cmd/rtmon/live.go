package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/pipeline"
	"github.com/rtmon/rtmon/web"
)

type liveOptions struct {
	analyzeOptions
	ifaces   []string
	filter   string
	snaplen  int
	bufSize  int
	promisc  bool
	reader   string
	fanout   int
	blockTO  time.Duration
	duration time.Duration
	ui       uiOptions  // the UI served beside the capture (uiflags.go)
	rlm      rlmOptions // RLM rules watched on the live traffic (rlm_live.go)
}

// liveKeyLogFollow is how often rtmon live reads what was appended to the
// key log, and liveKeyLogWait how long a connection whose key line is not
// read yet holds its records for it (reconstruct.Config.KeyLogWait).
const (
	liveKeyLogFollow = 100 * time.Millisecond
	liveKeyLogWait   = 2 * time.Second
)

func newLiveCommand() *cobra.Command {
	var o liveOptions
	cmd := &cobra.Command{
		Use:   "live -i IFACE [-i IFACE...]",
		Short: "Capture live from interfaces and reconstruct transactions until stopped",
		Long: `live captures with libpcap from one or more interfaces (merged into one
stream), reconstructs connections and transactions as analyze does, and on
Ctrl-C (or after --duration) prints the summary, including libpcap's and the
kernel's drop counters. Records go to --store (default: an in-memory embedded
store) and the web UI is served from the same process, with live charts
(--no-ui to turn it off).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLive(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&o.ifaces, "interface", "i", nil, "interface to capture on (repeatable; 'any' for all)")
	f.StringVar(&o.filter, "filter", "tcp", "BPF filter")
	f.IntVar(&o.snaplen, "snaplen", 0, "bytes kept per packet (0: whole packets)")
	f.IntVar(&o.bufSize, "buffer-size", 0, "kernel capture buffer in bytes, per socket (0: 32 MiB)")
	f.BoolVar(&o.promisc, "promisc", false, "promiscuous mode")
	f.StringVar(&o.reader, "reader", "auto", "capture mechanism: afpacket (Linux TPACKET_V3 rings, fanout), libpcap, or auto (afpacket where the interface allows, else libpcap)")
	f.IntVar(&o.fanout, "fanout", 0, "AF_PACKET sockets per interface in a fanout group, each with its own ring of --buffer-size (0: one per worker)")
	f.DurationVar(&o.blockTO, "block-timeout", 0, "AF_PACKET ring block timeout: how long a part-full block waits before it is handed over (0: 1ms)")
	f.DurationVar(&o.duration, "duration", 0, "stop after this long (0: until interrupted)")
	f.StringVar(&o.format, "format", "jsonl", "record format: jsonl or csv")
	f.StringVar(&o.out, "out", "", "directory for connections.*, transactions.* and pageviews.* (none: summary only)")
	f.StringVar(&o.classes, "classes", "", "client classes file (YAML)")
	addStoreFlags(f, &o.analyzeOptions)
	addUIFlags(f, &o.ui)
	f.UintSliceVar(&o.serverPorts, "server-port", nil, "server port(s), to orient connections whose handshake was not captured")
	f.StringSliceVar(&o.serverNets, "server-net", nil, "server address prefix(es)")
	f.IntVar(&o.maxConns, "max-connections", 1<<20, "connection table bound")
	f.DurationVar(&o.idle, "idle-timeout", defaultIdle, "end connections idle this long")
	addPrivacyFlags(f, &o.analyzeOptions)
	addMemoryFlag(f, &o.analyzeOptions)
	addKeyLogFlag(f, &o.analyzeOptions)
	addRLMFlags(f, &o.rlm)
	_ = cmd.MarkFlagRequired("interface")
	return cmd
}

// config adds the capture flags to analyze's.
func (o liveOptions) config() (pipeline.Config, error) {
	cfg, err := o.analyzeOptions.config()
	if err != nil {
		return cfg, err
	}
	cfg.Interfaces = o.ifaces
	reader := o.reader
	switch reader {
	case "auto", "":
		reader = ""
	case capture.LiveAFPacket, capture.LiveLibpcap:
	default:
		return cfg, fmt.Errorf("--reader %q: want afpacket, libpcap or auto", o.reader)
	}
	if o.fanout < 0 {
		return cfg, fmt.Errorf("--fanout %d: want 0 (one per worker) or more", o.fanout)
	}
	cfg.Capture = capture.LiveOptions{Filter: o.filter, SnapLen: o.snaplen, BufferSize: o.bufSize, Promiscuous: o.promisc, ImmediateMode: true,
		Reader: reader, Fanout: o.fanout, BlockTimeout: o.blockTO}
	return cfg, nil
}

func runLive(ctx context.Context, stdout io.Writer, o liveOptions) error {
	cfg, err := o.config()
	if err != nil {
		return err
	}
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	if kl := cfg.Tracker.KeyLog; kl != nil {
		// Key lines are written as the handshakes happen: read them often,
		// and let a connection whose line is not read yet hold its records
		// a while.
		cfg.Tracker.KeyLogWait = liveKeyLogWait
		stop := followKeyLog(ctx, kl, liveKeyLogFollow)
		defer stop()
	}
	if o.ui.disabled {
		stopRLM, err := o.rlm.watch(ctx, &cfg, nil, o.classes) // no store to annotate: flips are logged
		if err != nil {
			return err
		}
		defer stopRLM()
		return runPipeline(ctx, stdout, cfg, false)
	}
	// The UI reads the store the pipeline writes, so this command owns it.
	if o.storeURL == "" {
		o.storeURL = "memory:"
	}
	st, err := openStore(ctx, o.analyzeOptions)
	if err != nil {
		return err
	}
	defer st.Close()
	cfg.StoreURL, cfg.Store, cfg.Feed = "", st, web.NewLiveFeed()
	stopRLM, err := o.rlm.watch(ctx, &cfg, st, o.classes) // before the UI: its gauges join /metrics
	if err != nil {
		return err
	}
	defer stopRLM()
	o.ui.classes = o.classes // its objectives go to /metrics
	srv, err := o.ui.server(st, cfg.Feed)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rtmon UI on %s (live; Ctrl-C to stop)\n", srv.URL())
	stopDrops := annotateDrops(ctx, cfg.Feed, st, time.Second) // marks drop episodes on the charts
	defer stopDrops()
	served := make(chan error, 1)
	go func() { served <- srv.Run(ctx) }()
	err = runPipeline(ctx, stdout, cfg, false)
	if serr := <-served; err == nil && serr != nil {
		err = fmt.Errorf("web UI: %w", serr)
	}
	return err
}
