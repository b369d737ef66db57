package whatif

import (
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/synth"
)

type collector struct {
	conns []*reconstruct.Connection
	txs   []*reconstruct.Transaction
}

func (c *collector) Connection(x *reconstruct.Connection)   { c.conns = append(c.conns, x) }
func (c *collector) Transaction(x *reconstruct.Transaction) { c.txs = append(c.txs, x) }

// synthCapture generates a workload, writes it as a capture file and runs it
// through capture and reconstruct as rtmon analyze does.
func synthCapture(t *testing.T, wl synth.Workload) (*collector, []synth.TruthRecord) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "w.pcap")
	var truth []synth.TruthRecord
	err := synth.WriteFile(path, synth.Options{Nanosecond: true}, func(w *synth.Writer) error {
		_, err := synth.Generate(w, wl, func(r synth.TruthRecord) { truth = append(truth, r) })
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	src, err := capture.OpenFiles([]string{path}, capture.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out := &collector{}
	if err := reconstruct.NewTracker(reconstruct.Config{}, out).ReadFrom(src, nil); err != nil {
		t.Fatal(err)
	}
	return out, truth
}

// synthGaps is the generator's client SYN retransmission schedule.
var synthGaps = []int64{int64(time.Second), 2 * int64(time.Second), 4 * int64(time.Second)}

// injected is the time FAST SYN (and FAST SYN/ACK) with gap g must save on a
// connection whose truth shows n SYNs: every retransmission waited the
// schedule's gap and now waits g.
func injected(n int, g int64) int64 {
	var s int64
	for i := 0; i < n-1; i++ {
		s += synthGaps[i] - g
	}
	return s
}

type truthKey struct {
	client netip.AddrPort
	start  int64 // first SYN or request capture time
}

func TestEndToEndFastSYN(t *testing.T) {
	wl := synth.Workload{Seed: 11, Clients: 30, Duration: 30 * time.Second, SYNLossRate: 0.2, SYNACKLossRate: 0.1}
	recs, truth := synthCapture(t, wl)
	byKey := map[truthKey]synth.TruthRecord{}
	for _, r := range truth {
		k := truthKey{r.Client, r.ReqFirstCap}
		byKey[k] = r
	}
	d, err := NewDataset(recs.conns, recs.txs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Units() != len(truth) {
		t.Fatalf("reconstructed %d transactions, generated %d", d.Units(), len(truth))
	}
	gap := int64(200 * time.Millisecond)
	fast := eval(t, d, "IF IP.SRC == * THEN FAST SYN GAP 200ms", Options{})
	both := eval(t, d, "IF IP.SRC == * THEN FAST SYN GAP 200ms, FAST SYN/ACK GAP 200ms", Options{})
	txByID := map[string]*reconstruct.Transaction{}
	for _, x := range recs.txs {
		txByID[x.ID] = x
	}
	var synOnly, mixed, total, restarts int64
	for i, u := range both.Units {
		x := txByID[u.ID]
		tr, ok := byKey[truthKey{netip.AddrPortFrom(x.Client, x.ClientPort), x.RequestFirst}]
		if !ok {
			t.Fatalf("no truth for %s", u.ID)
		}
		want := int64(0)
		if tr.NewConn {
			want = injected(tr.SYNs, gap) + tr.WindowRestart
			restarts += b2i(tr.WindowRestart > 0)
		}
		if got := u.Measured - u.Predicted; !closeSaving(got, want, tr.WindowRestart) {
			t.Errorf("%s (%d SYNs, %d SYN/ACKs): FAST SYN+SYN/ACK saves %d, want %d", u.ID, tr.SYNs, tr.SYNACKs, got, want)
		}
		total += want
		// Without SYN/ACK losses (one SYN/ACK) every wait was a dropped SYN,
		// which FAST SYN alone recovers.
		f := fast.Units[i]
		if f.ID != u.ID {
			t.Fatal("unit order differs between replays")
		}
		if tr.NewConn && tr.SYNACKs == 1 {
			if got := f.Measured - f.Predicted; got != want {
				t.Errorf("%s (%d SYNs): FAST SYN saves %d, want %d", u.ID, tr.SYNs, got, want)
			}
			synOnly += want
		} else if tr.NewConn && tr.SYNs > 1 {
			mixed++
		}
	}
	if synOnly == 0 || mixed == 0 || restarts == 0 {
		t.Fatalf("workload too small: SYN-only saving %d, connections with SYN/ACK losses %d, window restarts %d",
			synOnly, mixed, restarts)
	}
	t.Logf("%d transactions; injected waits recovered: %v (SYN-only %v)", len(truth), time.Duration(total), time.Duration(synOnly))

	// Pageviews made from the truth: a pageview whose only losses were on its
	// container's connection gains exactly that, since everything else waited
	// for the container.
	pvs, containerOnly := truthPageviews(t, recs, truth)
	dp, err := NewDataset(recs.conns, recs.txs, pvs)
	if err != nil {
		t.Fatal(err)
	}
	// Without rules the replay reproduces every measured pageview exactly.
	for _, u := range eval(t, dp, "", Options{}).Units {
		if u.Predicted != u.Measured {
			t.Errorf("no rules: pageview %s predicted %d, measured %d", u.ID, u.Predicted, u.Measured)
		}
	}
	res := eval(t, dp, "IF IP.SRC == * THEN FAST SYN GAP 200ms, FAST SYN/ACK GAP 200ms", Options{})
	checked := 0
	for _, u := range res.Units {
		if want, ok := containerOnly[u.ID]; ok {
			checked++
			if got := u.Measured - u.Predicted; !closeSaving(got, want.wait+want.restart, want.restart) {
				t.Errorf("pageview %s: saves %d, want %d", u.ID, got, want.wait+want.restart)
			}
		}
		if u.Predicted > u.Measured {
			t.Errorf("pageview %s slower under FAST SYN: %d > %d", u.ID, u.Predicted, u.Measured)
		}
	}
	if checked == 0 {
		t.Fatal("no pageview with losses on the container connection only")
	}
	c := res.Class(DefaultClass)
	if c == nil || c.Predicted.Mean >= c.Measured.Mean || c.Measured.N != int64(len(pvs)) {
		t.Errorf("class summary: %+v", c)
	}
}

// truthPageviews groups reconstructed transactions into pageviews by the
// generator's pageview ids (setting PageviewID as the pageview stage does);
// containerOnly maps pageviews whose SYN losses
// were all on the container's connection to the expected saving.
func truthPageviews(t *testing.T, recs *collector, truth []synth.TruthRecord) ([]*pageview.Pageview, map[string]saving) {
	t.Helper()
	byKey := map[truthKey]*reconstruct.Transaction{}
	for _, x := range recs.txs {
		byKey[truthKey{netip.AddrPortFrom(x.Client, x.ClientPort), x.RequestFirst}] = x
	}
	pvByID := map[uint64]*pageview.Pageview{}
	var pvs []*pageview.Pageview
	losses := map[uint64][2]int64{} // container saving, other connections' losses
	restart := map[uint64]int64{}   // the container's window restart
	for _, r := range truth {
		x := byKey[truthKey{r.Client, r.ReqFirstCap}]
		if x == nil {
			t.Fatalf("truth without a transaction: %+v", r)
		}
		p := pvByID[r.PageviewID]
		if p == nil {
			p = &pageview.Pageview{ID: "pv" + x.ID, Client: x.Client, Class: DefaultClass, Start: x.Start, End: x.End}
			pvByID[r.PageviewID] = p
			pvs = append(pvs, p)
		}
		if r.Container {
			p.ContainerID, p.Start = x.ID, x.Start
		}
		p.End = max(p.End, x.End)
		x.PageviewID, x.Class = p.ID, DefaultClass
		l := losses[r.PageviewID]
		if r.NewConn && r.SYNs > 1 {
			if r.Container {
				l[0] = injected(r.SYNs, int64(200*time.Millisecond))
				restart[r.PageviewID] = r.WindowRestart
			} else {
				l[1]++
			}
		}
		losses[r.PageviewID] = l
	}
	containerOnly := map[string]saving{}
	for id, p := range pvByID {
		p.Total = p.End - p.Start
		if l := losses[id]; l[0] > 0 && l[1] == 0 {
			containerOnly[p.ID] = saving{wait: l[0], restart: restart[id]}
		}
	}
	return pvs, containerOnly
}

// saving is what FAST SYN and FAST SYN/ACK must save a pageview: the
// handshake waits and the container's window restart.
type saving struct{ wait, restart int64 }

// closeSaving: a saving without a window restart is exact; the restart the
// generator timed from its own send schedule, which spaces segments
// serially (segGap in synth), while the model counts round trips, so the
// two may differ by a few microseconds per segment: 1 ms covers a
// response of 80 segments.
func closeSaving(got, want, restart int64) bool {
	if restart == 0 {
		return got == want
	}
	return max(got-want, want-got) <= int64(time.Millisecond)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
