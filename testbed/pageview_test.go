package testbed

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"
)

// rtmonPageview is the part of pageview.Pageview (pageviews.jsonl) used here.
type rtmonPageview struct {
	Client    string `json:"client"`
	URL       string `json:"url"`
	Start     int64  `json:"start"`
	End       int64  `json:"end"`
	Total     int64  `json:"total_ns"`
	Objects   int    `json:"objects"`
	SYNLosses int    `json:"syn_losses"`
}

// rtmonTxnTimes adds the absolute times of a transaction.
type rtmonTxnTimes struct {
	rtmonTxn
	Start        int64 `json:"start"`
	End          int64 `json:"end"`
	RequestFirst int64 `json:"request_first"`
	RTTClient    int64 `json:"rtt_client_ns"`
}

// Tolerances. Pageviews (the acceptance bound): the median error of
// rtmon's pageview total against the browser's must be within
// max(10 ms, 2 %), the 95th percentile within 5 % of the browser's total.
// Objects: at least 95 % of transactions within max(10 ms, 10 %) of the
// client's own duration for them. A single object is short and carries the
// browser's scheduling jitter whole, and with link loss some errors are
// beyond any server-side monitor: a request segment lost before the capture
// point leaves no trace, its retransmission looks like a late request.
// Chromium objects are compared from the request on (see compareObjects),
// and with a wider bound, at least 90 % within max(20 ms, 15 %): Resource
// Timing stamps responseEnd when the data has passed from Chromium's
// network service to the renderer, which adds browser-internal delays no
// packet shows (seen: four images of one page all ~55 ms late together,
// while the Go client's objects on the same link stay within 3 ms).
const (
	pvMedianFloor = 10 * time.Millisecond
	pvMedianRel   = 0.02
	pvP95Rel      = 0.05
	objFloor      = 10 * time.Millisecond
	objRel        = 0.10
	objOutliers   = 0.05

	chromeObjFloor    = 20 * time.Millisecond
	chromeObjRel      = 0.15
	chromeObjOutliers = 0.10
)

// TestPageviewsMatchChromium loads generated pages in headless Chromium and
// the Go client over the emulated link, captures at the server, runs rtmon
// on the capture and compares its transactions and pageviews with what the
// clients measured themselves.
func TestPageviewsMatchChromium(t *testing.T) {
	needChromium(t)
	bin, err := buildRtmon()
	if err != nil {
		t.Fatalf("rtmon is not buildable: %v", err)
	}
	for _, name := range []string{"baseline", "mixed-rtt", "syn-drops", "data-loss"} {
		t.Run(name, func(t *testing.T) {
			res, out := runAndAnalyze(t, bin, name, 6)
			txns := readJSONL[rtmonTxnTimes](t, filepath.Join(out, "transactions.jsonl"))
			compareObjects(t, res.Truth, txns)
			comparePageviews(t, "composed from rtmon transactions", res.Truth, composePageviews(res.Truth, txns))
			pvPath := filepath.Join(out, "pageviews.jsonl")
			if _, err := os.Stat(pvPath); errors.Is(err, fs.ErrNotExist) {
				t.Errorf("rtmon analyze wrote no pageviews.jsonl (pageview output not wired into analyze yet)")
				return
			}
			comparePageviews(t, "rtmon pageviews.jsonl", res.Truth, readJSONL[rtmonPageview](t, pvPath))
		})
	}
}

// needChromium installs Debian's chromium (and ethtool, for the link) if
// missing: these tests never skip.
func needChromium(t *testing.T) {
	t.Helper()
	needPackage(t, ChromiumPath, "chromium")
	needPackage(t, "/usr/sbin/ethtool", "ethtool")
}

// needPackage installs Debian package pkg with apt-get when bin is missing.
func needPackage(t *testing.T, bin, pkg string) {
	t.Helper()
	if _, err := os.Stat(bin); err == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, args := range [][]string{{"update", "-q"}, {"install", "-y", "-q", pkg}} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("apt-get %v: %v\n%s", args, err, b)
		}
	}
}

