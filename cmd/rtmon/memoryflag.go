package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rtmon/rtmon/pipeline"
)

// addMemoryFlag registers --max-memory on analyze and live.
func addMemoryFlag(f *pflag.FlagSet, o *analyzeOptions) {
	f.StringVar(&o.maxMemory, "max-memory", "auto", "bound on the state rtmon holds (connections, buffers, pageviews in progress, records waiting for the store), e.g. 2G; past it the least recently active connections are shed and flagged evicted. auto: a quarter of the machine's memory, 256M..16G; 0: no bound")
}

// memoryBudget reads --max-memory.
func (o analyzeOptions) memoryBudget() (int64, error) {
	switch strings.ToLower(strings.TrimSpace(o.maxMemory)) {
	case "", "auto":
		return pipeline.DefaultMaxMemory(), nil
	case "0", "none", "off":
		return 0, nil
	}
	n, err := parseSize(o.maxMemory)
	if err != nil {
		return 0, fmt.Errorf("--max-memory: %w", err)
	}
	if n < 16<<20 {
		return 0, fmt.Errorf("--max-memory %s: want at least 16M (or 0 for no bound)", o.maxMemory)
	}
	return n, nil
}
