package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/pipeline"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/synth"
)

func capture(t *testing.T, wl synth.Workload) (string, synth.Summary) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "w.pcap")
	sum, err := synth.GenerateFile(path, synth.Options{Nanosecond: true}, wl)
	if err != nil {
		t.Fatal(err)
	}
	return path, sum
}

// counter is an extra sink that checks what reaches the sinks.
type counter struct {
	mu                       sync.Mutex
	conns, txs, pvs, noClass int
}

func (c *counter) Connection(x *reconstruct.Connection) { c.mu.Lock(); c.conns++; c.mu.Unlock() }
func (c *counter) Transaction(x *reconstruct.Transaction) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.txs++
	if x.Class == "" || x.Priority == "" {
		c.noClass++
	}
}
func (c *counter) Pageview(*pageview.Pageview) { c.mu.Lock(); c.pvs++; c.mu.Unlock() }

func TestFilesToOutputs(t *testing.T) {
	in, truth := capture(t, synth.Workload{Seed: 3, Clients: 4, Duration: 5 * time.Second})
	cfg := pipeline.DefaultConfig()
	cfg.Files = []string{in}
	cfg.OutDir = t.TempDir()
	cfg.HARDir = filepath.Join(cfg.OutDir, "har")
	cfg.StoreURL = "duckdb:" + filepath.Join(t.TempDir(), "rtmon.duckdb")
	var c counter
	cfg.Sinks = []pageview.Sink{&c}
	var progressed bool
	cfg.Progress = func(done, total int64) { progressed = done > 0 && total > 0 }
	p, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	s := p.Summary()
	if s.Transactions != int64(truth.Transactions) || c.txs != truth.Transactions || c.pvs != truth.Pageviews || c.noClass != 0 {
		t.Errorf("summary %d transactions, sink %d (%d unclassified) and %d pageviews; generated %d and %d",
			s.Transactions, c.txs, c.noClass, c.pvs, truth.Transactions, truth.Pageviews)
	}
	if !progressed {
		t.Error("Progress never reported the bytes read")
	}
	ws, ok := p.StoreStats()
	if !ok || ws.Written != int64(c.conns+c.txs+c.pvs) {
		t.Errorf("store stats %+v (ok %v), want %d records", ws, ok, c.conns+c.txs+c.pvs)
	}
	b, err := os.ReadFile(filepath.Join(cfg.OutDir, "transactions.jsonl"))
	if err != nil || bytes.Count(b, []byte("\n")) != truth.Transactions {
		t.Errorf("transactions.jsonl: %d lines, %v", bytes.Count(b, []byte("\n")), err)
	}
	if hars, _ := filepath.Glob(filepath.Join(cfg.HARDir, "*.har")); len(hars) != truth.Pageviews {
		t.Errorf("%d HAR files, want %d", len(hars), truth.Pageviews)
	}
	var out bytes.Buffer
	if err := p.WriteSummary(&out); err != nil || !strings.Contains(out.String(), "class") {
		t.Errorf("summary text %q, %v", out.String(), err)
	}
	if st := p.Stats(); st.Packets != int64(s.Packets) || st.StoreWritten != ws.Written {
		t.Errorf("stats %+v, summary packets %d", st, s.Packets)
	}
}

// A store the caller owns is flushed, not closed.
func TestSharedStoreStaysOpen(t *testing.T) {
	in, truth := capture(t, synth.Workload{Seed: 4, Clients: 2, Duration: 3 * time.Second})
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := pipeline.DefaultConfig()
	cfg.Files, cfg.Store = []string{in}, st
	runToEnd(t, ctx, cfg)
	c, err := st.Counters(ctx, store.TimeRange{}, "")
	if err != nil || c.Transactions != int64(truth.Transactions) {
		t.Errorf("store after the run: %+v, %v; want %d transactions", c, err, truth.Transactions)
	}
}

func TestNewChecksConfig(t *testing.T) {
	st, err := store.Open(context.Background(), "memory:", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for name, mod := range map[string]func(*pipeline.Config){
		"no input":   func(c *pipeline.Config) {},
		"two inputs": func(c *pipeline.Config) { c.Files, c.Interfaces = []string{"a.pcap"}, []string{"lo"} },
		"two stores": func(c *pipeline.Config) { c.Files, c.StoreURL, c.Store = []string{"a.pcap"}, "memory:", st },
		"bad format": func(c *pipeline.Config) { c.Files, c.OutDir, c.Format = []string{"a.pcap"}, t.TempDir(), "xml" },
		"no classes": func(c *pipeline.Config) {
			c.Files, c.ClassesFile = []string{"a.pcap"}, filepath.Join(t.TempDir(), "none.yaml")
		},
	} {
		cfg := pipeline.DefaultConfig()
		mod(&cfg)
		if _, err := pipeline.New(cfg); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
	// New opens nothing: a missing file is Start's error.
	cfg := pipeline.DefaultConfig()
	cfg.Files = []string{filepath.Join(t.TempDir(), "missing.pcap")}
	p, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Start on a missing file: %v", err)
	}
}

// Stopping a file read is an interruption: Wait says so with a ReadError,
// after the records read so far went out, and the summary lists it.
func TestStopInterruptsFileInput(t *testing.T) {
	// More packets than the loop reads between two progress reports.
	in, truth := capture(t, synth.Workload{Seed: 5, Clients: 50, Duration: 60 * time.Second})
	t.Logf("%d packets", truth.Packets)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := pipeline.DefaultConfig()
	cfg.Files = []string{in}
	cfg.Progress = func(int64, int64) { cancel() } // the first report comes part way
	p, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	err = p.Stop()
	var re *pipeline.ReadError
	if !errors.As(err, &re) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop: %v", err)
	}
	s := p.Summary()
	if len(s.Errors) != 1 || s.Packets == 0 || s.Packets >= uint64(truth.Packets) {
		t.Errorf("summary after the interruption: %d of %d packets, errors %q", s.Packets, truth.Packets, s.Errors)
	}
}

// runToEnd runs cfg's pipeline over its whole input.
func runToEnd(t *testing.T, ctx context.Context, cfg pipeline.Config) *pipeline.Pipeline {
	t.Helper()
	p, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	return p
}
