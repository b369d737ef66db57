package main

// Flags that analyze and live share: where records go, and how much
// memory the pipeline may hold.

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rtmon/rtmon/pipeline"
	"github.com/rtmon/rtmon/reconstruct/tlsdecrypt"
	"github.com/rtmon/rtmon/store"
)

// addStoreFlags registers --store, --sensor and --rollups.
func addStoreFlags(f *pflag.FlagSet, o *analyzeOptions) {
	f.StringVar(&o.storeURL, "store", "", "also write records to a store: duckdb:PATH, memory:, clickhouse://host:9000/db")
	f.StringVar(&o.sensor, "sensor", "", "sensor name written with every stored record")
	f.StringVar(&o.rollups, "rollups", "on", "keep per-minute rollups for fast overviews of millions of records (percentiles within 0.76%): on, off (exact overviews, faster ingest)")
}

func (o analyzeOptions) storeOptions() store.Options {
	return store.Options{Sensor: o.sensor, Rollups: o.rollups}
}

// openStore opens the --store a command keeps open beyond the pipeline
// (live serves the UI from it).
func openStore(ctx context.Context, o analyzeOptions) (store.Store, error) {
	st, err := store.Open(ctx, o.storeURL, o.storeOptions())
	if err != nil {
		return nil, fmt.Errorf("--store %s: %w", o.storeURL, err)
	}
	return st, nil
}

// addMemoryFlag registers --max-memory and --workers on analyze and live.
func addMemoryFlag(f *pflag.FlagSet, o *analyzeOptions) {
	f.IntVar(&o.workers, "workers", 0, "goroutines that reconstruct and group, each with its share of the clients and of --max-memory (0: one per core); the records are the same for any number")
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

// addKeyLogFlag registers --keylog on analyze and live.
func addKeyLogFlag(f *pflag.FlagSet, o *analyzeOptions) {
	f.StringVar(&o.keyLog, "keylog", "", "NSS key log file (SSLKEYLOGFILE format) whose secrets decrypt HTTPS, which is then parsed like HTTP; connections without a key are timed keyless. The file must not be writable by others")
}

// openKeyLog reads --keylog; nil without it. The permission check is
// tlsdecrypt's: a file others may write is refused, one they may read is
// a warning (its secrets are exposed, not rtmon's to fix).
func (o analyzeOptions) openKeyLog() (*tlsdecrypt.KeyLog, error) {
	if o.keyLog == "" {
		return nil, nil
	}
	kl, err := tlsdecrypt.OpenKeyLog(o.keyLog, tlsdecrypt.KeyLogOptions{})
	if err != nil {
		return nil, fmt.Errorf("--keylog: %w", err)
	}
	if kl.ReadableByOthers() {
		slog.Warn("key log file is readable by others: its TLS secrets are exposed", "path", o.keyLog)
	}
	slog.Info("key log read", "keylog", kl) // counts only (KeyLog.LogValue)
	return kl, nil
}

// followKeyLog reads what clients append to the key log every interval
// while a live capture runs, so that new connections find their secrets.
// A connection whose line comes after its ServerHello passed is timed
// keyless. stop ends the reading and waits for it.
func followKeyLog(ctx context.Context, kl *tlsdecrypt.KeyLog, interval time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		warned := false
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, err := kl.Follow(); err != nil && !warned {
				// Once: a rotated-away file fails every second until it is back.
				slog.Warn("reading the key log", "err", err)
				warned = true
			} else if err == nil {
				warned = false
			}
		}
	}()
	return func() { cancel(); <-done }
}
