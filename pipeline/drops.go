package pipeline

import (
	"sync"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

// statsLag is how stale a live capture's kernel counters may be: its
// goroutines refresh them on read timeouts, and under load about once a
// second. A drop noticed now may have happened that long before.
const statsLag = int64(1e9)

// maxDropPeriods bounds the drop periods remembered: the oldest go first.
const maxDropPeriods = 4096

type period struct{ from, to int64 }

// dropPeriods are the capture-time ranges in which a live capture's
// kernel dropped packets (its counters rose), for flagging the records that
// overlap them. The packet loop observes; the output stage, which may run on
// another goroutine, asks.
type dropPeriods struct {
	mu      sync.Mutex
	periods []period // ascending
	total   uint64   // drops counted at the last observation
	at      int64    // capture time of the last observation
}

// observe takes the sources' drop counters at capture time now.
func (d *dropPeriods) observe(st capture.Stats, now int64) {
	var total uint64
	for _, s := range st.Sources {
		total += s.Capture.Dropped + s.Capture.IfDropped
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if total > d.total {
		from := min(d.at, now) - statsLag
		if d.at == 0 {
			from = now - statsLag
		}
		if n := len(d.periods); n > 0 && d.periods[n-1].to >= from {
			d.periods[n-1].to = max(d.periods[n-1].to, now)
		} else {
			if n == maxDropPeriods {
				d.periods = append(d.periods[:0], d.periods[1:]...)
			}
			d.periods = append(d.periods, period{from, now})
		}
	}
	d.total, d.at = total, max(d.at, now)
}

// overlaps reports whether [start, end] meets a drop period.
func (d *dropPeriods) overlaps(start, end int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := len(d.periods) - 1; i >= 0; i-- {
		p := d.periods[i]
		if p.to < start {
			return false // the rest are older still
		}
		if p.from <= end {
			return true
		}
	}
	return false
}

// dropFlagger flags the records that overlap a drop period.
type dropFlagger struct {
	d    *dropPeriods
	next pageview.Sink
}

func (f *dropFlagger) flag(flags *reconstruct.Flags, start, end int64) {
	if f.d.overlaps(start, end) {
		*flags |= reconstruct.FlagCaptureDrops
	}
}

func (f *dropFlagger) Connection(c *reconstruct.Connection) {
	f.flag(&c.Flags, c.FirstSeen, c.LastSeen)
	f.next.Connection(c)
}

func (f *dropFlagger) Transaction(x *reconstruct.Transaction) {
	f.flag(&x.Flags, x.Start, x.End)
	f.next.Transaction(x)
}

func (f *dropFlagger) Pageview(p *pageview.Pageview) {
	f.flag(&p.Flags, p.Start, p.End)
	f.next.Pageview(p)
}
