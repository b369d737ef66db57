package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/export"
	"github.com/rtmon/rtmon/internal/cryptopan"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/web"
)

// Config says where packets come from, how they are reconstructed and
// grouped, and where the records go. It holds values, plus the few live
// objects a caller shares with the pipeline (an open Store, extra Sinks, a
// Feed); DefaultConfig fills in the defaults.
type Config struct {
	// Files are capture files (pcap or pcapng, optionally gzip'd), merged
	// in timestamp order, read with FileReader.
	Files      []string
	FileReader capture.FileReader
	// Interfaces are captured live instead (merged into one stream) with
	// Capture's options: AF_PACKET on Linux, with as many fanout sockets
	// per interface as workers unless Capture.Fanout says otherwise, else
	// libpcap. Records overlapping a period of kernel drops are flagged
	// capture_drops. Live input ends only when the
	// pipeline is stopped or its context ends, and that is no error.
	Interfaces []string
	Capture    capture.LiveOptions

	Tracker reconstruct.Config
	Grouper pageview.Config
	// Workers is how many goroutines reconstruct and group (0: one per
	// core the process may use). Packets are dealt to them by client
	// address, so a client's connections and pageviews stay together; the
	// records are the same, in the same order, for any number of workers
	// (until a memory bound is reached: each worker has its share).
	Workers int
	// ClassesFile is a client classes file (YAML, see
	// pageview.LoadClasses); empty puts every client in the default class.
	ClassesFile string
	// ClientKeyFile, if set, anonymizes client addresses with this key
	// (Crypto-PAn: prefix-preserving, the same mapping wherever the same
	// key is used; 32 bytes, or 64 hex digits): classes are assigned from
	// the real addresses first, and every record leaves the pipeline with
	// the image. Connection ids are keyed from it too (see
	// reconstruct.Config.IDKey). Server addresses are kept.
	ClientKeyFile string
	// MaxMemory bounds the state the stages hold (0: each stage's own
	// bounds only): 60% for the tracker's connections and buffers (counted,
	// the least recently active connections shed first, flagged evicted),
	// 10% for transactions the pageview stage holds, 30% for records the
	// store writer holds in memory before it spills. Bounds set explicitly
	// in Tracker, Grouper or StoreOptions stay. rtmon's --max-memory
	// defaults to DefaultMaxMemory.
	MaxMemory int64

	// OutDir, if set, receives connections, transactions and pageviews
	// record files in Format.
	OutDir string
	Format export.Format
	// HARDir, if set, receives one HAR file per pageview.
	HARDir string

	// StoreURL, if set, is a store (see store.Open) the pipeline opens with
	// StoreOptions, fills, flushes and closes.
	StoreURL     string
	StoreOptions store.Options
	// Store, if set instead, is an open store that receives every record;
	// the pipeline flushes it at the end but leaves it open for its owner
	// (rtmon live and demo serve the UI from it).
	Store Store

	// Sinks receive every record and pageview too, after the Grouper.
	Sinks []pageview.Sink
	// Feed, if set, gets live counters and points for the web UI's live
	// page, within 2 s of the traffic.
	Feed *web.LiveFeed
	// Progress, if set, is called from the packet loop now and then with
	// the input bytes read so far and their total (0 for live capture).
	Progress func(done, total int64)
}

// Store is what the pipeline needs of a store: it takes every record, and
// is flushed and asked for its counters at the end.
type Store interface {
	pageview.Sink
	Flush(ctx context.Context) error
	Stats() store.WriterStats
}

// DefaultConfig is rtmon analyze's configuration without its inputs and
// outputs: set Files or Interfaces, and where the records should go.
func DefaultConfig() Config {
	return Config{
		FileReader: capture.ReaderPcapgo,
		Capture:    capture.LiveOptions{Filter: "tcp", ImmediateMode: true},
		Tracker:    reconstruct.Config{MaxConnections: reconstruct.DefaultMaxConnections, IdleTimeout: reconstruct.DefaultIdleTimeout},
		Format:     export.JSONL,
	}
}

