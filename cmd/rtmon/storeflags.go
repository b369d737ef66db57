package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/rtmon/rtmon/store"
)

func addStoreFlags(f *pflag.FlagSet, o *analyzeOptions) {
	f.StringVar(&o.storeURL, "store", "", "also write records to a store: duckdb:PATH, memory:, clickhouse://host:9000/db")
	f.StringVar(&o.sensor, "sensor", "", "sensor name written with every stored record")
	f.StringVar(&o.rollups, "rollups", "on", "keep per-minute rollups for fast overviews of millions of records (percentiles within 0.76%): on, off (exact overviews, faster ingest)")
}

func openStore(ctx context.Context, o analyzeOptions) (store.Store, error) {
	st, err := store.Open(ctx, o.storeURL, store.Options{Sensor: o.sensor, Rollups: o.rollups})
	if err != nil {
		return nil, fmt.Errorf("--store %s: %w", o.storeURL, err)
	}
	return st, nil
}

// finishStore waits for every record to be stored and reports the writer's
// state; it closes the store when this run opened it. Anything the store
// could not take is said here, never dropped silently: Close names the spill
// files left for the next run.
func finishStore(st store.Store, closeIt bool, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	flushErr := st.Flush(ctx)
	ws := st.Stats()
	fmt.Fprintf(stdout, "store: %d records written, %d duplicates skipped, %d queued, %d retries\n",
		ws.Written, ws.Duplicates, ws.Queued, ws.Retries)
	if closeIt {
		if err := st.Close(); err != nil {
			return fmt.Errorf("store: %w", err)
		}
	}
	if flushErr != nil {
		return fmt.Errorf("store flush: %w", flushErr)
	}
	return nil
}
