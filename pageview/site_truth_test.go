package pageview

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/synth"
)

// TestRealSiteWorkload groups browsers loading pages the way real sites
// serve them: HTML naming its objects (gzip-compressed and chunked for
// some), an undeclared favicon and a beacon after the load event,
// redirects to the container, and clients that send no Referer and move to
// their next page over their keep-alive connections, on lossy paths (lost
// ACKs and request segments before the capture point). Against the
// generator's truth: >= 98% of transactions in the right pageview,
// after-load fetches flagged and outside the Total, and pageview spans
// within max(2 ms, 2%).
func TestRealSiteWorkload(t *testing.T) {
	for _, tc := range []struct {
		name string
		wl   synth.Workload
	}{
		{"html+referer", synth.Workload{Seed: 5, Clients: 30, Duration: 60 * time.Second, PageviewsPerClient: 5,
			HTML: true, GzipRate: 0.5, AfterLoad: true, Redirects: 0.2, IPID: synth.IPIDPerConn}},
		{"no-referer keep-alive", synth.Workload{Seed: 6, Clients: 30, Duration: 60 * time.Second, PageviewsPerClient: 8,
			HTML: true, GzipRate: 0.5, AfterLoad: true, NoRefererRate: 1, IPID: synth.IPIDPerConn}},
		{"lossy", synth.Workload{Seed: 7, Clients: 30, Duration: 60 * time.Second, PageviewsPerClient: 5,
			HTML: true, GzipRate: 0.5, AfterLoad: true, Redirects: 0.2, NoRefererRate: 0.3, IPID: synth.IPIDPerConn,
			SYNLossRate: 0.05, DataLossRate: 0.02, AckLossRate: 0.02, UpstreamLossRate: 0.02}},
		// An overloaded server drops SYNs: objects wait seconds to connect,
		// longer than the Grouper's idle gap and settle time together.
		{"syn drops", synth.Workload{Seed: 8, Clients: 30, Duration: 60 * time.Second, PageviewsPerClient: 4,
			HTML: true, GzipRate: 0.5, AfterLoad: true, NoRefererRate: 0.3, IPID: synth.IPIDPerConn,
			SYNLossRate: 0.6, ServerTime: [2]time.Duration{200 * time.Millisecond, 5 * time.Second}}},
	} {
		t.Run(tc.name, func(t *testing.T) { siteTruth(t, tc.wl) })
	}
}

func siteTruth(t *testing.T, wl synth.Workload) {
	path := filepath.Join(t.TempDir(), "site.pcap")
	var truth []synth.TruthRecord
	if err := synth.WriteFile(path, synth.Options{Nanosecond: true}, func(w *synth.Writer) error {
		_, err := synth.Generate(w, wl, func(r synth.TruthRecord) { truth = append(truth, r) })
		return err
	}); err != nil {
		t.Fatal(err)
	}
	out, g := groupFile(t, path, false, nil)

	type key struct {
		client netip.AddrPort
		last   int64
	}
	got := map[key]*reconstruct.Transaction{}
	for _, tx := range out.txs {
		got[key{netip.AddrPortFrom(tx.Client, tx.ClientPort), tx.RequestLast}] = tx
	}
	if len(out.txs) != len(truth) {
		t.Errorf("transactions: %d, truth %d", len(out.txs), len(truth))
	}
	pages := synth.Pageviews(truth)
	var wrong, afterWrong, total, spanBad, after int
	var errs []float64
	for _, p := range pages {
		var cont *reconstruct.Transaction
		for _, m := range p.Members {
			if m.Container {
				cont = got[key{m.Client, m.ReqLastCap}]
			}
		}
		if cont == nil {
			t.Errorf("truth page %d (%s): container not found", p.PageviewID, p.URL)
			continue
		}
		id := out.tags[cont.ID].PageviewID
		for _, m := range p.Members {
			total++
			tx := got[key{m.Client, m.ReqLastCap}]
			if tx == nil {
				wrong++
				continue
			}
			if out.tags[tx.ID].PageviewID != id {
				wrong++
				if wrong <= 5 {
					other := out.byID[out.tags[tx.ID].PageviewID]
					desc := "none"
					if other != nil {
						desc = fmt.Sprintf("%s starting %+.1f ms from the truth page", other.URL, float64(other.Start-p.Start)/1e6)
					}
					t.Logf("%s %s (truth page %d %s, after-load %v, redirect %v, start %+.1f ms from its page, page span %v, tx end %+.1f ms) in pageview %s",
						m.Client, m.URL, p.PageviewID, p.URL, m.AfterLoad, m.Redirect, float64(tx.Start-p.Start)/1e6, time.Duration(p.End-p.Start), float64(tx.End-p.Start)/1e6, desc)
				}
			}
			if m.AfterLoad {
				after++
			}
			if m.AfterLoad != (tx.Flags&reconstruct.FlagAfterLoad != 0) {
				afterWrong++
				if afterWrong <= 5 {
					t.Logf("%s %s: after-load %v, flags %v", m.Client, m.URL, m.AfterLoad, tx.Flags)
				}
			}
		}
		pv := out.byID[id]
		if pv == nil {
			t.Errorf("pageview %s of truth page %d: no record", id, p.PageviewID)
			continue
		}
		want := p.End - p.Start
		d := pv.Total - want
		errs = append(errs, float64(abs(d))/float64(max(want, 1)))
		if abs(d) > max(2*int64(time.Millisecond), want/50) || abs(pv.Start-p.Start) > max(2*int64(time.Millisecond), want/50) {
			spanBad++
			if spanBad <= 5 {
				t.Logf("pageview %s %s: start %+.3f ms, total %v, truth %v (evidence %s, %d objects, %d after load)", id, pv.URL,
					float64(pv.Start-p.Start)/1e6, time.Duration(pv.Total), time.Duration(want), pv.Evidence, pv.Objects, pv.AfterLoad)
			}
		}
		if pv.Evidence != "html" {
			t.Errorf("pageview %s: evidence %q with the HTML captured", id, pv.Evidence)
		}
	}
	slices.Sort(errs)
	s := g.Stats()
	t.Logf("%d pages, %d transactions (%d after load): %d in the wrong pageview, %d after-load verdicts wrong, %d spans off; pageview error median %.2f%% p95 %.2f%%; stats %+v",
		len(pages), total, after, wrong, afterWrong, spanBad, 100*errs[len(errs)/2], 100*errs[len(errs)*95/100], s)
	if after == 0 {
		t.Error("the workload has no after-load fetches: the test proves nothing about them")
	}
	if float64(wrong) > 0.02*float64(total) {
		t.Errorf("%d of %d transactions in the wrong pageview (bound 2%%)", wrong, total)
	}
	if float64(afterWrong) > 0.02*float64(total) {
		t.Errorf("%d of %d after-load verdicts wrong (bound 2%%)", afterWrong, total)
	}
	if p95 := errs[len(errs)*95/100]; p95 > 0.05 {
		t.Errorf("pageview error p95 %.1f%% > 5%%", 100*p95)
	}
}