// workers is Workers with its default, at most one per client shard.
func (c *Config) workers() int {
	n := c.Workers
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	return min(n, clientShards)
}

// live reports whether the input is live capture.
func (c *Config) live() bool { return len(c.Interfaces) > 0 }

func (c *Config) check() error {
	switch {
	case len(c.Files) == 0 && len(c.Interfaces) == 0:
		return errors.New("pipeline: no input: set Files or Interfaces")
	case len(c.Files) > 0 && len(c.Interfaces) > 0:
		return errors.New("pipeline: both Files and Interfaces set: one input at a time")
	case c.StoreURL != "" && c.Store != nil:
		return errors.New("pipeline: both StoreURL and Store set")
	}
	if c.OutDir != "" {
		if c.Format == "" {
			c.Format = export.JSONL
		}
		f, err := export.ParseFormat(string(c.Format))
		if err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
		c.Format = f
	}
	return nil
}

// Pipeline moves packets from a source through reconstruction and
// pageview grouping into the record outputs and the run's summaries. New
// only checks the Config; Start opens everything and runs the packet loop
// on its own goroutine; Wait (or Stop) collects the outcome.
type Pipeline struct {
	cfg     Config
	classes *pageview.Classes
	clients *cryptopan.Anonymizer // from ClientKeyFile; nil keeps addresses

	summary      *export.Summary
	classSummary *pageview.ClassSummary

	started bool
	cancel  context.CancelFunc
	done    chan struct{}
	err     error              // set before done closes
	stored  *store.WriterStats // the store's counters after its final flush

	snap  snapshot
	drops *dropPeriods // live capture only
}

// ReadError is Wait's error when the input ended early: a truncated or
// unreadable file, or a read interrupted by Stop or the context. Every
// record read before it went to the outputs, which were closed normally,
// and the summary lists it.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return "pipeline: input ended early: " + e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// New checks cfg and reads its classes file; it opens nothing else.
func New(cfg Config) (*Pipeline, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cfg.applyMemoryBudget()
	classes := pageview.DefaultClasses()
	if cfg.ClassesFile != "" {
		var err error
		if classes, err = pageview.LoadClasses(cfg.ClassesFile); err != nil {
			return nil, err
		}
	}
	var clients *cryptopan.Anonymizer
	if cfg.ClientKeyFile != "" {
		var err error
		if clients, cfg.Tracker.IDKey, err = clientAnonymizer(cfg.ClientKeyFile); err != nil {
			return nil, fmt.Errorf("pipeline: %w", err)
		}
	}
	return &Pipeline{cfg: cfg, classes: classes, clients: clients, summary: export.NewSummary(),
		classSummary: pageview.NewClassSummary(), done: make(chan struct{})}, nil
}

// Start opens the source and the outputs and starts the packet loop; it
// returns once everything is open. The loop ends at the end of the input,
// or when ctx ends or Stop is called.
func (p *Pipeline) Start(ctx context.Context) error {
	if p.started {
		return errors.New("pipeline: started twice")
	}
	ctx, cancel := context.WithCancel(ctx)
	src, err := p.openSource(ctx)
	if err != nil {
		cancel()
		return err
	}
	outs, err := openOutputs(ctx, &p.cfg)
	if err != nil {
		src.Close()
		cancel()
		return err
	}
	p.started, p.cancel = true, cancel
	p.snap.setStore(outs.store)
	go p.run(ctx, src, outs)
	return nil
}

func (p *Pipeline) openSource(ctx context.Context) (capture.Source, error) {
	if p.cfg.live() {
		opts := p.cfg.Capture
		if opts.Fanout == 0 {
			opts.Fanout = p.cfg.workers() // a ring and a reading goroutine per worker
		}
		return capture.OpenLive(ctx, p.cfg.Interfaces, opts)
	}
	return capture.OpenFiles(p.cfg.Files, capture.FileOptions{Reader: p.cfg.FileReader})
}

