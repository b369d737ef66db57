package pipeline

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Shares of Config.MaxMemory: the tracker's connections and buffers take
// most; the pageview stage holds transactions until their pageviews close;
// the store writer holds records while its engine is slow or down (beyond
// its bound they spill to disk).
const (
	trackerShare = 0.6
	grouperShare = 0.1
	writerShare  = 0.3
	// heldRecordMemory is what one transaction or record held by the
	// grouper or the writer is counted at (a record with its URL, Referer
	// and User-Agent; bench: about 1 KiB).
	heldRecordMemory = 2 << 10
)

// applyMemoryBudget splits MaxMemory among the stages, leaving any bound
// set explicitly as it is.
func (c *Config) applyMemoryBudget() {
	if c.MaxMemory <= 0 {
		return
	}
	if c.Tracker.MaxMemory == 0 {
		c.Tracker.MaxMemory = int64(float64(c.MaxMemory) * trackerShare)
	}
	// The grouper's share, among what it holds: transactions waiting to
	// be ordered and those in open pageviews, connection records waiting
	// for their pageview, orphans, closed pageviews, open pageviews.
	n := max(8192, int(float64(c.MaxMemory)*grouperShare/heldRecordMemory))
	for _, b := range []struct {
		v   *int
		div int
	}{{&c.Grouper.MaxHeld, 4}, {&c.Grouper.MaxMembers, 4}, {&c.Grouper.MaxConnCache, 4},
		{&c.Grouper.MaxOrphans, 8}, {&c.Grouper.MaxPending, 16}, {&c.Grouper.MaxOpen, 16}} {
		if *b.v == 0 {
			*b.v = n / b.div
		}
	}
	if c.StoreOptions.MaxBufferRows == 0 {
		c.StoreOptions.MaxBufferRows = max(1024, int(float64(c.MaxMemory)*writerShare/heldRecordMemory))
	}
}

// DefaultMaxMemory is a quarter of the machine's memory, between 256 MiB
// and 16 GiB (1 GiB when /proc/meminfo cannot be read): what a sensor
// beside the servers it watches may take.
func DefaultMaxMemory() int64 {
	total, err := memTotal("/proc/meminfo")
	if err != nil {
		return 1 << 30
	}
	return min(max(total/4, 256<<20), 16<<30)
}

// memTotal reads MemTotal from a meminfo file, in bytes.
func memTotal(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("memory size: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("memory size: %s: %w", path, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("memory size: %s: %w", path, err)
	}
	return 0, fmt.Errorf("memory size: no MemTotal in %s", path)
}