func keepCapture(t *testing.T, pcap string) {
	if *keepDir == "" {
		return
	}
	b, err := os.ReadFile(pcap)
	if err == nil {
		err = os.WriteFile(filepath.Join(*keepDir, filepath.Base(filepath.Dir(t.Name()))+"-"+filepath.Base(t.Name())+".pcap"), b, 0o644)
	}
	if err == nil {
		b, err = os.ReadFile(filepath.Join(filepath.Dir(pcap), "truth.json"))
		if err == nil {
			err = os.WriteFile(filepath.Join(*keepDir, filepath.Base(t.Name())+"-truth.json"), b, 0o644)
		}
	}
	if err != nil {
		t.Errorf("keep capture: %v", err)
	}
}

// checkScenarioHarness checks the run itself, before rtmon: every load
// happened, the capture is complete, the link and drops did what the
// scenario says.
func checkScenarioHarness(t *testing.T, sc Scenario, res ScenarioResult) {
	t.Helper()
	if len(res.Truth) != len(sc.Loads)+len(sc.Concurrent) {
		t.Errorf("%d page loads recorded, scenario has %d", len(res.Truth), len(sc.Loads)+len(sc.Concurrent))
	}
	if res.Dropped != 0 {
		t.Errorf("tcpdump dropped %d packets", res.Dropped)
	}
	b := res.Bridge
	if b.SendErrors != [2]int64{} || b.QueueDrops != [2]int64{} {
		t.Errorf("bridge: %+v: want no send errors or queue drops", b)
	}
	if (sc.Link.Loss > 0) != (b.Lost[0]+b.Lost[1] > 0) {
		t.Errorf("bridge lost %v frames with loss %v", b.Lost, sc.Link.Loss)
	}
	w, err := readWire(res.Capture)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.foreignIPs) > 0 {
		t.Errorf("capture has addresses outside the documentation ranges: %v", w.foreignIPs)
	}
	for _, p := range res.Truth {
		n := len(p.Objects)
		t.Logf("%s %s %s: total %v (load event %v), %d objects", p.Source, p.Client, p.URL,
			time.Duration(p.TotalNS), time.Duration(p.LoadEventNS), n)
		if p.TotalNS <= 0 || p.Start == 0 {
			t.Errorf("%s %s: no usable truth: %+v", p.Source, p.URL, p)
		}
	}
	if sc.DropSYNMod > 0 {
		if res.NFTDrops == 0 {
			t.Errorf("nft dropped no SYN")
		}
		if !secondConnLostSYN(w, res.Truth) {
			t.Errorf("no Chromium pageview whose second connection lost a SYN")
		}
	}
}

// secondConnLostSYN reports whether some Chromium pageview's second
// connection (by first SYN) shows a retransmitted SYN. Scenario syn-drops
// uses one client address, so the client port identifies a connection.
func secondConnLostSYN(w *wire, truth []PageTruth) bool {
	for _, p := range truth {
		if p.Source != BrowserChromium {
			continue
		}
		var conns []*wireConn
		for _, c := range w.conns {
			// Chromium may open the container's connection, and a spare
			// one, a little before navigation timing starts.
			if len(c.syns) > 0 && c.syns[0].UnixNano() >= p.Start-int64(200*time.Millisecond) && c.syns[0].UnixNano() <= p.End {
				conns = append(conns, c)
			}
		}
		sort.Slice(conns, func(i, j int) bool { return conns[i].syns[0].Before(conns[j].syns[0]) })
		if len(conns) >= 2 && len(conns[1].syns) >= 2 {
			return true
		}
	}
	return false
}

// objKey identifies one fetch: client address and path with query.
type objKey struct{ client, url string }

// matchObjects pairs every fetch in the truth with rtmon's transaction for
// it: per client and URL, the n-th fetch in time with the n-th transaction.
func matchObjects(truth []PageTruth, txns []rtmonTxnTimes) map[*ObjectTruth]*rtmonTxnTimes {
	byKey := map[objKey][]*rtmonTxnTimes{}
	for i := range txns {
		x := &txns[i]
		k := objKey{x.Client, pathOf(x.URL)}
		byKey[k] = append(byKey[k], x)
	}
	for _, xs := range byKey {
		sort.Slice(xs, func(i, j int) bool { return xs[i].Start < xs[j].Start })
	}
	want := map[objKey][]*ObjectTruth{}
	for i := range truth {
		p := &truth[i]
		want[objKey{p.Client, p.Container.URL}] = append(want[objKey{p.Client, p.Container.URL}], &p.Container)
		for j := range p.Objects {
			o := &p.Objects[j]
			want[objKey{p.Client, o.URL}] = append(want[objKey{p.Client, o.URL}], o)
		}
	}
	m := map[*ObjectTruth]*rtmonTxnTimes{}
	for k, os := range want {
		sort.Slice(os, func(i, j int) bool { return os[i].RequestStart < os[j].RequestStart })
		xs := byKey[k]
		for i, o := range os {
			if i < len(xs) {
				m[o] = xs[i]
			}
		}
	}
	return m
}

