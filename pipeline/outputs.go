package pipeline

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/rtmon/rtmon/export"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/store"
)

// storeFlushTimeout bounds the wait for a store to take the last records;
// what it cannot take by then stays in its spill files.
const storeFlushTimeout = 5 * time.Minute

// outputs are the record files, HAR directory, store and extra sinks of a
// run: sink feeds them all.
type outputs struct {
	sink    pageview.Tee
	closers []io.Closer
	store   Store
	owned   io.Closer // the store, when the pipeline opened it
}

func openOutputs(ctx context.Context, cfg *Config) (o *outputs, err error) {
	o = &outputs{}
	defer func() {
		if err != nil {
			o.abort()
		}
	}()
	if cfg.OutDir != "" {
		records, err := export.NewRecordWriter(cfg.OutDir, cfg.Format)
		if err != nil {
			return nil, err
		}
		o.closers = append(o.closers, records)
		pageviews, err := export.NewPageviewWriter(cfg.OutDir, cfg.Format)
		if err != nil {
			return nil, err
		}
		o.closers = append(o.closers, pageviews)
		o.sink = append(o.sink, pageview.Records(records), pageviews)
	}
	if cfg.HARDir != "" {
		har, err := export.NewHARDir(cfg.HARDir)
		if err != nil {
			return nil, err
		}
		o.closers = append(o.closers, har)
		o.sink = append(o.sink, har)
	}
	o.store = cfg.Store
	if cfg.StoreURL != "" {
		st, err := store.Open(ctx, cfg.StoreURL, cfg.StoreOptions)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", cfg.StoreURL, err)
		}
		o.store, o.owned = st, st
	}
	if o.store != nil {
		o.sink = append(o.sink, o.store)
	}
	o.sink = append(o.sink, cfg.Sinks...)
	return o, nil
}

// abort closes what was opened after a failure; the first error is
// already on its way.
func (o *outputs) abort() {
	for _, c := range o.closers {
		c.Close()
	}
	if o.owned != nil {
		o.owned.Close()
	}
}

// finish closes the record files, then waits for every record to be
// stored and keeps the store's counters in *stored; it closes the store if
// the pipeline opened it. Anything the store could not take is said, never
// dropped silently: Close names the spill files left for the next run.
func (o *outputs) finish(stored **store.WriterStats) error {
	var first error
	for _, c := range o.closers {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		if o.owned != nil {
			o.owned.Close()
		}
		return first
	}
	if o.store == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeFlushTimeout)
	defer cancel()
	flushErr := o.store.Flush(ctx)
	ws := o.store.Stats()
	*stored = &ws
	if o.owned != nil {
		if err := o.owned.Close(); err != nil {
			return fmt.Errorf("store: %w", err)
		}
	}
	if flushErr != nil {
		return fmt.Errorf("store flush: %w", flushErr)
	}
	return nil
}
