package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/rtmon/rtmon/stitch"
)

func TestParsePartition(t *testing.T) {
	for _, c := range []struct {
		in   string
		k, n int
		ok   bool
	}{{"0/1", 0, 1, true}, {"3/4", 3, 4, true}, {"4/4", 0, 0, false}, {"-1/2", 0, 0, false}, {"1", 0, 0, false}, {"a/b", 0, 0, false}, {"0/0", 0, 0, false}} {
		k, n, err := parsePartition(c.in)
		if (err == nil) != c.ok || k != c.k || n != c.n {
			t.Errorf("%q: %d/%d %v, want %d/%d ok=%v", c.in, k, n, err, c.k, c.n, c.ok)
		}
	}
}

// TestStitchCommand: a run over an explicit range records its checkpoint,
// and a run without --from resumes there.
func TestStitchCommand(t *testing.T) {
	url := "duckdb:" + filepath.Join(t.TempDir(), "s.db")
	o := stitchOptions{storeURL: url, from: "2026-01-01T00:00:00Z", to: "2026-01-01T00:30:00Z", partition: "1/3",
		window: stitch.DefaultWindow, margin: stitch.DefaultMargin, format: "json"}
	var out bytes.Buffer
	if err := runStitch(context.Background(), &out, o); err != nil {
		t.Fatal(err)
	}
	var first stitch.Stats
	if err := json.Unmarshal(out.Bytes(), &first); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if first.Windows != 3 || first.Resumed != 0 {
		t.Errorf("first run %+v, want 3 windows from the start", first)
	}
	out.Reset()
	o.from, o.to = "", "2026-01-01T01:00:00Z"
	if err := runStitch(context.Background(), &out, o); err != nil {
		t.Fatal(err)
	}
	var second stitch.Stats
	if err := json.Unmarshal(out.Bytes(), &second); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if second.Resumed != first.Done || second.Windows != 3 {
		t.Errorf("second run %+v, want resumed at %d with 3 windows", second, first.Done)
	}
	o.partition = "3/3"
	if err := runStitch(context.Background(), &out, o); err == nil {
		t.Error("partition 3/3 accepted")
	}
}