// clientDuration is what the client measured for one fetch, in the terms of
// rtmon's transaction: from connect start on a fresh connection (rtmon's
// Tconn > 0), else from the request start, to the last byte.
func clientDuration(o *ObjectTruth, x *rtmonTxnTimes) time.Duration {
	if x.Tconn > 0 && o.ConnectStart != 0 && !o.Reused {
		return time.Duration(o.ResponseEnd - o.ConnectStart)
	}
	return time.Duration(o.ResponseEnd - o.RequestStart)
}

func rtmonDuration(x *rtmonTxnTimes) time.Duration {
	if x.Tconn > 0 {
		return time.Duration(x.Total)
	}
	return time.Duration(x.Trequest + x.Tserver + x.Ttransfer)
}

// compareObjects checks every fetch against rtmon's transaction.
func compareObjects(t *testing.T, truth []PageTruth, txns []rtmonTxnTimes) {
	t.Helper()
	m := matchObjects(truth, txns)
	errs := map[string][]time.Duration{}
	outliers := map[string]int{}
	for pi := range truth {
		p := &truth[pi]
		all := []*ObjectTruth{&p.Container}
		for j := range p.Objects {
			all = append(all, &p.Objects[j])
		}
		for _, o := range all {
			x := m[o]
			name := fmt.Sprintf("%s %s %s", p.Source, p.Client, o.URL)
			if x == nil {
				t.Errorf("%s: no rtmon transaction", name)
				continue
			}
			if x.Status != 200 {
				t.Errorf("%s: rtmon status %d", name, x.Status)
			}
			cd, rd := clientDuration(o, x), rtmonDuration(x)
			if p.Source == BrowserChromium || (x.Tconn > 0) != (!o.Reused && o.ConnectStart != 0) {
				// Chromium binds a request to whichever socket is ready
				// first (late binding): the connect timing in its Resource
				// Timing may belong to a connection started for another
				// request or as a spare, which is then reported as reused
				// though on the wire it carries its first request after an
				// idle gap (rtmon's Trequest). Only the part from the
				// request on is unambiguous: compare that, with the
				// request's client send time estimated as half an RTT
				// before the capture saw its first byte.
				cd = time.Duration(o.ResponseEnd - o.RequestStart)
				rd = time.Duration(x.End - (x.RequestFirst - x.RTTClient/2))
			}
			d := rd - cd
			errs[p.Source] = append(errs[p.Source], d)
			floor, rel := objFloor, objRel
			if p.Source == BrowserChromium {
				floor, rel = chromeObjFloor, chromeObjRel
			}
			if tol := max(floor, time.Duration(rel*float64(cd))); d.Abs() > tol {
				outliers[p.Source]++
				t.Logf("%s (port %d #%d): rtmon %v (tconn %v trequest %v tserver %v ttransfer %v), client %v (reused %v): off by %v (tolerance %v)",
					name, x.ClientPort, x.Index, rd, time.Duration(x.Tconn), time.Duration(x.Trequest), time.Duration(x.Tserver),
					time.Duration(x.Ttransfer), cd, o.Reused, d, tol)
			}
		}
	}
	for src, e := range errs {
		t.Logf("objects %s: %s; %d outside tolerance", src, errStats(e), outliers[src])
		floor, rel, frac := objFloor, objRel, objOutliers
		if src == BrowserChromium {
			floor, rel, frac = chromeObjFloor, chromeObjRel, chromeObjOutliers
		}
		if float64(outliers[src]) > frac*float64(len(e)) {
			t.Errorf("objects %s: %d of %d outside max(%v, %.0f%%), more than %.0f%%", src, outliers[src], len(e),
				floor, 100*rel, 100*frac)
		}
	}
}