// Wait waits for the loop to end and the outputs to be closed. Its error
// is a *ReadError when only the input failed, else the first output
// failure.
func (p *Pipeline) Wait() error {
	if !p.started {
		return errors.New("pipeline: Wait before Start")
	}
	<-p.done
	return p.err
}

// Done is closed when the loop has ended and the outputs are closed.
func (p *Pipeline) Done() <-chan struct{} { return p.done }

// Stop ends the input as Ctrl-C does (live capture ends normally, a file
// read is interrupted), then waits as Wait does.
func (p *Pipeline) Stop() error {
	if !p.started {
		return errors.New("pipeline: Stop before Start")
	}
	p.cancel()
	return p.Wait()
}

// Summary is the run's summary: counts, component percentiles, input
// counters and errors. Read it after Done.
func (p *Pipeline) Summary() *export.Summary { return p.summary }

// ClassSummary is the per-class table of the run. Read it after Done.
func (p *Pipeline) ClassSummary() *pageview.ClassSummary { return p.classSummary }

// StoreStats are the store's counters after its final flush; ok is false
// without a store, or when the run failed before the flush.
func (p *Pipeline) StoreStats() (ws store.WriterStats, ok bool) {
	if p.stored == nil {
		return store.WriterStats{}, false
	}
	return *p.stored, true
}

// WriteSummary writes the summary and the class table as rtmon analyze
// prints them. Call it after Done.
func (p *Pipeline) WriteSummary(w io.Writer) error {
	p.summary.WriteText(w)
	fmt.Fprintln(w)
	if err := p.classSummary.WriteText(w); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}

// Stats are the pipeline's health counters as the live page shows them;
// safe to call at any time from any goroutine. They follow the packet loop
// closely while a Feed is set.
func (p *Pipeline) Stats() web.PipelineStats { return p.snap.get() }

// run is the packet loop's goroutine: pump, drain the Grouper, close the
// outputs, and say how it went.
func (p *Pipeline) run(ctx context.Context, src capture.Source, outs *outputs) {
	defer close(p.done)
	defer p.cancel()
	defer src.Close()
	outputs := pageview.Tee{pageview.Records(p.summary), p.classSummary, outs.sink}
	var grouperOut pageview.Sink = outputs
	if p.cfg.Feed != nil {
		grouperOut = p.cfg.Feed.Observe(outputs)
	}
	if p.clients != nil {
		// Right after the Grouper, which assigned the classes from the
		// real addresses: nothing past it sees them.
		grouperOut = newAnonymizer(p.clients, grouperOut)
	}
	if p.cfg.live() {
		p.drops = &dropPeriods{}
		grouperOut = &dropFlagger{d: p.drops, next: grouperOut}
	}
	// The Grouper matches the HTML's references with the records' URLs
	// only through the tracker's own redaction.
	gcfg := p.cfg.Grouper
	gcfg.Redaction = p.cfg.Tracker.Redaction
	if p.cfg.Feed != nil {
		go p.cfg.Feed.Run(ctx, 0, p.snap.get)
	}
	sh := newShards(p.cfg.workers(), func(i, n int) *worker {
		return newWorker(i, n, p.cfg.Tracker, gcfg, p.classes, p.cfg.Feed)
	}, grouperOut)
	readErr := p.pump(ctx, src, sh)
	if p.cfg.live() && ctx.Err() != nil {
		readErr = nil // stopping is how live input ends
	}
	if err := outs.finish(&p.stored); err != nil {
		p.err = err
		return
	}
	if readErr != nil {
		p.summary.Errors = append(p.summary.Errors, readErr.Error())
		p.err = &ReadError{Err: readErr}
	}
}
