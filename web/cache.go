package web

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// overviewCache shares one overview computation between the browsers that
// ask for the same view at about the same time: a wall screen refreshes
// every 30 s, and over 10M records one overview costs seconds of store time.
// Entries live ttl and only while the store has written nothing new. A
// computation every asker has left is cancelled: nobody would see it.
type overviewCache struct {
	ttl     time.Duration
	mu      sync.Mutex
	items   map[string]cached
	flights map[string]*flight
}

type cached struct {
	at      time.Time
	written int64
	o       *Overview
}

// flight is one computation in progress and the askers waiting for it.
type flight struct {
	done    chan struct{}
	o       *Overview
	err     error
	waiters int
	cancel  context.CancelFunc
}

// maxOverviewTime bounds one computation, whoever waits for it.
const maxOverviewTime = 5 * time.Minute

// get returns the overview for key (the parsed view, not the raw query:
// an extra parameter must not make a new computation) as of written.
func (c *overviewCache) get(ctx context.Context, key string, written int64, compute func(context.Context) (*Overview, error)) (*Overview, error) {
	if c.ttl <= 0 {
		return compute(ctx)
	}
	c.mu.Lock()
	if e, ok := c.items[key]; ok && time.Since(e.at) < c.ttl && e.written == written {
		c.mu.Unlock()
		return e.o, nil
	}
	fkey := fmt.Sprint(key, "\x00", written)
	f := c.flights[fkey]
	if f == nil {
		fctx, cancel := context.WithTimeout(context.Background(), maxOverviewTime)
		f = &flight{done: make(chan struct{}), cancel: cancel}
		if c.flights == nil {
			c.flights = map[string]*flight{}
		}
		c.flights[fkey] = f
		go c.run(fctx, f, fkey, key, written, compute)
	}
	f.waiters++
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.o, f.err
	case <-ctx.Done():
		c.mu.Lock()
		f.waiters--
		if f.waiters == 0 {
			f.cancel()
		}
		c.mu.Unlock()
		return nil, fmt.Errorf("overview: %w", ctx.Err())
	}
}

func (c *overviewCache) run(ctx context.Context, f *flight, fkey, key string, written int64, compute func(context.Context) (*Overview, error)) {
	o, err := compute(ctx)
	f.cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.flights, fkey)
	f.o, f.err = o, err
	close(f.done)
	if err != nil {
		return
	}
	if c.items == nil || len(c.items) > 256 {
		c.items = map[string]cached{}
	}
	c.items[key] = cached{at: time.Now(), written: written, o: o}
}
