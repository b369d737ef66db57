package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/rtmon/rtmon/store/query"
	"github.com/rtmon/rtmon/web"
)

// rtmon live marks on the charts when its capture began dropping packets:
// the numbers after that moment are incomplete. (RLM rule flips are marked
// by rlm_live.go.)

// dropQuiet is how long the drop counters must stay still for an episode to
// end: a capture that drops in bursts every few seconds is one episode, one
// annotation, not one per burst.
const dropQuiet = 5 * time.Minute

// dropEpisodes turns the capture's cumulative drop counter into episode
// starts.
type dropEpisodes struct {
	seen     bool
	total    int64
	lastRise time.Time
	active   bool
}

// observe takes the counter at now and reports whether an episode began:
// the counter rose (or was above zero at the first look) after at least
// dropQuiet without a rise.
func (d *dropEpisodes) observe(total int64, now time.Time) bool {
	rose := total > d.total || (!d.seen && total > 0)
	d.seen = true
	if total < d.total {
		// A counter that went back (a capture restarted) starts over.
		d.total = total
		return false
	}
	d.total = total
	if d.active && now.Sub(d.lastRise) >= dropQuiet {
		d.active = false
	}
	if !rose {
		return false
	}
	began := !d.active
	d.active, d.lastRise = true, now
	return began
}

// annotateDrops polls feed every interval and writes an annotation (source
// rtmon) into ann when a drop episode begins, until ctx ends. The returned
// stop cancels it and waits for it.
func annotateDrops(ctx context.Context, feed *web.LiveFeed, ann query.Annotator, interval time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var eps dropEpisodes
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			ev, ok := feed.Latest()
			if !ok {
				continue
			}
			p := ev.Pipeline
			total := p.CaptureDrops + p.InterfaceDrops
			if !eps.observe(total, time.Now()) {
				continue
			}
			// The charts' time is packet time; live, it is the clock's
			// give or take the feed's second.
			at := time.Now().UnixMilli()
			if ev.Time > 0 {
				at = ev.Time / int64(time.Millisecond)
			}
			a := query.Annotation{TimeMs: at, Source: query.SourceRtmon, Tags: []string{"capture-drops"},
				Text: fmt.Sprintf("capture drops began (%d packets dropped so far: rtmon %d, interface %d); records from here may be incomplete",
					total, p.CaptureDrops, p.InterfaceDrops)}
			actx, acancel := context.WithTimeout(ctx, 30*time.Second)
			if _, err := ann.AddAnnotation(actx, a); err != nil {
				slog.Warn("live: could not annotate the capture drops", "err", err)
			}
			acancel()
		}
	}()
	return func() { cancel(); wg.Wait() }
}
