package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/pipeline"
)

// TestMaxMemoryFlag: auto takes the machine's default, 0 no bound, a size
// its bytes; nonsense and too little are errors naming the flag.
func TestMaxMemoryFlag(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		err  string
	}{
		{"auto", pipeline.DefaultMaxMemory(), ""},
		{"", pipeline.DefaultMaxMemory(), ""},
		{"0", 0, ""},
		{"2G", 2e9, ""},
		{"512M", 512e6, ""},
		{"lots", 0, "--max-memory"},
		{"1M", 0, "at least 16M"},
	} {
		o := defaultAnalyze()
		o.maxMemory = c.in
		cfg, err := o.config()
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("--max-memory %q: err %v, want one saying %q", c.in, err, c.err)
		case c.err == "" && (err != nil || cfg.MaxMemory != c.want):
			t.Errorf("--max-memory %q: %d, %v; want %d", c.in, cfg.MaxMemory, err, c.want)
		}
	}
}

// TestKeyLogFlag: --keylog reads the file into the tracker's config; a
// file others may write is refused, naming the flag; no flag, no key log.
func TestKeyLogFlag(t *testing.T) {
	o := defaultAnalyze()
	if cfg, err := o.config(); err != nil || cfg.Tracker.KeyLog != nil {
		t.Fatalf("no --keylog: key log %v, err %v", cfg.Tracker.KeyLog, err)
	}
	path := filepath.Join(t.TempDir(), "keys.log")
	line := "CLIENT_RANDOM " + strings.Repeat("ab", 32) + " " + strings.Repeat("cd", 48) + "\n"
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	o.keyLog = path
	cfg, err := o.config()
	if err != nil || cfg.Tracker.KeyLog == nil || cfg.Tracker.KeyLog.Stats().Entries != 1 {
		t.Fatalf("--keylog: %v, err %v", cfg.Tracker.KeyLog, err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := o.config(); err == nil || !strings.Contains(err.Error(), "--keylog") {
		t.Errorf("world-writable key log: err %v, want a refusal naming --keylog", err)
	}
	o.keyLog = filepath.Join(t.TempDir(), "missing.log")
	if _, err := o.config(); err == nil || !strings.Contains(err.Error(), "--keylog") {
		t.Errorf("missing key log: err %v", err)
	}
}

// TestFollowKeyLog: in live mode the lines clients append later are read.
func TestFollowKeyLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.log")
	line := func(b string) string {
		return "CLIENT_RANDOM " + strings.Repeat(b, 32) + " " + strings.Repeat("cd", 48) + "\n"
	}
	if err := os.WriteFile(path, []byte(line("ab")), 0o600); err != nil {
		t.Fatal(err)
	}
	o := defaultAnalyze()
	o.keyLog = path
	kl, err := o.openKeyLog()
	if err != nil {
		t.Fatal(err)
	}
	stop := followKeyLog(context.Background(), kl, time.Millisecond)
	defer stop()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(line("ef"))
	f.Close()
	// Polled, not timed: the follower gets as long as the test may run.
	for kl.Stats().Entries != 2 {
		time.Sleep(time.Millisecond)
	}
}
