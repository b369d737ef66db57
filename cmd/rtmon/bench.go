package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/rtmon/rtmon/bench"
	"github.com/rtmon/rtmon/synth"
)

type benchOptions struct {
	size       string
	dir        string
	keep       bool
	clients    int
	seed       int64
	synLoss    float64
	synackLoss float64
	dataLoss   float64
	tsharkSize string
	cpus       int
	workers    int
	tools      []string
	connMem    int
	runs       int
	https      bool
	live       bool
	rates      []int
	openConns  int
	genOpen    bool // internal: write the open-connections capture
	genOnly    bool // internal: generate in a child so the parent stays small
	measure    bool // internal: run the args as a child and report its rusage on fd 3
}

func newBenchCommand() *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark rtmon analyze against tshark and friends on one synthetic capture",
		Long: `bench generates a synthetic capture (many clients, keep-alive connections, SYN
and data loss), or reuses one in --dir made with the same parameters, and in one
run times rtmon analyze, tshark's HTTP response-time fields and other tools on
the same file, each as a child pinned to --cpus cores (rtmon with as many
workers), and rtmon with --workers N on N cores. It prints packets/s,
MB/s and max RSS per tool and how many times longer each tool took than rtmon
on the same input. tshark needs far more time and memory than rtmon: with
--tshark-size it reads the first packets of the capture instead, and rtmon is
timed on that prefix too so the ratio compares equal input.

Finally it measures the heap rtmon's connection table holds per open
connection, with --conn-mem connections open at once.

With --https the capture is HTTPS instead (real TLS 1.3 and 1.2 sessions,
HTTP/1.1 inside; default size ` + defaultHTTPSSize + `), with its NSS key log next to it:
rtmon is timed keyless and decrypting (--keylog), tshark decrypting with the
same key log, each on the same file.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.measure {
				return bench.RunMeasured(args, os.NewFile(3, "rusage report"))
			}
			if len(args) > 0 {
				return fmt.Errorf("bench takes no arguments, got %q", args)
			}
			if o.https && !cmd.Flags().Changed("size") {
				o.size = defaultHTTPSSize
			}
			if o.live && !cmd.Flags().Changed("size") {
				o.size = defaultLiveSize
			}
			if o.genOpen {
				return bench.WriteOpenConnections(openConnsPath(o), o.openConns, bench.MidResponse)
			}
			if o.genOnly && o.https {
				return benchGenerateHTTPS(o)
			}
			if o.genOnly {
				return benchGenerate(o)
			}
			if o.live {
				return runBenchLive(cmd.Context(), cmd.OutOrStdout(), o)
			}
			return runBench(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.size, "size", "1GB", "capture size, e.g. 1GB, 200MB (default with --https: "+defaultHTTPSSize+")")
	f.StringVar(&o.dir, "dir", filepath.Join(os.TempDir(), "rtmon-bench"), "directory for the capture (reused across runs with --keep)")
	f.BoolVar(&o.keep, "keep", false, "keep the capture for the next run instead of deleting it")
	f.IntVar(&o.clients, "clients", 5000, "distinct client addresses")
	f.Int64Var(&o.seed, "seed", 1, "workload random seed")
	f.Float64Var(&o.synLoss, "syn-loss", 0.01, "fraction of SYNs dropped")
	f.Float64Var(&o.synackLoss, "synack-loss", 0.005, "fraction of SYN/ACKs lost")
	f.Float64Var(&o.dataLoss, "data-loss", 0.005, "fraction of response segments lost")
	f.StringVar(&o.tsharkSize, "tshark-size", "", "run tshark on a prefix of about this size (default: the whole capture)")
	f.IntVar(&o.cpus, "cpus", 1, "pin each tool to CPUs 0..N-1 with taskset, and GOMAXPROCS=N for rtmon (0: no pinning)")
	f.IntVar(&o.workers, "workers", min(2, runtime.NumCPU()), "also time rtmon with this many workers on this many cores (GOMAXPROCS too) on the full capture, for the speed-up over rtmon on --cpus (0 or 1: skip)")
	f.StringSliceVar(&o.tools, "tools", []string{"tshark", "tcpdump", "tcptrace"}, "comparators to run when installed: tshark, tcpdump, tcptrace")
	f.IntVar(&o.runs, "runs", 3, "runs per tool and input; the fastest is reported (others' load only ever slows a run)")
	f.IntVar(&o.connMem, "conn-mem", 100_000, "open connections for the memory-per-connection measurement (0: skip)")
	f.BoolVar(&o.https, "https", false, "benchmark on a generated HTTPS capture and its key log: rtmon keyless and decrypted, tshark decrypting (--clients and the loss rates do not apply)")
	f.BoolVar(&o.live, "live", false, "benchmark live capture instead (root): replay the capture with tcpreplay into a veth pair in a netns at rising rates and top speed, rtmon live on the other end with AF_PACKET and with libpcap; report kernel drops (default size "+defaultLiveSize+"; --workers sets rtmon's)")
	f.IntSliceVar(&o.rates, "rates", nil, "with --live: replay rates in packets/s, 0 for top speed (default 25000,50000,100000,200000,400000,0; after the first rate with drops, top speed only)")
	f.IntVar(&o.openConns, "open-conns", 0, "also time rtmon analyze (1 worker, no --max-memory, GOMEMLIMIT 1 KiB a connection) on a generated capture of this many connections open at once, each mid-response at its end, and report its max RSS, e.g. 2900000 (0: skip)")
	f.BoolVar(&o.genOpen, "generate-open", false, "internal: only write the open-connections capture")
	_ = f.MarkHidden("generate-open")
	f.BoolVar(&o.genOnly, "generate-only", false, "internal: only generate the capture")
	_ = f.MarkHidden("generate-only")
	f.BoolVar(&o.measure, "measure", false, "internal: run the command after -- and report its rusage on fd 3")
	_ = f.MarkHidden("measure")
	return cmd
}

func (o benchOptions) params() (bench.Params, error) {
	size, err := parseSize(o.size)
	if err != nil {
		return bench.Params{}, fmt.Errorf("--size: %w", err)
	}
	if size <= 0 {
		return bench.Params{}, errors.New("--size: want a positive size")
	}
	if o.https {
		return bench.Params{Version: bench.ParamsVersion, TargetBytes: size, Seed: o.seed, PcapNanosecs: true,
			HTTPS: true, Sessions: bench.DefaultHTTPSSessions}, nil
	}
	return bench.Params{Version: bench.ParamsVersion, TargetBytes: size, Clients: o.clients, Seed: o.seed,
		SYNLoss: o.synLoss, SYNACKLoss: o.synackLoss, DataLoss: o.dataLoss, PcapNanosecs: true}, nil
}

func (o benchOptions) capturePath(p bench.Params) string {
	if p.HTTPS {
		return filepath.Join(o.dir, fmt.Sprintf("bench-https-%s-n%d-s%d.pcap", o.size, p.Sessions, p.Seed))
	}
	return filepath.Join(o.dir, fmt.Sprintf("bench-%s-c%d-s%d.pcap", o.size, p.Clients, p.Seed))
}

// benchGenerate writes the capture and then its sidecar; it runs in a child
// process because a child's ru_maxrss starts at the parent's peak RSS.
func benchGenerate(o benchOptions) error {
	p, err := o.params()
	if err != nil {
		return err
	}
	path := o.capturePath(p)
	tmp := path + ".partial"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer os.Remove(tmp) // no-op after the rename
	var out io.Writer = f
	var bar *progressbar.ProgressBar
	if term.IsTerminal(int(os.Stderr.Fd())) {
		bar = progressbar.DefaultBytes(p.TargetBytes, "generating")
		out = io.MultiWriter(f, bar)
	}
	w, err := synth.NewWriter(out, p.Options())
	if err != nil {
		f.Close()
		return err
	}
	sum, err := synth.Generate(w, p.Workload(), nil)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing %s: %w", tmp, cerr)
	}
	if bar != nil {
		_ = bar.Finish()
		fmt.Fprintln(os.Stderr)
	}
	if err != nil {
		return fmt.Errorf("generating %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	fmt.Fprintf(os.Stderr, "generated %s: %d packets, %.1f MB, %d pageviews, %d transactions, %d connections, %d SYN retransmissions, %d data retransmissions in %s\n",
		path, sum.Packets, float64(sum.Bytes)/1e6, sum.Pageviews, sum.Transactions, sum.Connections, sum.SYNRetrans, sum.DataRetrans, sum.Elapsed.Round(time.Millisecond))
	return bench.WriteSidecar(path, bench.Sidecar{Params: p, Packets: sum.Packets, Bytes: sum.Bytes})
}

// benchInput is a file the tools read, with a label for the table.
type benchInput struct {
	label string
	path  string
	info  bench.FileInfo
}

var txRe = regexp.MustCompile(`transactions (\d+)`)

// rtmonNote is the table's note for an rtmon analyze run: how many
// transactions it reported.
func rtmonNote(m bench.Measurement) string {
	if s := txRe.FindSubmatch(m.Stdout); s != nil {
		return string(s[1]) + " transactions"
	}
	return ""
}

func runBench(ctx context.Context, stdout io.Writer, o benchOptions) error {
	tsharkSize, err := parseSize(o.tsharkSize)
	if err != nil {
		return fmt.Errorf("--tshark-size: %w", err)
	}
	self, path, side, cleanup, err := benchSelfAndCapture(ctx, stdout, o)
	if err != nil {
		return err
	}
	defer cleanup()
	full := &benchInput{label: "full " + o.size, path: path}
	inputs := []*benchInput{full}
	tsharkIn := full
	if tsharkSize > 0 && tsharkSize < side.Bytes {
		prefix := &benchInput{label: "prefix " + o.tsharkSize, path: strings.TrimSuffix(path, ".pcap") + "-prefix-" + o.tsharkSize + ".pcap"}
		if prefix.info, err = bench.CutPrefixFile(prefix.path, path, tsharkSize); err != nil {
			return err
		}
		defer os.Remove(prefix.path)
		inputs = append(inputs, prefix)
		tsharkIn = prefix
	}
	// Reading each input once puts it in the page cache, so no tool pays for
	// the disk and the order of runs does not matter; it also counts packets.
	for _, in := range inputs {
		if in.info, err = bench.ScanFile(in.path); err != nil {
			return err
		}
	}
	r, err := newBenchRunner(ctx, stdout, o, self)
	if err != nil {
		return err
	}
	run, report := r.runTools, r.report
	if o.https {
		run, report = r.runHTTPSTools, r.reportHTTPS
	}
	if err := run(inputs, full, tsharkIn); err != nil {
		return err
	}
	if err := report(); err != nil {
		return err
	}
	if err := r.openConnsRSS(); err != nil {
		return err
	}
	return benchConnMem(stdout, o)
}

// benchSelfAndCapture finds the rtmon binary the bench runs and the
// capture it reads (see benchCapture); cleanup removes the capture, its
// sidecar and key log unless --keep.
func benchSelfAndCapture(ctx context.Context, stdout io.Writer, o benchOptions) (self, path string, side bench.Sidecar, cleanup func(), err error) {
	cleanup = func() {}
	if self, err = os.Executable(); err != nil {
		return "", "", side, cleanup, fmt.Errorf("bench: finding the rtmon binary: %w", err)
	}
	if path, side, err = benchCapture(ctx, stdout, o, self); err != nil {
		return "", "", side, cleanup, err
	}
	if !o.keep {
		cleanup = func() {
			os.Remove(path)
			os.Remove(bench.SidecarPath(path))
			os.Remove(bench.KeyLogPath(path)) // HTTPS only; absent otherwise
		}
	}
	return self, path, side, cleanup, nil
}

// benchCapture reuses the capture in --dir made with the same parameters,
// or generates it in a child process.
func benchCapture(ctx context.Context, stdout io.Writer, o benchOptions, self string) (string, bench.Sidecar, error) {
	p, err := o.params()
	if err != nil {
		return "", bench.Sidecar{}, err
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return "", bench.Sidecar{}, fmt.Errorf("bench: %w", err)
	}
	path := o.capturePath(p)
	side, ok, err := bench.Reusable(path, p)
	if err != nil {
		return "", bench.Sidecar{}, err
	}
	if _, kerr := os.Stat(bench.KeyLogPath(path)); p.HTTPS && kerr != nil {
		ok = false // the capture is no use without its key log
	}
	if ok {
		fmt.Fprintf(stdout, "reusing %s (%d packets, %.1f MB)\n", path, side.Packets, float64(side.Bytes)/1e6)
		return path, side, nil
	}
	gen := exec.CommandContext(ctx, self, "bench", "--generate-only", "--size", o.size, "--dir", o.dir,
		"--clients", strconv.Itoa(o.clients), "--seed", strconv.FormatInt(o.seed, 10),
		"--syn-loss", fmt.Sprint(o.synLoss), "--synack-loss", fmt.Sprint(o.synackLoss), "--data-loss", fmt.Sprint(o.dataLoss),
		"--https="+strconv.FormatBool(o.https))
	gen.Stdout, gen.Stderr = os.Stderr, os.Stderr
	if err := gen.Run(); err != nil {
		return "", bench.Sidecar{}, fmt.Errorf("bench: generating the capture: %w", err)
	}
	if side, ok, err = bench.Reusable(path, p); err != nil || !ok {
		return "", bench.Sidecar{}, fmt.Errorf("bench: generated capture %s has no matching sidecar (err %v)", path, err)
	}
	return path, side, nil
}

// benchRunner times each tool as a pinned child under the same rusage
// wrapper and collects the table's rows.
type benchRunner struct {
	ctx      context.Context
	stdout   io.Writer
	o        benchOptions
	self     string
	pin      string
	env      []string
	timeBin  string
	floorKiB int64
	rows     []bench.Row
	notes    []string
}

func newBenchRunner(ctx context.Context, stdout io.Writer, o benchOptions, self string) (*benchRunner, error) {
	r := &benchRunner{ctx: ctx, stdout: stdout, o: o, self: self}
	if o.cpus > 0 {
		if _, err := exec.LookPath("taskset"); err != nil {
			return nil, errors.New("bench: --cpus needs taskset (Debian package util-linux); use --cpus 0 to run unpinned")
		}
		r.pin = "0"
		if o.cpus > 1 {
			r.pin = fmt.Sprintf("0-%d", o.cpus-1)
		}
		r.env = []string{"GOMAXPROCS=" + strconv.Itoa(o.cpus)}
	}
	fmt.Fprintf(stdout, "pinning: %s; each figure is the fastest of %d runs (max RSS: the largest)\n", pinDesc(r.pin), max(o.runs, 1))
	// "true" under the wrapper gives the floor of the max RSS readings.
	r.timeBin, _ = exec.LookPath("/usr/bin/time")
	floor, err := bench.Run(ctx, r.wrap(bench.Command{Argv: []string{"true"}}))
	if err != nil {
		return nil, fmt.Errorf("bench: measuring the RSS floor: %w", err)
	}
	r.floorKiB = max(floor.MaxRSSKiB, floor.FloorKiB)
	return r, nil
}

func (r *benchRunner) wrap(c bench.Command) bench.Command {
	c.GNUTime, c.Via = r.timeBin, []string{r.self, "bench", "--measure"}
	return c
}

// run times one tool on one input: the fastest of --runs, with the largest
// max RSS.
func (r *benchRunner) run(tool string, in *benchInput, argv []string, note func(bench.Measurement) string) error {
	return r.runPinned(tool, in, argv, note, r.pin, r.env)
}

// runPinned is run on the cores pin names, with env.
func (r *benchRunner) runPinned(tool string, in *benchInput, argv []string, note func(bench.Measurement) string, pin string, env []string) error {
	var m bench.Measurement
	runs := max(r.o.runs, 1)
	for i := range runs {
		fmt.Fprintf(os.Stderr, "running %s on %s (%d/%d)...\n", tool, in.label, i+1, runs)
		mi, err := bench.Run(r.ctx, r.wrap(bench.Command{Argv: argv, Env: env, Pin: pin, KeepStdout: strings.HasPrefix(tool, "rtmon")}))
		if err != nil {
			return fmt.Errorf("bench: %s on %s: %w", tool, in.label, err)
		}
		if i == 0 || mi.Wall < m.Wall {
			rss := max(m.MaxRSSKiB, mi.MaxRSSKiB)
			m = mi
			m.MaxRSSKiB = rss
		} else {
			m.MaxRSSKiB = max(m.MaxRSSKiB, mi.MaxRSSKiB)
		}
	}
	row := bench.Row{Tool: tool, Input: in.label, Packets: in.info.Packets, Bytes: in.info.Bytes, Wall: m.Wall, MaxRSSKiB: m.MaxRSSKiB}
	if note != nil {
		row.Note = note(m)
	}
	r.rows = append(r.rows, row)
	return nil
}

func (r *benchRunner) runTools(inputs []*benchInput, full, tsharkIn *benchInput) error {
	for _, in := range inputs {
		// As many workers as cores, 1 by default: the baseline of the
		// workers row.
		if err := r.run("rtmon", in, []string{r.self, "analyze", "--progress=false", "--workers", strconv.Itoa(max(r.o.cpus, 1)), in.path}, rtmonNote); err != nil {
			return err
		}
	}
	if err := r.runWorkers(full); err != nil {
		return err
	}
	for _, tool := range r.o.tools {
		if _, err := exec.LookPath(tool); err != nil {
			r.notes = append(r.notes, fmt.Sprintf("%s not installed: skipped", tool))
			continue
		}
		var err error
		switch tool {
		case "tshark":
			err = r.run("tshark", tsharkIn, []string{"tshark", "-r", tsharkIn.path, "-n", "-Y", "http.response", "-T", "fields",
				"-e", "frame.time_epoch", "-e", "http.time", "-e", "http.response_for.uri"},
				func(m bench.Measurement) string { return fmt.Sprintf("%d http.response lines", m.Lines) })
		case "tcpdump":
			// Reading and rewriting every packet: the floor of libpcap I/O.
			err = r.run("tcpdump", full, []string{"tcpdump", "-r", full.path, "-w", "/dev/null"},
				func(bench.Measurement) string { return "read+write, no analysis" })
		case "tcptrace":
			// Per-connection TCP statistics (RTT, retransmissions), no HTTP.
			err = r.run("tcptrace", full, []string{"tcptrace", "-n", "-l", full.path},
				func(m bench.Measurement) string { return "TCP-level only (-n -l)" })
		default:
			r.notes = append(r.notes, fmt.Sprintf("unknown tool %q: skipped", tool))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// runWorkers times rtmon with --workers N on N cores, beside the rtmon
// row on --cpus cores: the sharded pipeline's speed-up.
func (r *benchRunner) runWorkers(full *benchInput) error {
	n := r.o.workers
	if n <= 1 || n == r.o.cpus {
		return nil
	}
	if n > runtime.NumCPU() {
		r.notes = append(r.notes, fmt.Sprintf("--workers %d: this machine has %d CPUs; skipped", n, runtime.NumCPU()))
		return nil
	}
	pin := ""
	if r.pin != "" {
		pin = fmt.Sprintf("0-%d", n-1)
	}
	return r.runPinned(workersTool(n), full, []string{r.self, "analyze", "--progress=false", "--workers", strconv.Itoa(n), full.path}, rtmonNote,
		pin, []string{"GOMAXPROCS=" + strconv.Itoa(n)})
}

func workersTool(n int) string { return fmt.Sprintf("rtmon %dw", n) }

func (r *benchRunner) report() error {
	bench.FillRatios(r.rows, "rtmon")
	return r.writeReport("rtmon's", summarize)
}

// writeReport prints the table, what its columns mean (base names the
// row the ratios divide by) and the summary.
func (r *benchRunner) writeReport(base string, summarize func(io.Writer, []bench.Row)) error {
	fmt.Fprintln(r.stdout)
	if err := bench.WriteTable(r.stdout, r.rows); err != nil {
		return err
	}
	fmt.Fprintf(r.stdout, "\ntool/rtmon time: the tool's wall time over %s on the same input (input column).\n"+
		"max RSS: the tool's ru_maxrss; Linux starts it at the peak RSS of the process that started it,\n"+
		"here %s (floor: %.1f MiB for \"true\"), so readings near the floor are upper bounds.\n", base, wrapperDesc(r.timeBin), float64(r.floorKiB)/1024)
	summarize(r.stdout, r.rows)
	for _, n := range r.notes {
		fmt.Fprintln(r.stdout, "note:", n)
	}
	return nil
}

func openConnsPath(o benchOptions) string {
	return filepath.Join(o.dir, fmt.Sprintf("open-conns-%d.pcap", o.openConns))
}

// openConnsRSS writes the capture of --open-conns connections open at once
// (in a child, so the parent stays small) and times rtmon analyze on it,
// with room for all of them in its table: the RSS of the whole process
// holding them. The tracker has no memory bound (--max-memory 0: it must
// shed none, and its share of a bound would be a fraction of it); the
// run's GC soft limit (GOMEMLIMIT) is the target instead, 1 KiB
// a connection, so that the collector does not let the heap double past
// what is live, as it would under GOGC alone.
func (r *benchRunner) openConnsRSS() error {
	n := r.o.openConns
	if n <= 0 {
		return nil
	}
	path := openConnsPath(r.o)
	fmt.Fprintf(os.Stderr, "writing %d open connections to %s...\n", n, path)
	gen := exec.CommandContext(r.ctx, r.self, "bench", "--generate-open", "--open-conns", strconv.Itoa(n), "--dir", r.o.dir)
	gen.Stdout, gen.Stderr = os.Stderr, os.Stderr
	if err := gen.Run(); err != nil {
		return fmt.Errorf("bench: writing the open-connections capture: %w", err)
	}
	defer os.Remove(path)
	info, err := bench.ScanFile(path)
	if err != nil {
		return err
	}
	in := &benchInput{label: fmt.Sprintf("%d open", n), path: path, info: info}
	r.rows = r.rows[:0]
	argv := []string{r.self, "analyze", "--progress=false", "--workers", "1", "--max-memory", "0",
		"--max-connections", strconv.Itoa(n + n/8), path}
	limit := max(int64(n)<<10, 256<<20)
	env := append(slices.Clone(r.env), "GOMEMLIMIT="+strconv.FormatInt(limit, 10))
	if err := r.runPinned("rtmon", in, argv, openConnsNote, r.pin, env); err != nil {
		return err
	}
	row := r.rows[0]
	fmt.Fprintf(r.stdout, "\n%d connections open at once (each mid-response): rtmon analyze max RSS %.0f MiB, %.0f B per connection (target: 2.9M in < 3 GiB, < 1 KiB each), %.1f s, under GOMEMLIMIT=%d (%.0f MiB) with no --max-memory; %s\n",
		n, float64(row.MaxRSSKiB)/1024, float64(row.MaxRSSKiB)*1024/float64(n), row.Wall.Seconds(), limit, float64(limit)/(1<<20), row.Note)
	return nil
}

var (
	connsRe   = regexp.MustCompile(`connections (\d+)  transactions (\d+)`)
	evictedRe = regexp.MustCompile(`tcp: .* evicted (\d+)`)
)

// openConnsNote is what an open-connections run reported: every
// connection and its transaction, none evicted, says the tracker held
// them all.
func openConnsNote(m bench.Measurement) string {
	c, e := connsRe.FindSubmatch(m.Stdout), evictedRe.FindSubmatch(m.Stdout)
	if c == nil || e == nil {
		return "its summary not found"
	}
	return fmt.Sprintf("%s connections, %s transactions, %s evicted", c[1], c[2], e[1])
}

// benchConnMem measures the heap the connection table holds per open
// connection.
func benchConnMem(stdout io.Writer, o benchOptions) error {
	if o.connMem <= 0 {
		return nil
	}
	fmt.Fprintf(stdout, "\nheap per open connection (%d open at once, after GC; target < 1024 B):\n", o.connMem)
	for _, s := range []bench.ConnState{bench.Handshake, bench.Idle, bench.MidResponse} {
		pkts, err := bench.OpenConnectionPackets(o.dir, o.connMem, s)
		if err != nil {
			return err
		}
		m, err := bench.MeasureOpenConnections(pkts, s)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  %-16s %7.0f B live  %7.0f B in-use spans  %7.0f B counted against --max-memory  (%d connections)\n",
			s, m.LivePerConn, m.HeapPerConn, m.CountedPerConn, m.Connections)
	}
	return nil
}

// summarize checks the speed targets against the rows: issue 15's (2M
// packets/s per core end to end, 1.8x from one worker to two, 75x tshark
// on the same file).
func summarize(w io.Writer, rows []bench.Row) {
	for _, r := range rows {
		switch {
		case r.Tool == "rtmon" && strings.HasPrefix(r.Input, "full"):
			fmt.Fprintf(w, "rtmon end to end on %s: %.2f M packets/s, %.0f MB/s (target >= 2 M packets/s on one core)\n",
				r.Input, r.PacketsPerSec()/1e6, r.MBPerSec())
		case strings.HasPrefix(r.Tool, "rtmon ") && strings.HasSuffix(r.Tool, "w") && r.Ratio > 0:
			var n int
			fmt.Sscanf(r.Tool, "rtmon %dw", &n)
			fmt.Fprintf(w, "%s on %s: %.2fx the speed of the rtmon row (target >= 1.8x for 2 workers over 1), %.2f M packets/s per core\n",
				r.Tool, r.Input, 1/r.Ratio, r.PacketsPerSec()/1e6/float64(max(n, 1)))
		case r.Tool == "tshark" && r.Ratio > 0:
			fmt.Fprintf(w, "rtmon vs tshark on %s: %.1fx faster (target >= 75x)\n", r.Input, r.Ratio)
		}
	}
}

func wrapperDesc(timeBin string) string {
	if timeBin != "" {
		return "GNU time"
	}
	return "a helper rtmon process"
}

func pinDesc(pin string) string {
	if pin == "" {
		return "none"
	}
	return "taskset -c " + pin
}
