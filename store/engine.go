package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// engine is what Open returns: the querier and the writer over one
// backend, and the retention that runs beside them.
type engine struct {
	*querier
	*writer
	release  func() error // closes the backend's connections
	logger   *slog.Logger
	stopTTL  chan struct{}
	closeOne sync.Once
	closeErr error
	// shards: cluster mode's probe of the shards (clickhouse_shards.go).
	shards *shardProbe
}

func (e *engine) Close() error {
	e.closeOne.Do(func() {
		if e.stopTTL != nil {
			close(e.stopTTL)
		}
		werr := e.writer.close()
		cerr := e.release()
		e.closeErr = errors.Join(werr, cerr)
	})
	return e.closeErr
}

// startTTL drops expired days now and hourly; TTL is by wall clock because
// retention is an operational limit on disk, not on capture time.
func (e *engine) startTTL(ctx context.Context, ttl time.Duration, drop func(context.Context, time.Time) error) error {
	if ttl <= 0 {
		return nil
	}
	run := func(ctx context.Context) error { return drop(ctx, dayOf(time.Now().Add(-ttl).UnixNano())) }
	if err := run(ctx); err != nil {
		return fmt.Errorf("ttl: %w", err)
	}
	e.stopTTL = make(chan struct{})
	go func() {
		t := time.NewTicker(time.Hour)
		defer t.Stop()
		for {
			select {
			case <-e.stopTTL:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				if err := run(ctx); err != nil {
					// Retried next hour; nobody waits for this pass.
					e.logger.Warn("store: retention pass failed", "err", err)
				}
				cancel()
			}
		}
	}()
	return nil
}
