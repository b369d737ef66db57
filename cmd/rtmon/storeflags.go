package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/rtmon/rtmon/store"
)

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
