package main

import (
	"strings"
	"testing"

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
