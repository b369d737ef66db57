package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/synth"
)

func defaultAnalyze() analyzeOptions {
	return analyzeOptions{format: "jsonl", maxConns: 1000, idle: defaultIdle, reader: "pcapgo"}
}

func generated(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "w.pcap")
	if _, err := synth.GenerateFile(path, synth.Options{Nanosecond: true}, synth.Workload{Seed: 3, Clients: 4, Duration: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	return path
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

func TestAnalyzeWritesRecordsAndSummary(t *testing.T) {
	in := generated(t)
	out := t.TempDir()
	for _, format := range []string{"jsonl", "csv"} {
		o := defaultAnalyze()
		o.format, o.out = format, filepath.Join(out, format)
		var stdout bytes.Buffer
		if err := runAnalyze(context.Background(), &stdout, []string{in}, o); err != nil {
			t.Fatal(err)
		}
		n := countLines(t, filepath.Join(o.out, "transactions."+format))
		if format == "csv" {
			n-- // header
		}
		if n == 0 || !strings.Contains(stdout.String(), "transactions "+strconv.Itoa(n)) {
			t.Errorf("%s: %d transaction lines; summary:\n%s", format, n, stdout.String())
		}
	}
}

func itoa(n int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(n)) }

func fmtInt(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

func TestAnalyzeBadInput(t *testing.T) {
	dir := t.TempDir()
	var stdout bytes.Buffer
	err := runAnalyze(context.Background(), &stdout, []string{filepath.Join(dir, "missing.pcap")}, defaultAnalyze())
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, []byte("this is not a capture\n"), 0o644)
	if err := runAnalyze(context.Background(), &stdout, []string{text}, defaultAnalyze()); !errors.Is(err, capture.ErrNotCapture) {
		t.Errorf("text file: %v", err)
	}
	o := defaultAnalyze()
	o.format = "xml"
	if err := runAnalyze(context.Background(), &stdout, []string{text}, o); err == nil || !strings.Contains(err.Error(), "--format") {
		t.Errorf("bad format: %v", err)
	}
}

// TestAnalyzeTruncatedFile: a capture cut mid-record yields every record it
// held, then exit status 2.
func TestAnalyzeTruncatedFile(t *testing.T) {
	in := generated(t)
	full := t.TempDir()
	o := defaultAnalyze()
	o.out = full
	if err := runAnalyze(context.Background(), &bytes.Buffer{}, []string{in}, o); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(in)
	cut := filepath.Join(t.TempDir(), "cut.pcap")
	os.WriteFile(cut, b[:len(b)*2/3+7], 0o644)
	part := t.TempDir()
	o.out = part
	var stdout bytes.Buffer
	err := runAnalyze(context.Background(), &stdout, []string{cut}, o)
	var exit exitError
	if !errors.As(err, &exit) || exit != 2 {
		t.Fatalf("want exit status 2, got %v", err)
	}
	got, all := countLines(t, filepath.Join(part, "transactions.jsonl")), countLines(t, filepath.Join(full, "transactions.jsonl"))
	if got == 0 || got >= all {
		t.Errorf("truncated file gave %d transactions (full file %d)", got, all)
	}
	if !strings.Contains(stdout.String(), "truncated") {
		t.Errorf("summary does not mention the truncation:\n%s", stdout.String())
	}
}

// analyze --store writes every record once: a second ingest of the same
// capture adds nothing.
func TestAnalyzeStoreTwiceNoDuplicates(t *testing.T) {
	in := generated(t)
	o := defaultAnalyze()
	o.storeURL = "duckdb:" + filepath.Join(t.TempDir(), "rtmon.duckdb")
	var first, second bytes.Buffer
	if err := runAnalyze(context.Background(), &first, []string{in}, o); err != nil {
		t.Fatal(err)
	}
	if err := runAnalyze(context.Background(), &second, []string{in}, o); err != nil {
		t.Fatal(err)
	}
	var w1, d1, w2, d2 int
	fmt.Sscanf(lineWith(first.String(), "store:"), "store: %d records written, %d duplicates", &w1, &d1)
	fmt.Sscanf(lineWith(second.String(), "store:"), "store: %d records written, %d duplicates", &w2, &d2)
	if w1 == 0 || d1 != 0 || w2 != 0 || d2 != w1 {
		t.Errorf("first run wrote %d (dup %d), second wrote %d (dup %d)", w1, d1, w2, d2)
	}
}

func lineWith(text, prefix string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