// composePageviews builds, from rtmon's transactions alone, the pageview
// each truth page corresponds to: the container's start to the last end of
// its objects. It shows how far transaction timing carries before the
// pageview stage's own grouping is involved.
func composePageviews(truth []PageTruth, txns []rtmonTxnTimes) []rtmonPageview {
	m := matchObjects(truth, txns)
	var out []rtmonPageview
	for i := range truth {
		p := &truth[i]
		c := m[&p.Container]
		if c == nil {
			continue
		}
		pv := rtmonPageview{Client: p.Client, URL: c.URL, Start: c.Start, End: c.End, Objects: len(p.Objects)}
		for j := range p.Objects {
			if x := m[&p.Objects[j]]; x != nil {
				pv.End = max(pv.End, x.End)
			}
		}
		pv.Total = pv.End - pv.Start
		out = append(out, pv)
	}
	return out
}

// comparePageviews matches each page load to a pageview (client address,
// container URL, n-th in time) and checks the totals.
func comparePageviews(t *testing.T, src string, truth []PageTruth, pvs []rtmonPageview) {
	t.Helper()
	byKey := map[objKey][]rtmonPageview{}
	for _, pv := range pvs {
		k := objKey{pv.Client, pathOf(pv.URL)}
		byKey[k] = append(byKey[k], pv)
	}
	for _, v := range byKey {
		sort.Slice(v, func(i, j int) bool { return v[i].Start < v[j].Start })
	}
	seen := map[objKey]int{}
	type pair struct {
		truth PageTruth
		pv    rtmonPageview
	}
	bySrc := map[string][]pair{}
	sorted := slices.Clone(truth)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Start < sorted[j].Start })
	for _, p := range sorted {
		k := objKey{p.Client, p.URL}
		n := seen[k]
		seen[k]++
		if n >= len(byKey[k]) {
			t.Errorf("%s: no pageview for %s load of %s from %s (#%d)", src, p.Source, p.URL, p.Client, n)
			continue
		}
		pv := byKey[k][n]
		bySrc[p.Source] = append(bySrc[p.Source], pair{p, pv})
		if pv.Objects != len(p.Objects) {
			t.Errorf("%s: %s %s: %d objects, the client fetched %d", src, p.Source, p.URL, pv.Objects, len(p.Objects))
		}
	}
	for s, ps := range bySrc {
		var abs []time.Duration
		var rel []float64
		var truthTotals []time.Duration
		for _, pr := range ps {
			d := time.Duration(pr.pv.Total - pr.truth.TotalNS)
			abs = append(abs, d)
			rel = append(rel, math.Abs(float64(d))/float64(pr.truth.TotalNS))
			truthTotals = append(truthTotals, time.Duration(pr.truth.TotalNS))
			t.Logf("%s %s %s %s: rtmon %v, client %v, error %v", src, s, pr.truth.Client, pr.truth.URL,
				time.Duration(pr.pv.Total), time.Duration(pr.truth.TotalNS), d)
		}
		med := pctDur(absAll(abs), 0.5)
		allow := max(pvMedianFloor, time.Duration(pvMedianRel*float64(pctDur(truthTotals, 0.5))))
		p95 := pct(rel, 0.95)
		t.Logf("pageviews %s %s: %s; relative p95 %.1f%%", src, s, errStats(abs), 100*p95)
		if med > allow {
			t.Errorf("%s %s: median pageview error %v > %v", src, s, med, allow)
		}
		if p95 > pvP95Rel {
			t.Errorf("%s %s: 95th percentile pageview error %.1f%% > %.0f%%", src, s, 100*p95, 100*pvP95Rel)
		}
	}
}

func absAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Abs()
	}
	return out
}

// errStats: n, median, p95 and max of the absolute errors, and the mean
// signed error (bias).
func errStats(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n=0"
	}
	a := absAll(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return fmt.Sprintf("n=%d |err| median %v p95 %v max %v, mean signed %v", len(ds),
		pctDur(a, 0.5).Round(10*time.Microsecond), pctDur(a, 0.95).Round(10*time.Microsecond),
		pctDur(a, 1).Round(10*time.Microsecond), (sum / time.Duration(len(ds))).Round(10*time.Microsecond))
}

