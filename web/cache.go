package web

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// overviewCache shares one overview computation between the browsers that
// ask for the same view at about the same time: a wall screen refreshes
// every 30 s, and over 10M records one overview costs seconds of store time.
// Entries live ttl and only while the store has written nothing new.
type overviewCache struct {
	ttl   time.Duration
	group singleflight.Group
	mu    sync.Mutex
	items map[string]cached
}

type cached struct {
	at      time.Time
	written int64
	o       *Overview
}

func (c *overviewCache) get(ctx context.Context, key string, written int64, compute func(context.Context) (*Overview, error)) (*Overview, error) {
	if c.ttl <= 0 {
		return compute(ctx)
	}
	c.mu.Lock()
	if e, ok := c.items[key]; ok && time.Since(e.at) < c.ttl && e.written == written {
		c.mu.Unlock()
		return e.o, nil
	}
	c.mu.Unlock()
	v, err, _ := c.group.Do(fmt.Sprint(key, "\x00", written), func() (any, error) {
		// Detached from the first caller: others may be waiting on it.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		o, err := compute(cctx)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.items == nil || len(c.items) > 256 {
			c.items = map[string]cached{}
		}
		c.items[key] = cached{at: time.Now(), written: written, o: o}
		return o, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Overview), nil
}
