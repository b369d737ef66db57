package pipeline

import (
	"testing"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

func dropStats(dropped, ifDropped uint64) capture.Stats {
	return capture.Stats{Sources: []capture.SourceStats{
		{Name: "eth0", Live: true, Capture: capture.CaptureStats{Dropped: dropped}},
		{Name: "eth1", Live: true, Capture: capture.CaptureStats{IfDropped: ifDropped}},
	}}
}

const sec = int64(1e9)

// The records of a period when the kernel dropped are flagged, widened by
// the counters' refresh lag; those before and after are not.
func TestDropPeriodsFlagOverlappingRecords(t *testing.T) {
	var d dropPeriods
	d.observe(dropStats(0, 0), 100*sec)
	d.observe(dropStats(0, 0), 110*sec)
	d.observe(dropStats(5, 0), 120*sec) // drops between 110 and 120 s (noticed up to 1 s late)
	d.observe(dropStats(5, 0), 130*sec)
	d.observe(dropStats(5, 2), 140*sec) // more, on the other interface
	d.observe(dropStats(5, 2), 150*sec)
	var got []string
	next := &collect{}
	f := &dropFlagger{d: &d, next: next}
	for _, c := range []struct {
		name       string
		start, end int64
		want       bool
	}{
		{"before", 100 * sec, 108 * sec, false},
		{"within the lag", 100 * sec, 109*sec + 1, true},
		{"inside", 112 * sec, 113 * sec, true},
		{"across the end", 119 * sec, 125 * sec, true},
		{"between", 121 * sec, 128 * sec, false},
		{"second period", 135 * sec, 136 * sec, true},
		{"after", 141 * sec, 150 * sec, false},
	} {
		x := &reconstruct.Transaction{Start: c.start, End: c.end}
		f.Transaction(x)
		if flagged := x.Flags&reconstruct.FlagCaptureDrops != 0; flagged != c.want {
			got = append(got, c.name)
		}
		conn := &reconstruct.Connection{FirstSeen: c.start, LastSeen: c.end}
		f.Connection(conn)
		pv := &pageview.Pageview{Start: c.start, End: c.end}
		f.Pageview(pv)
		if conn.Flags != x.Flags || pv.Flags != x.Flags {
			t.Errorf("%s: connection flags %v, pageview %v, transaction %v", c.name, conn.Flags, pv.Flags, x.Flags)
		}
	}
	if len(got) > 0 {
		t.Errorf("wrongly flagged or not: %v (periods %v)", got, d.periods)
	}
	if next.n != 21 {
		t.Errorf("%d records passed on, want 21", next.n)
	}
	if len(d.periods) != 2 {
		t.Errorf("periods %v, want 2", d.periods)
	}
}

func TestDropPeriodsBounded(t *testing.T) {
	var d dropPeriods
	// A drop every 20 s, with a quiet observation between: each its own period.
	last := int64(0)
	for i := range uint64(3 * maxDropPeriods) {
		last = int64(i) * 20 * sec
		d.observe(dropStats(i+1, 0), last)
		d.observe(dropStats(i+1, 0), last+5*sec)
	}
	if len(d.periods) != maxDropPeriods {
		t.Fatalf("%d periods kept, bound %d", len(d.periods), maxDropPeriods)
	}
	if !d.overlaps(last, last) || d.overlaps(last+2*sec, last+3*sec) {
		t.Error("the newest period was not kept as it was")
	}
}

type collect struct{ n int }

func (c *collect) Connection(*reconstruct.Connection)   { c.n++ }
func (c *collect) Transaction(*reconstruct.Transaction) { c.n++ }
func (c *collect) Pageview(*pageview.Pageview)          { c.n++ }