// pctDur is the nearest-rank percentile.
func pctDur(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func pct(v []float64, q float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// TestScenariosRun runs the scenarios the Chromium comparison does not
// cover and checks what each is for: lost SYN/ACKs show in rtmon's
// connections, pipelined requests share one connection and their pageviews
// match the raw client's clock, and an overloaded server still completes
// every load. Their pageview error distributions are logged.
func TestScenariosRun(t *testing.T) {
	needChromium(t)
	bin, err := buildRtmon()
	if err != nil {
		t.Fatalf("rtmon is not buildable: %v", err)
	}
	for _, name := range []string{"synack-loss", "keepalive-pipelining", "overloaded"} {
		t.Run(name, func(t *testing.T) {
			res, out := runAndAnalyze(t, bin, name, 3)
			conns := readJSONL[rtmonConn](t, filepath.Join(out, "connections.jsonl"))
			txns := readJSONL[rtmonTxnTimes](t, filepath.Join(out, "transactions.jsonl"))
			switch name {
			case "synack-loss":
				lost := 0
				for _, c := range conns {
					lost += c.SYNACKLosses
				}
				if res.NFTDrops == 0 || lost == 0 {
					t.Errorf("link dropped %d SYN/ACKs, rtmon reports %d SYN/ACK losses; want both > 0", res.NFTDrops, lost)
				}
			case "keepalive-pipelining":
				reqs := 0
				for _, p := range res.Truth {
					reqs += 1 + len(p.Objects)
				}
				if len(conns) != len(res.Truth) || len(txns) != reqs {
					t.Errorf("rtmon: %d connections, %d transactions; the client made %d connections, %d requests",
						len(conns), len(txns), len(res.Truth), reqs)
				}
			}
			if _, err := os.Stat(filepath.Join(out, "pageviews.jsonl")); err != nil {
				t.Errorf("rtmon analyze wrote no pageviews.jsonl: %v", err)
				return
			}
			pvs := readJSONL[rtmonPageview](t, filepath.Join(out, "pageviews.jsonl"))
			if name == "overloaded" {
				// Logged, not asserted yet: what rtmon can know about
				// accept-queue overflow is still open (see the report).
				logPageviewErrors(t, res.Truth, pvs)
				return
			}
			comparePageviews(t, "rtmon pageviews.jsonl", res.Truth, pvs)
		})
	}
}

// logPageviewErrors logs the distribution comparePageviews would check.
func logPageviewErrors(t *testing.T, truth []PageTruth, pvs []rtmonPageview) {
	byKey := map[objKey][]rtmonPageview{}
	for _, pv := range pvs {
		k := objKey{pv.Client, pathOf(pv.URL)}
		byKey[k] = append(byKey[k], pv)
	}
	for _, v := range byKey {
		sort.Slice(v, func(i, j int) bool { return v[i].Start < v[j].Start })
	}
	sorted := slices.Clone(truth)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Start < sorted[j].Start })
	seen := map[objKey]int{}
	var errs []time.Duration
	for _, p := range sorted {
		k := objKey{p.Client, p.URL}
		n := seen[k]
		seen[k]++
		if n < len(byKey[k]) {
			errs = append(errs, time.Duration(byKey[k][n].Total-p.TotalNS))
		}
	}
	t.Logf("pageviews (not asserted): %d of %d matched; %s", len(errs), len(truth), errStats(errs))
}

// runAndAnalyze runs a named scenario with n pageviews per client on a
// fresh testbed, checks the harness itself, keeps the capture as an
// artifact and returns the result with the directory rtmon analyze wrote.
func runAndAnalyze(t *testing.T, bin, name string, n int) (ScenarioResult, string) {
	t.Helper()
	sc, err := NamedScenario(name, n)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tb := New(t, sc.Options())
	res, err := RunScenario(ctx, tb, sc)
	if err != nil {
		t.Fatal(err)
	}
	keepCapture(t, res.Capture)
	checkScenarioHarness(t, sc, res)
	out := t.TempDir()
	actx, acancel := context.WithTimeout(ctx, 30*time.Second)
	defer acancel()
	if b, err := exec.CommandContext(actx, bin, "analyze", "--out", out, res.Capture).CombinedOutput(); err != nil {
		t.Fatalf("rtmon analyze: %v\n%s", err, b)
	}
	return res, out
}
