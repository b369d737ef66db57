package testbed

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// rtmonTxnRec is a transactions.jsonl record. Fields rtmon may not write
// yet decode to their zero value.
type rtmonTxnRec struct {
	ID           string   `json:"id"`
	ConnectionID string   `json:"connection_id"`
	Client       string   `json:"client"`
	ClientPort   int      `json:"client_port"`
	Index        int      `json:"index"`
	Method       string   `json:"method"`
	URL          string   `json:"url"`
	Status       int      `json:"status"`
	Start        int64    `json:"start"`
	End          int64    `json:"end"`
	Total        int64    `json:"total_ns"`
	Tconn        int64    `json:"tconn_ns"`
	Ttls         int64    `json:"ttls_ns"`
	Trequest     int64    `json:"trequest_ns"`
	Tserver      int64    `json:"tserver_ns"`
	Ttransfer    int64    `json:"ttransfer_ns"`
	RTTClient    int64    `json:"rtt_client_ns"`
	RequestFirst int64    `json:"request_first"`
	PageviewID   string   `json:"pageview_id"`
	Flags        []string `json:"flags"`
}

func (x *rtmonTxnRec) has(flag string) bool { return slices.Contains(x.Flags, flag) }

// rtmonPV is a pageviews.jsonl record. AfterLoad, Redirects and Evidence
// are new (nil or "" while rtmon does not write them).
type rtmonPV struct {
	ID          string   `json:"id"`
	Client      string   `json:"client"`
	URL         string   `json:"url"`
	ContainerID string   `json:"container_id"`
	Start       int64    `json:"start"`
	End         int64    `json:"end"`
	Total       int64    `json:"total_ns"`
	Tconn       int64    `json:"tconn_ns"`
	Tserver     int64    `json:"tserver_ns"`
	Ttransfer   int64    `json:"ttransfer_ns"`
	Tother      int64    `json:"tother_ns"`
	Objects     int      `json:"objects"`
	AfterLoad   *int     `json:"after_load"`
	Redirects   *int     `json:"redirects"`
	Evidence    string   `json:"evidence"`
	Flags       []string `json:"flags"`
}

// Acceptance bounds (truth: the client's wire).
//   - Transactions: at least txnWithin of them within max(txnFloor,
//     txnRel x truth) of the wire's total.
//   - Pageviews, per browser and Referer group: median |error| at most
//     max(pvMedianFloor, pvMedianRel x median truth total), 95th
//     percentile of the relative error at most pvP95Rel over all
//     scenarios, and per scenario over all its groups and both runs
//     (quiet and busy). One run holds a dozen pageviews per group, whose 95th
//     percentile is their worst: there the share within pvP95Rel must
//     not be unlikely (binomial test, flagSignificance) for an estimator
//     that meets the bound. A lossy path has events no capture can tell
//     apart (a tail ACK lost and the first resend lost, or the tail lost
//     and the ACK of its resend lost: the same packets at the capture
//     point, 390 ms apart at the client), and one of them in a run is
//     not a fault; several are.
//   - Objects (in load and after load): at least memberWithin in the
//     pageview holding their page's container, after-load ones (only
//     they) flagged after_load.
const (
	txnFloor      = 2 * time.Millisecond
	txnRel        = 0.05
	txnWithin     = 0.97
	pvMedianFloor = 10 * time.Millisecond
	pvMedianRel   = 0.02
	pvP95Rel      = 0.05
	memberWithin  = 0.98
	// flagRecall: share of the transactions the wire shows with an
	// upstream request loss or a duplicate response arrival that rtmon
	// must flag upstream_loss or spurious_retrans.
	flagRecall = 0.90
	// flagPrecision: share of rtmon's upstream_loss flags the wire
	// confirms (a flag costs the SRE a wrong explanation).
	flagPrecision = 0.90
	// flagSignificance: a run has only a handful of these events, so a
	// rate fails when the count seen is unlikely (one-sided binomial test)
	// for a flagger as good as the bound, not when one event is missed.
	flagSignificance = 0.01
	// ownClockMedian bounds loosely, on scenario runs without the CPU
	// hog, how far the Go clients' own clocks may be from the wire: a
	// check that the wire truth went to the right requests (a wrong match
	// is off by a round trip, 20 ms or more, on most requests). Only the
	// median: the clients share the CPUs with Chromium and are not
	// real-time, so on a busy machine a tail of their clock readings lags
	// by whatever the scheduler decides (p95 40-210 ms seen beside other
	// builds); the tail is logged. TestWireTruthMatchesGoClient is the
	// strict check.
	ownClockMedian = 5 * time.Millisecond
	ownClockMax    = 20 * time.Millisecond // logged beyond this
)

// TestScenarios runs every named scenario twice, on a quiet machine and
// beside a CPU hog pinned to one core, captures at the server and at the
// client, and compares rtmon's analysis of the server capture with the
// truth from the client's wire (ReadClientWire, AttachWireTruth). The
// same assertions hold for both runs: the truth is kernel timestamps, so
// how busy the machine is may change the traffic but never the truth.
func TestScenarios(t *testing.T) {
	needChromium(t)
	needPackage(t, "/usr/bin/taskset", "util-linux")
	bin, err := buildRtmon()
	if err != nil {
		t.Fatalf("rtmon is not buildable: %v", err)
	}
	all := &acceptance{whole: true}
	for _, name := range ScenarioNames {
		t.Run(name, func(t *testing.T) {
			scenario := &acceptance{}
			for _, hog := range []bool{false, true} {
				run := "clean"
				if hog {
					run = "hog"
				}
				t.Run(run, func(t *testing.T) {
					start := time.Now()
					a := &acceptance{}
					for attempt := 1; ; attempt++ {
						a.merge(runScenarioTest(t, bin, name, hog))
						if a.judgedEnough() {
							break
						}
						if attempt == maxScenarioRuns {
							t.Errorf("testbed: after %d runs (%d of them set aside: a client's load failed on the network), link off spec for %d of %d transactions and %d of %d pageviews (the machine was too busy to judge rtmon), or a lossy link showed %d request retransmissions and %d duplicate response bytes (want both)",
								attempt, a.aborted, a.txnAll-a.txnN, a.txnAll, a.pvAll-a.pvN, a.pvAll, a.lossEvents[0], a.lossEvents[1])
							break
						}
						t.Logf("link off spec for more than %.0f%% of what this run held (the VM's vCPUs were taken), or no request retransmission or duplicate response bytes yet on a lossy link: running again", 100*linkOffSpec)
					}
					a.report(t, fmt.Sprintf("%s/%s", name, run), true)
					scenario.merge(a)
					all.merge(a)
					t.Logf("%s/%s took %v", name, run, time.Since(start).Round(100*time.Millisecond))
				})
			}
			scenario.reportPooledTail(t, name)
		})
	}
	all.report(t, "all scenarios", true)
}

// runScenarioTest runs one scenario on a fresh testbed, checks the harness
// and compares rtmon's records with the wire truth.
func runScenarioTest(t *testing.T, bin, name string, hog bool) *acceptance {
	t.Helper()
	sc, err := NamedScenario(name, 0)
	if err != nil {
		t.Fatal(err)
	}
	sc.CPUHog = hog
	ctx := testContext(t)
	tb := New(t, sc.Options())
	res, err := RunScenario(ctx, tb, sc)
	if ClientNetworkFailure(err) {
		// A client's request failed on the network: the run has no
		// complete truth, so it is diagnosed here and made up by another.
		t.Logf("a client's load failed on the network, run set aside: %v", err)
		for _, l := range DiagnoseFailure(res, res.ServerErrorLog, err) {
			t.Logf("  %s", l)
		}
		return &acceptance{aborted: 1}
	}
	if err != nil {
		t.Fatal(err)
	}
	keepCapture(t, res)
	srv, err := ReadClientWire(res.Capture)
	if err != nil {
		t.Fatalf("server capture: %v", err)
	}
	lossEvents := checkScenarioHarness(t, sc, res, srv)
	link := checkLink(t, sc, res)
	checkWireAgainstClients(t, res, !hog)
	out := t.TempDir()
	if b, err := exec.CommandContext(ctx, bin, "analyze", "--out", out, res.Capture).CombinedOutput(); err != nil {
		t.Fatalf("rtmon analyze: %v\n%s", err, b)
	}
	a := compareWithRtmon(t, sc, res, srv, link, out)
	a.lossNeeded, a.lossEvents = sc.Link.Loss > 0, lossEvents
	return a
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

// keepCapture copies the run's captures and truth into -testbed.keep.
func keepCapture(t *testing.T, res ScenarioResult) {
	if *keepDir == "" {
		return
	}
	name := strings.ReplaceAll(strings.TrimPrefix(t.Name(), "TestScenarios/"), "/", "-")
	// Every run is kept: a scenario runs again when the machine was busy,
	// and a repeated -count run is how a rare miss is caught.
	for n := 2; ; n++ {
		if _, err := os.Stat(filepath.Join(*keepDir, name+".pcap")); err != nil {
			break
		}
		name = fmt.Sprintf("%s-%d", strings.TrimSuffix(name, fmt.Sprintf("-%d", n-1)), n)
	}
	t.Logf("capture kept as %s", filepath.Join(*keepDir, name+".pcap"))
	dir := filepath.Dir(res.Capture)
	for src, dst := range map[string]string{
		res.Capture:                      name + ".pcap",
		res.ClientCapture:                name + "-client.pcap",
		filepath.Join(dir, "truth.json"): name + "-truth.json",
		filepath.Join(dir, "wire.json"):  name + "-wire.json",
	} {
		b, err := os.ReadFile(src)
		if err == nil {
			err = os.WriteFile(filepath.Join(*keepDir, dst), b, 0o644)
		}
		if err != nil {
			t.Errorf("keep capture: %v", err)
		}
	}
}

// checkScenarioHarness checks the run itself, before rtmon: every load
// happened and has wire truth, both captures are complete and hold only
// documentation addresses, the link and drops did what the scenario says,
// and every client transaction on the wire belongs to a page. It returns
// the request retransmissions and duplicate response bytes the wire
// showed, which a lossy scenario needs (acceptance.lossEvents).
func checkScenarioHarness(t *testing.T, sc Scenario, res ScenarioResult, srv *ClientWire) (lossEvents [2]int) {
	t.Helper()
	if len(res.Truth) != sc.Loads() {
		t.Errorf("%d page loads recorded, scenario has %d", len(res.Truth), sc.Loads())
	}
	if res.Dropped != 0 || res.ClientDropped != 0 {
		t.Errorf("tcpdump dropped %d packets at the server, %d at the client", res.Dropped, res.ClientDropped)
	}
	b := res.Bridge
	if b.SendErrors != [2]int64{} || b.QueueDrops != [2]int64{} {
		t.Errorf("bridge: %+v: want no send errors or queue drops", b)
	}
	if sc.Link.Loss > 0 && (b.Lost[ToServer] == 0 || b.Lost[ToClient] == 0) {
		t.Errorf("bridge lost %v frames with loss %v in both directions", b.Lost, sc.Link.Loss)
	}
	if sc.Link.Loss == 0 && b.Lost != [2]int64{} {
		t.Errorf("bridge lost %v frames without loss", b.Lost)
	}
	for _, w := range []*ClientWire{res.Wire, srv} {
		if len(w.ForeignIPs) > 0 {
			t.Errorf("capture has addresses outside the documentation ranges: %v", w.ForeignIPs)
		}
		for _, c := range w.Conns {
			if c.Err != "" {
				t.Errorf("%s:%d: %s", c.Client, c.ClientPort, c.Err)
			}
		}
	}
	if res.ClientCaptured != res.Wire.Packets {
		t.Errorf("client tcpdump says %d packets captured, file has %d", res.ClientCaptured, res.Wire.Packets)
	}
	for _, u := range res.Unattributed {
		t.Errorf("wire transaction of no page: %s:%d #%d %s %s", u.Client, u.Port, u.Index, u.Method, u.URL)
	}
	kinds := map[string]int{}
	for i := range res.Truth {
		p := &res.Truth[i]
		pw := p.Wire
		if pw == nil || !pw.Valid {
			t.Errorf("%s: no usable wire truth: %+v", p, pw)
			continue
		}
		kinds[pageGroup(p)]++
		if pw.ByWindow > 0 {
			t.Logf("%s: %d after-load transactions by the window rule", p, pw.ByWindow)
		}
		detailf(t, "%s: wire total %v (client's own %v, load event %v), %d in load, %d after load, %d redirects",
			p, time.Duration(pw.Total), time.Duration(p.TotalNS), time.Duration(p.LoadEventNS), len(pw.InLoad),
			len(pw.AfterLoad), len(pw.Chain)-1)
	}
	t.Logf("pages by group: %v", kinds)
	// What each scenario is for must have happened.
	retransSYN := 0
	for _, c := range res.Wire.Conns {
		if len(c.SYNs) > 1 {
			retransSYN++
		}
	}
	switch {
	case sc.DropSYNMod > 0 || sc.DropSYNACKMod > 0:
		if res.NFTDrops == 0 || retransSYN == 0 {
			t.Errorf("%d SYNs or SYN/ACKs dropped, %d client connections retransmitted a SYN; want both > 0", res.NFTDrops, retransSYN)
		}
	case sc.Backlog > 0:
		t.Logf("overloaded: %d client connections retransmitted a SYN", retransSYN)
	}
	var redirects, noRef, afterLoad, reqRetrans, respDup, reused int
	for i := range res.Truth {
		pw := res.Truth[i].Wire
		if pw == nil {
			continue
		}
		redirects += len(pw.Chain) - 1
		afterLoad += len(pw.AfterLoad)
		if res.Truth[i].NoReferer {
			noRef++
		}
	}
	for _, r := range res.Wire.Txns() {
		if r.Txn.ReqRetrans {
			reqRetrans++
		}
		if r.Txn.RespDup {
			respDup++
		}
		if r.Txn.Index > 0 {
			reused++
		}
	}
	t.Logf("wire: %d connections, %d transactions (%d on reused connections), %d redirect hops, %d pages without Referer, %d after-load transactions, %d with request retransmissions, %d with duplicate response bytes; bridge lost %v",
		len(res.Wire.Conns), len(res.Wire.Txns()), reused, redirects, noRef, afterLoad, reqRetrans, respDup, b.Lost)
	lossEvents = [2]int{reqRetrans, respDup}
	hasBrowser := map[string]bool{}
	for _, ph := range sc.Phases {
		for _, s := range ph {
			hasBrowser[s.Browser] = true
		}
	}
	if hasBrowser[BrowserChromium] || hasBrowser[BrowserGo] {
		if afterLoad == 0 || redirects == 0 && !hasBrowser[BrowserPipeline] && sc.Backlog == 0 {
			t.Errorf("%d after-load transactions, %d redirect hops: the site's after-load requests or redirects did not happen", afterLoad, redirects)
		}
	}
	if hasBrowser[BrowserPipeline] {
		// Every pipelined page rides one connection.
		for i := range res.Truth {
			p := &res.Truth[i]
			ports := map[uint16]bool{}
			for _, x := range append(append([]WireID(nil), p.Wire.Chain...), p.Wire.InLoad...) {
				ports[x.Port] = true
			}
			if len(ports) != 1 {
				t.Errorf("%s: pipelined page on %d connections", p, len(ports))
			}
		}
	}
	return lossEvents
}

// checkLink measures the emulated link's one-way delays from the two
// captures. They must be the nominal ones, or the wire truth at the client
// would hold delays that are the testbed's. The bridge runs at real-time
// priority with spare Ps and no GC during the run (see bridge.go and
// RunScenario), but the machine is a VM whose vCPUs the host sometimes
// takes away for tens to hundreds of ms (steal time, more with the CPU
// hog), and then frames leave late whatever the bridge does. Such
// transactions and pageviews are set aside from rtmon's accuracy (see
// linkSpec), and the share of them is bounded here.
func checkLink(t *testing.T, sc Scenario, res ScenarioResult) *LinkDelays {
	t.Helper()
	t.Logf("steal time during the run: %v (the VM's vCPUs taken by the host)", time.Duration(res.StealNS))
	b := res.Bridge
	t.Logf("bridge: late reads %v (max %v, %v), late sends %v (max %v, %v)", b.LateReads,
		time.Duration(b.MaxReadLag[0]), time.Duration(b.MaxReadLag[1]), b.LateSends,
		time.Duration(b.MaxSendLag[0]), time.Duration(b.MaxSendLag[1]))
	d, err := MeasureLink(res.ClientCapture, res.Capture, func(c netip.Addr) time.Duration {
		if rtt, ok := sc.Link.RTT[c]; ok {
			return rtt / 2
		}
		return sc.Link.DefaultRTT / 2
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range d.Worst {
		detailf(t, "link: %s", w)
	}
	for _, dir := range []Direction{ToServer, ToClient} {
		ex := d.Excess[dir]
		t.Logf("link %s: delay beyond nominal: %s (p99 %v); %d packets of one side missing at the other",
			dir, errStats(ex), pctDur(absAll(ex), 0.99), d.Unmatched[dir])
		if len(ex) == 0 {
			t.Errorf("link %s: no packet seen on both sides", dir)
		}

	}
	return d
}

// Link bounds. linkSpec: a transaction whose defining packets (first SYN
// and handshake ACK on a fresh connection, else the request's first byte;
// the packet completing the response: WireRef.StartInstants, EndInstants)
// all crossed the link within linkSpec of the nominal delay saw the link
// as specified and counts for
// rtmon's accuracy; a pageview counts when the packets defining its start
// and end did, within pvLinkSpec (both with the history of a resent
// request's connection: lateAt). At most linkOffSpec of either may be set
// aside, or the run says nothing about rtmon and fails as a testbed
// failure. The bridge itself is precise (real-time threads, kernel receive
// timestamps, no Go scheduler in its wake-ups, see bridge.go), but this
// VM's kernel does not preempt kernel code (PREEMPT_NONE) and its host
// steals vCPU time, so with Chromium, other tests and the CPU hog on two
// cores a real-time thread still wakes milliseconds late now and then
// (seen: a few % of transactions, up to ~20% in a bad run).
//
// Both specs grow with what they time, by linkSpecRel: the link's lateness
// shifts rtmon's figure from the client's by as much (rtmon cannot see the
// path beyond its capture point), and 1% of a total leaves the bounds
// (5% for a transaction; a pageview's median max(10 ms, 2%), 95th
// percentile 5%) room that only rtmon's own error may use. A host that
// steals 10-20% of the vCPUs makes the bridge 5-20 ms late on most
// pageviews of a second; a fixed 2 ms then set all of them aside, three
// runs in a row.
const (
	linkSpec    = time.Millisecond
	pvLinkSpec  = 2 * time.Millisecond
	linkSpecRel = 0.01
	linkOffSpec = 0.25
	// maxScenarioRuns bounds the runs of one scenario that together must
	// judge enough (acceptance.judgedEnough); the runs past the first are
	// made only while the machine is too busy to judge.
	maxScenarioRuns = 5
)

// specFor is the link lateness a measurement of total tolerates, at least
// floor.
func specFor(floor time.Duration, total int64) time.Duration {
	return max(floor, time.Duration(linkSpecRel*float64(total)))
}

// pageGroup is the comparison group of a page: its browser, and whether
// its objects carried a Referer.
func pageGroup(p *PageTruth) string {
	src := p.Source
	if src == "go-fresh" {
		src = BrowserGo
	}
	if p.NoReferer {
		return src + " no-referer"
	}
	return src + " referer"
}

// checkWireAgainstClients is the analyzer's self-check: the Go and
// pipeline clients' own clocks (run under SCHED_FIFO) must agree with the
// wire within a few ms for every transaction on a quiet machine, which
// shows the analyzer's message boundaries and instants are right before
// rtmon is involved. Chromium's Resource Timing is compared too, and only
// logged: it is the browser's clock, which lags under load.
func checkWireAgainstClients(t *testing.T, res ScenarioResult, assert bool) {
	t.Helper()
	var goStart, goEnd, jsReq, jsEnd, pageJS, loadAfter []time.Duration
	for i := range res.Truth {
		p := &res.Truth[i]
		if p.Wire == nil {
			continue
		}
		for _, x := range slices.Concat(p.Wire.Chain, p.Wire.InLoad, p.Wire.AfterLoad) {
			if !x.Complete || x.OwnEnd == 0 {
				continue
			}
			if p.Source == BrowserChromium {
				if x.OwnRequest != 0 {
					jsReq = append(jsReq, time.Duration(x.OwnRequest-x.ReqFirst))
				}
				jsEnd = append(jsEnd, time.Duration(x.OwnEnd-x.End))
				continue
			}
			ds, de := time.Duration(x.Start-x.OwnStart), time.Duration(x.OwnEnd-x.End)
			if x.OwnStart != 0 {
				goStart = append(goStart, ds)
			}
			goEnd = append(goEnd, de)
			if x.OwnStart != 0 && ds.Abs() > ownClockMax || de.Abs() > ownClockMax {
				detailf(t, "%s %s:%d #%d %s: wire start-own %v, own end-wire %v", p.Source, x.Client, x.Port, x.Index, x.URL, ds, de)
			}
		}
		if p.Source == BrowserChromium && p.Wire.Valid {
			pageJS = append(pageJS, time.Duration(p.TotalNS-p.Wire.Total))
			if p.LoadEventAt != 0 {
				loadAfter = append(loadAfter, time.Duration(p.LoadEventAt-p.Wire.End))
			}
		}
	}
	t.Logf("Go clients' own clock vs wire: start %s; end %s", errStats(goStart), errStats(goEnd))
	t.Logf("Chromium timing API vs wire (logged only): requestStart %s; responseEnd %s; page total (JS - wire) %s; load event after the page's last in-load byte on the wire: %s",
		errStats(jsReq), errStats(jsEnd), errStats(pageJS), errStats(loadAfter))
	if !assert || len(goStart) == 0 {
		return
	}
	for _, d := range [][]time.Duration{goStart, goEnd} {
		if med := pctDur(absAll(d), 0.5); med > ownClockMedian {
			t.Errorf("Go client clock vs wire: median %v, want <= %v (is the wire truth matched to the right requests?)",
				med, ownClockMedian)
		}
	}
}

// lateAt is how late the link was for r's packets at the given instants
// and, when the client resent r's request, for every earlier packet of
// its connection: rtmon estimates a lost request's wait from the client's
// timer, which all of them set. Transactions and pageviews are judged by
// it alike (seen beside the CPU hog: 17 resent requests in one run, and
// containers 160-190 ms too long set aside as transactions but kept in
// their pageviews).
func lateAt(link *LinkDelays, r WireRef, ats []int64) time.Duration {
	late, _ := link.LateAt(r.Conn.Client, r.Conn.ClientPort, ats...)
	if r.Txn.ReqRetrans {
		late = max(late, link.LateBefore(r.Conn.Client, r.Conn.ClientPort, r.Txn.ReqLast))
	}
	if r.Txn.RespDup {
		// The same for a response the server resent: its timer, and the
		// client's ACKs that rtmon judges the copies by, are the link's
		// history up to the last copy (seen: an ACK the stalled bridge
		// held 991 ms drew an RTO copy 530 ms after the client had all).
		late = max(late, link.LateBefore(r.Conn.Client, r.Conn.ClientPort, r.Txn.RespDupLast))
	}
	return late
}

// acceptance accumulates the numbers the acceptance bounds apply to.
type acceptance struct {
	txnN, txnOK   int
	pvErr         map[string][]time.Duration // by group
	pvRel         map[string][]float64
	pvTruth       map[string][]time.Duration
	memberN       int
	memberOK      int
	flagN, flagOK map[string]int
	flagFalse     map[string]int // flagged where the wire shows no such event
	// txnAll and pvAll count what the runs held, judged or set aside
	// (txnN, pvN: judged); runs counts the runs merged.
	txnAll, pvAll, pvN, runs int
	// lossEvents counts the request retransmissions and the duplicate
	// response bytes the wire showed; a lossy scenario (lossNeeded) has
	// judged rtmon's loss evidence only once it saw both. Random loss
	// produces them by chance, so a run without one is made up by
	// another, like a run the machine disturbed.
	lossNeeded bool
	lossEvents [2]int
	// aborted counts runs set aside because a client's load failed on
	// the network (ClientNetworkFailure); they judge nothing.
	aborted int
	// whole: the acceptance of every scenario, where the pageviews' 95th
	// percentile is judged as such (see the bounds).
	whole bool
}

// swappedAfterLoad finds the after-load requests the wire cannot give to
// one page: a Referer-less one (a favicon) of a Chromium page that rtmon
// put into the pageview of a page another tab of the same browser was
// showing, or of the page its own tab went on to, when the request left
// after that page's first one (a busy browser asks for page N's favicon
// after navigating to page N+1). Tabs share the browser's connections,
// so nothing on the wire says which tab or page asked; the truth itself
// takes the browser's word. Per
// page index, lent counts its own such requests in the other tab's
// pageview and borrowed the other tabs' in its own: the page's after_load
// count is judged with them moved.
func swappedAfterLoad(t *testing.T, pages []PageTruth, pvOf func(*PageTruth) *rtmonPV, byKey map[wireKey]*rtmonTxnRec) (lent, borrowed map[int]int, swapped map[wireKey]bool) {
	lent, borrowed, swapped = map[int]int{}, map[int]int{}, map[wireKey]bool{}
	pageOfPV := map[string]int{}
	for i := range pages {
		if pv := pvOf(&pages[i]); pv != nil {
			pageOfPV[pv.ID] = i
		}
	}
	for i := range pages {
		p := &pages[i]
		pv := pvOf(p)
		if pv == nil || p.Source != BrowserChromium {
			continue
		}
		for _, x := range p.Wire.AfterLoad {
			ox := byKey[key(x)]
			if x.Referer || ox == nil || ox.PageviewID == pv.ID {
				continue
			}
			j, ok := pageOfPV[ox.PageviewID]
			if !ok {
				continue
			}
			q := &pages[j]
			if q.Source != BrowserChromium || q.Client != p.Client {
				continue
			}
			switch {
			case q.Tab != p.Tab:
				lent[i]++
				borrowed[j]++
				swapped[key(x)] = true
				t.Logf("%s: after-load %s %s without Referer in tab %d's pageview of %s: the wire cannot tell the tabs apart", p, x.Method, x.URL, q.Tab, q.URL)
			case q.Wire.Start > p.Wire.Start && x.Start >= q.Wire.Start:
				lent[i]++
				borrowed[j]++
				swapped[key(x)] = true
				t.Logf("%s: after-load %s %s without Referer, sent after the tab's next page %s began, is in that page's pageview: the wire cannot tell the pages apart", p, x.Method, x.URL, q.URL)
			}
		}
	}
	return lent, borrowed, swapped
}

// reportPooledTail asserts the pageviews' 95th percentile over every
// group of one scenario (both browsers, with and without Referer, quiet
// and busy runs): per scenario, as the bound asks, and with enough
// pageviews that the percentile is not simply the worst one.
func (a *acceptance) reportPooledTail(t *testing.T, scenario string) {
	t.Helper()
	a.init()
	var rels []float64
	for _, g := range a.pvRel {
		rels = append(rels, g...)
	}
	if len(rels) == 0 {
		return
	}
	p95 := pct(rels, 0.95)
	t.Logf("%s: pageviews of every group: relative p95 %.1f%% (bound %.0f%%), %d of %d within it",
		scenario, 100*p95, 100*pvP95Rel, withinRel(rels), len(rels))
	if p95 > pvP95Rel {
		t.Errorf("%s: pageviews of every group: 95th percentile relative error %.1f%% > %.0f%%", scenario, 100*p95, 100*pvP95Rel)
	}
}

// judgedEnough reports whether the runs merged judged at least
// 1-linkOffSpec of one run's transactions and pageviews: a run the
// machine disturbed (link off spec) is made up by another.
func (a *acceptance) judgedEnough() bool {
	if a.runs == 0 {
		return false
	}
	runs := float64(max(a.runs, 1))
	return float64(a.txnN) >= (1-linkOffSpec)*float64(a.txnAll)/runs &&
		float64(a.pvN) >= (1-linkOffSpec)*float64(a.pvAll)/runs &&
		(!a.lossNeeded || a.lossEvents[0] > 0 && a.lossEvents[1] > 0)
}

func (a *acceptance) init() {
	if a.pvErr == nil {
		a.pvErr, a.pvRel, a.pvTruth = map[string][]time.Duration{}, map[string][]float64{}, map[string][]time.Duration{}
		a.flagN, a.flagOK, a.flagFalse = map[string]int{}, map[string]int{}, map[string]int{}
	}
}

func (a *acceptance) merge(b *acceptance) {
	a.init()
	b.init()
	a.txnN += b.txnN
	a.txnOK += b.txnOK
	a.txnAll += b.txnAll
	a.pvAll += b.pvAll
	a.pvN += b.pvN
	if b.aborted == 0 || b.runs > 0 {
		a.runs += max(b.runs, 1)
	}
	a.aborted += b.aborted
	a.lossNeeded = a.lossNeeded || b.lossNeeded
	a.lossEvents[0] += b.lossEvents[0]
	a.lossEvents[1] += b.lossEvents[1]
	a.memberN += b.memberN
	a.memberOK += b.memberOK
	for g := range b.pvErr {
		a.pvErr[g] = append(a.pvErr[g], b.pvErr[g]...)
		a.pvRel[g] = append(a.pvRel[g], b.pvRel[g]...)
		a.pvTruth[g] = append(a.pvTruth[g], b.pvTruth[g]...)
	}
	for f := range b.flagN {
		a.flagN[f] += b.flagN[f]
		a.flagOK[f] += b.flagOK[f]
	}
	for f := range b.flagFalse {
		a.flagFalse[f] += b.flagFalse[f]
	}
}

// report logs the numbers and, with assert, checks the bounds.
func (a *acceptance) report(t *testing.T, what string, assert bool) {
	t.Helper()
	a.init()
	fail := func(format string, args ...any) {
		if assert {
			t.Errorf(what+": "+format, args...)
		} else {
			t.Logf(what+": NOT MET: "+format, args...)
		}
	}
	if a.txnN > 0 {
		share := float64(a.txnOK) / float64(a.txnN)
		t.Logf("%s: transactions within max(%v, %.0f%%) of the wire: %d of %d (%.1f%%)", what, txnFloor, 100*txnRel,
			a.txnOK, a.txnN, 100*share)
		if share < txnWithin {
			fail("%.1f%% of transactions within tolerance, want >= %.0f%%", 100*share, 100*txnWithin)
		}
	}
	groups := make([]string, 0, len(a.pvErr))
	for g := range a.pvErr {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		errs := a.pvErr[g]
		med := pctDur(absAll(errs), 0.5)
		allow := max(pvMedianFloor, time.Duration(pvMedianRel*float64(pctDur(a.pvTruth[g], 0.5))))
		p95 := pct(a.pvRel[g], 0.95)
		within := withinRel(a.pvRel[g])
		t.Logf("%s: pageviews %s: %s; median |error| %v (bound %v), relative p95 %.1f%% (bound %.0f%%), %d of %d within it",
			what, g, errStats(errs), med, allow, 100*p95, 100*pvP95Rel, within, len(a.pvRel[g]))
		if med > allow {
			fail("pageviews %s: median |error| %v > %v", g, med, allow)
		}
		if !pvTailMet(a.pvRel[g], a.whole) {
			fail("pageviews %s: 95th percentile relative error %.1f%% > %.0f%%, %d of %d within it (judged by %s)", g,
				100*p95, 100*pvP95Rel, within, len(a.pvRel[g]), map[bool]string{true: "the percentile",
					false: fmt.Sprintf("a binomial test at %.0f%%", 100*flagSignificance)}[a.whole])
		}
	}
	if a.memberN > 0 {
		share := float64(a.memberOK) / float64(a.memberN)
		t.Logf("%s: objects in their page's pageview (after-load ones flagged after_load): %d of %d (%.1f%%)", what,
			a.memberOK, a.memberN, 100*share)
		if share < memberWithin {
			fail("%.1f%% of objects in the right pageview, want >= %.0f%%", 100*share, 100*memberWithin)
		}
	}
	for _, f := range []string{"upstream_loss", "spurious_retrans"} {
		if n := a.flagN[f]; n > 0 {
			share := float64(a.flagOK[f]) / float64(n)
			t.Logf("%s: transactions the wire shows as %s flagged so: %d of %d (%.1f%%)", what, f, a.flagOK[f], n, 100*share)
			if belowRate(a.flagOK[f], n, flagRecall) {
				fail("%d of %d %s transactions flagged: recall below %.0f%% (binomial test at %.0f%%)", a.flagOK[f], n, f,
					100*flagRecall, 100*flagSignificance)
			}
		}
		if flagged := a.flagOK[f] + a.flagFalse[f]; f == "upstream_loss" && flagged > 0 {
			precision := float64(a.flagOK[f]) / float64(flagged)
			t.Logf("%s: %s flags the wire confirms: %d of %d (%.1f%%)", what, f, a.flagOK[f], flagged, 100*precision)
			if belowRate(a.flagOK[f], flagged, flagPrecision) {
				fail("%d of %d %s flags confirmed by the wire: precision below %.0f%% (binomial test at %.0f%%)", a.flagOK[f],
					flagged, f, 100*flagPrecision, 100*flagSignificance)
			}
		}
	}
}

// wireKey identifies a transaction on both sides: client address and
// port, the connection's rank among those with that port (reuse), index.
type wireKey struct {
	client string
	port   int
	seq    int
	index  int
}

func key(x WireID) wireKey { return wireKey{x.Client, int(x.Port), x.Seq, x.Index} }

// misplacedByTiming is the rtmon pageviews (by id) that lost an object to
// another, or gained one, because rtmon timed that object's transaction
// beyond tolerance or the link was off spec for it (misjudged): one timing
// error, judged by the transaction share, that the exact object counts of
// both pages would judge again. Seen once in 8 runs beside a CPU hog: a
// request rtmon took for resent 376 ms earlier (a bridge stall of 986 ms)
// landed in the previous page's pageview. A misjudged in-load object that
// stayed in its pageview moves the load's end, which decides the in-load
// and after-load counts of the objects after it (seen once beside a CPU
// hog: a response rtmon ended 530 ms late, on an ACK the bridge held
// 991 ms, took a beacon in). A misjudged after-load object's own start
// decides whether it came after the load (seen once beside a CPU hog: a
// beacon whose request rtmon took for resent 78 ms before the wire's,
// the bridge stalling up to 978 ms, counted in-load).
func misplacedByTiming(truth []PageTruth, pvOf func(*PageTruth) *rtmonPV, byKey map[wireKey]*rtmonTxnRec, misjudged map[wireKey]bool) map[string]bool {
	excused := map[string]bool{}
	for i := range truth {
		p := &truth[i]
		pv := pvOf(p)
		if pv == nil {
			continue
		}
		for _, x := range slices.Concat(p.Wire.InLoad, p.Wire.AfterLoad) {
			if ox := byKey[key(x)]; ox != nil && ox.PageviewID != pv.ID && misjudged[key(x)] {
				excused[pv.ID], excused[ox.PageviewID] = true, true
			}
		}
		for _, x := range slices.Concat(p.Wire.InLoad, p.Wire.AfterLoad) {
			if misjudged[key(x)] {
				excused[pv.ID] = true
			}
		}
	}
	return excused
}

// compareWithRtmon checks rtmon's records against the wire truth and
// returns the acceptance numbers of the run.
func compareWithRtmon(t *testing.T, sc Scenario, res ScenarioResult, srv *ClientWire, link *LinkDelays, out string) *acceptance {
	t.Helper()
	a := &acceptance{}
	a.init()
	txns := readJSONL[rtmonTxnRec](t, filepath.Join(out, "transactions.jsonl"))
	pvs := readJSONL[rtmonPV](t, filepath.Join(out, "pageviews.jsonl"))
	conns := readJSONL[rtmonConn](t, filepath.Join(out, "connections.jsonl"))
	checkRecords(t, txns, pvs)

	// rtmon's transactions by (client, port, connection rank, index): the
	// connections of one port ranked by their first transaction's start.
	type cp struct {
		client string
		port   int
	}
	firstStart := map[string]int64{}
	for _, x := range txns {
		if s, ok := firstStart[x.ConnectionID]; !ok || x.Start < s {
			firstStart[x.ConnectionID] = x.Start
		}
	}
	connsOf := map[cp][]string{}
	for id := range firstStart {
		var x *rtmonTxnRec
		for i := range txns {
			if txns[i].ConnectionID == id {
				x = &txns[i]
				break
			}
		}
		connsOf[cp{x.Client, x.ClientPort}] = append(connsOf[cp{x.Client, x.ClientPort}], id)
	}
	rank := map[string]int{}
	for _, ids := range connsOf {
		sort.Slice(ids, func(i, j int) bool { return firstStart[ids[i]] < firstStart[ids[j]] })
		for i, id := range ids {
			rank[id] = i
		}
	}
	byKey := map[wireKey]*rtmonTxnRec{}
	for i := range txns {
		x := &txns[i]
		byKey[wireKey{x.Client, x.ClientPort, rank[x.ConnectionID], x.Index}] = x
	}
	pvByID := map[string]*rtmonPV{}
	for i := range pvs {
		pvByID[pvs[i].ID] = &pvs[i]
	}
	// The server-side view of each transaction, for the upstream-loss truth.
	type srvTxn struct {
		conn *WireTruthConn
		txn  *WireTruthTxn
	}
	srvBy := map[wireKey]*srvTxn{}
	for _, r := range srv.Txns() {
		srvBy[wireKey{r.Conn.Client.String(), int(r.Conn.ClientPort), r.Conn.Seq, r.Txn.Index}] = &srvTxn{r.Conn, r.Txn}
	}

	// Transactions: every complete one on the client's wire. misjudged:
	// those set aside (link off spec) or outside tolerance, judged here by
	// the share rule.
	var outliers []string
	misjudged := map[wireKey]bool{}
	offSpec, complete := 0, 0
	for _, r := range res.Wire.Txns() {
		w := r.Txn
		if !w.Complete {
			continue
		}
		complete++
		k := wireKey{r.Conn.Client.String(), int(r.Conn.ClientPort), r.Conn.Seq, w.Index}
		x := byKey[k]
		name := fmt.Sprintf("%s:%d #%d %s %s", k.client, k.port, k.index, w.Method, w.URL)
		late := lateAt(link, r, slices.Concat(r.StartInstants(), r.EndInstants()))
		spec := specFor(linkSpec, w.Total)
		if late > spec {
			offSpec++
			misjudged[k] = true
			if x != nil {
				detailf(t, "%s: link off spec by %v: set aside (rtmon total %v, wire %v, off by %v)", name, late,
					time.Duration(x.Total), time.Duration(w.Total), time.Duration(x.Total-w.Total))
			}
		} else {
			a.txnN++
		}
		if x == nil {
			misjudged[k] = true
			outliers = append(outliers, name+": no rtmon transaction")
			continue
		}
		if pathOf(x.URL) != w.URL || x.Status != w.Status {
			t.Errorf("%s: rtmon has %s status %d, the wire %s status %d", name, x.URL, x.Status, w.URL, w.Status)
		}
		d := time.Duration(x.Total - w.Total)
		if tol := max(txnFloor, time.Duration(txnRel*float64(w.Total))); late > spec {
		} else if d.Abs() <= tol {
			a.txnOK++
		} else {
			misjudged[k] = true
			outliers = append(outliers, fmt.Sprintf("%s: rtmon total %v (start %+v, end %+v; tconn %v trequest %v tserver %v ttransfer %v, flags %v), wire %v (fresh %v, req retrans %v, resp dup %v): off by %v",
				name, time.Duration(x.Total), time.Duration(x.Start-w.Start), time.Duration(x.End-w.End), time.Duration(x.Tconn),
				time.Duration(x.Trequest), time.Duration(x.Tserver), time.Duration(x.Ttransfer), x.Flags, time.Duration(w.Total),
				w.Fresh, w.ReqRetrans, w.RespDup, d))
		}
		// Flags whose truth the two captures give.
		s := srvBy[k]
		switch lost := s != nil && w.ReqRetrans && r.Conn.FirstRequestCopyLost(w, s.conn, s.txn); {
		case lost && x.has("upstream_loss"):
			a.flagN["upstream_loss"]++
			a.flagOK["upstream_loss"]++
		case lost:
			a.flagN["upstream_loss"]++
			t.Logf("%s: request's first transmission lost upstream, not flagged upstream_loss (flags %v)", name, x.Flags)
		case x.has("upstream_loss"):
			a.flagFalse["upstream_loss"]++
			t.Logf("%s: flagged upstream_loss, but the request's first transmission reached the capture", name)
		}
		if w.RespDup {
			a.flagN["spurious_retrans"]++
			if x.has("spurious_retrans") {
				a.flagOK["spurious_retrans"]++
			} else {
				t.Logf("%s: response bytes arrived twice, not flagged spurious_retrans (flags %v)", name, x.Flags)
			}
		}
	}
	for _, o := range outliers {
		t.Logf("transaction outside tolerance: %s", o)
	}
	t.Logf("transactions: %d complete on the wire, %d set aside (link off spec by more than %v or %.0f%%)", complete, offSpec, linkSpec, 100*linkSpecRel)
	a.txnAll = complete

	refs := map[wireKey]WireRef{}
	for _, r := range res.Wire.Txns() {
		refs[wireKey{r.Conn.Client.String(), int(r.Conn.ClientPort), r.Conn.Seq, r.Txn.Index}] = r
	}
	// Pageviews: the one holding each page's container.
	pvOf := func(p *PageTruth) *rtmonPV {
		if p.Wire == nil || !p.Wire.Valid {
			return nil
		}
		if cx := byKey[key(p.Wire.Chain[len(p.Wire.Chain)-1])]; cx != nil {
			return pvByID[cx.PageviewID]
		}
		return nil
	}
	lent, borrowed, swapped := swappedAfterLoad(t, res.Truth, pvOf, byKey)
	excused := misplacedByTiming(res.Truth, pvOf, byKey, misjudged)
	evidence := map[string]int{}
	pvOff, pvAll := 0, 0
	for i := range res.Truth {
		p := &res.Truth[i]
		pw := p.Wire
		if pw == nil || !pw.Valid {
			continue
		}
		g := pageGroup(p)
		cont := pw.Chain[len(pw.Chain)-1]
		cx := byKey[key(cont)]
		var pv *rtmonPV
		if cx != nil {
			pv = pvByID[cx.PageviewID]
		}
		if pv == nil {
			t.Errorf("%s: no rtmon pageview holds the container (transaction %v)", p, cx != nil)
			a.pvErr[g] = append(a.pvErr[g], time.Duration(pw.Total))
			a.pvRel[g] = append(a.pvRel[g], 1)
			a.pvTruth[g] = append(a.pvTruth[g], time.Duration(pw.Total))
			a.memberN += len(pw.InLoad) + len(pw.AfterLoad)
			continue
		}
		d := time.Duration(pv.Total - pw.Total)
		// The link's lateness for the packets that define the page's
		// span: its first transaction's start, its last one's end.
		first, last := refs[key(pw.Chain[0])], refs[key(cont)]
		for _, x := range slices.Concat(pw.Chain, pw.InLoad) {
			if x.End == pw.End {
				last = refs[key(x)]
			}
		}
		ls, le := lateAt(link, first, first.StartInstants()), lateAt(link, last, last.EndInstants())
		late := max(ls, le)
		pvAll++
		if late > specFor(pvLinkSpec, pw.Total) {
			pvOff++
			detailf(t, "pageview %s: link off spec by %v: set aside (rtmon %v, wire %v, error %v)", p, late,
				time.Duration(pv.Total), time.Duration(pw.Total), d)
		} else {
			a.pvErr[g] = append(a.pvErr[g], d)
			a.pvRel[g] = append(a.pvRel[g], math.Abs(float64(d))/float64(pw.Total))
			a.pvTruth[g] = append(a.pvTruth[g], time.Duration(pw.Total))
			detailf(t, "pageview %s: rtmon %v (start %+v, end %+v), wire %v: error %v", p, time.Duration(pv.Total),
				time.Duration(pv.Start-pw.Start), time.Duration(pv.End-pw.End), time.Duration(pw.Total), d)
		}
		// The pageview's own fields.
		if pathOf(pv.URL) != p.URL {
			t.Errorf("%s: pageview url %q, want the final container %q", p, pv.URL, p.URL)
		}
		// An abandoned attempt is a transaction on the wire too; whether
		// rtmon counts it as an object of the page or leaves it aside,
		// both are right.
		switch {
		case excused[pv.ID]:
			// Counted in the membership share and the transaction rule.
			t.Logf("%s: object counts set aside: a transaction mis-timed beyond tolerance (or on an off-spec link) moved between this pageview and another", p)
		case pv.Objects < len(pw.InLoad) || pv.Objects > len(pw.InLoad)+len(pw.Abandoned):
			t.Errorf("%s: pageview objects %d, want %d in-load objects (+%d abandoned attempts)", p, pv.Objects, len(pw.InLoad), len(pw.Abandoned))
		}
		switch {
		case excused[pv.ID]:
		case pv.AfterLoad == nil:
			t.Errorf("%s: pageview has no after_load count (want %d)", p, len(pw.AfterLoad))
		case *pv.AfterLoad != len(pw.AfterLoad)-lent[i]+borrowed[i]:
			t.Errorf("%s: pageview after_load %d, want %d (%d of its own Referer-less ones in another tab's pageview, %d of another tab's in this one)",
				p, *pv.AfterLoad, len(pw.AfterLoad)-lent[i]+borrowed[i], lent[i], borrowed[i])
		}
		switch {
		case pv.Redirects == nil:
			t.Errorf("%s: pageview has no redirects count (want %d)", p, len(pw.Chain)-1)
		case *pv.Redirects != len(pw.Chain)-1:
			t.Errorf("%s: pageview redirects %d, want %d", p, *pv.Redirects, len(pw.Chain)-1)
		}
		evidence[g+" "+pv.Evidence]++
		withRef := 0
		for _, x := range pw.InLoad {
			if x.Referer {
				withRef++
			}
		}
		switch {
		case pv.Evidence != "html" && pv.Evidence != "referer" && pv.Evidence != "timing":
			t.Errorf("%s: pageview evidence %q, want html, referer or timing", p, pv.Evidence)
		case len(pw.InLoad) > 0 && withRef == 0 && pv.Evidence == "referer":
			t.Errorf("%s: evidence referer, but no object of the page carried a Referer", p)
		case withRef == len(pw.InLoad) && len(pw.InLoad) > 0 && pv.Evidence == "timing":
			t.Errorf("%s: evidence timing, but every object carried the page's Referer", p)
		}
		for _, x := range pw.Chain[:len(pw.Chain)-1] {
			if hx := byKey[key(x)]; hx == nil || hx.PageviewID != pv.ID {
				t.Errorf("%s: redirect hop %s not in the container's pageview", p, x.URL)
			}
		}
		// Membership.
		for _, x := range slices.Concat(pw.InLoad, pw.AfterLoad) {
			a.memberN++
			ox := byKey[key(x)]
			after := x.Role == RoleAfterLoad
			switch {
			case ox == nil:
				t.Logf("%s: object %s %s: no rtmon transaction", p, x.Method, x.URL)
			case swapped[key(x)] && ox.has("after_load"):
				// After load in the page the wire gives it to (see
				// swappedAfterLoad): as right as the wire allows.
				a.memberOK++
			case ox.PageviewID != pv.ID:
				t.Logf("%s: %s object %s %s in pageview %q, not the container's %q", p, x.Role, x.Method, x.URL, ox.PageviewID, pv.ID)
			case ox.has("after_load") != after:
				t.Logf("%s: %s object %s %s: after_load flag %v", p, x.Role, x.Method, x.URL, ox.has("after_load"))
			default:
				a.memberOK++
			}
		}
	}
	t.Logf("pageview evidence by group: %v; %d of %d set aside (link off spec by more than %v or %.0f%%)", evidence, pvOff, pvAll, pvLinkSpec, 100*linkSpecRel)
	a.pvAll, a.pvN = pvAll, pvAll-pvOff

	// Connection-level purposes.
	var synLoss, synackLoss int
	for _, c := range conns {
		synLoss += c.SYNLosses
		synackLoss += c.SYNACKLosses
	}
	switch {
	case sc.DropSYNMod > 0 && synLoss == 0:
		t.Errorf("nft dropped %d SYNs, rtmon reports no SYN loss", res.NFTDrops)
	case sc.DropSYNACKMod > 0 && synackLoss == 0:
		t.Errorf("link dropped %d SYN/ACKs, rtmon reports no SYN/ACK loss", res.NFTDrops)
	}
	if len(conns) != len(res.Wire.Conns) {
		t.Errorf("rtmon reports %d connections, the client's wire has %d", len(conns), len(res.Wire.Conns))
	}
	return a
}

// checkRecords asserts what holds for every record: no negative component,
// End >= Start, components adding up to a transaction's total, and a
// pageview's total within its span.
func checkRecords(t *testing.T, txns []rtmonTxnRec, pvs []rtmonPV) {
	t.Helper()
	bad := 0
	for _, x := range txns {
		var errs []string
		for name, v := range map[string]int64{"tconn": x.Tconn, "ttls": x.Ttls, "trequest": x.Trequest, "tserver": x.Tserver,
			"ttransfer": x.Ttransfer, "total": x.Total} {
			if v < 0 {
				errs = append(errs, fmt.Sprintf("%s %v", name, time.Duration(v)))
			}
		}
		if x.End < x.Start {
			errs = append(errs, "end before start")
		}
		if s := x.Tconn + x.Ttls + x.Trequest + x.Tserver + x.Ttransfer; s != x.Total {
			errs = append(errs, fmt.Sprintf("components add up to %v, total %v", time.Duration(s), time.Duration(x.Total)))
		}
		if len(errs) > 0 {
			bad++
			t.Errorf("transaction %s (%s:%d #%d %s): %s", x.ID, x.Client, x.ClientPort, x.Index, x.URL, strings.Join(errs, "; "))
		}
	}
	for _, p := range pvs {
		var errs []string
		for name, v := range map[string]int64{"tconn": p.Tconn, "tserver": p.Tserver, "ttransfer": p.Ttransfer,
			"tother": p.Tother, "total": p.Total} {
			if v < 0 {
				errs = append(errs, fmt.Sprintf("%s %v", name, time.Duration(v)))
			}
		}
		if p.End < p.Start {
			errs = append(errs, "end before start")
		}
		if p.Total > p.End-p.Start {
			errs = append(errs, fmt.Sprintf("total %v > end - start %v", time.Duration(p.Total), time.Duration(p.End-p.Start)))
		}
		if len(errs) > 0 {
			bad++
			t.Errorf("pageview %s (%s %s): %s", p.ID, p.Client, p.URL, strings.Join(errs, "; "))
		}
	}
	t.Logf("rtmon: %d transactions, %d pageviews, %d records with inconsistent numbers", len(txns), len(pvs), bad)
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

// pctDur is the nearest-rank percentile (0 for none).
func pctDur(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func pct(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// withinRel counts the relative errors within pvP95Rel.
func withinRel(rels []float64) int {
	n := 0
	for _, r := range rels {
		if r <= pvP95Rel {
			n++
		}
	}
	return n
}

// pvTailMet judges the pageviews' 95th percentile bound: as such over all
// scenarios (whole), and for one run by the share within the bound, which
// must not be unlikely for an estimator that meets it (see the bounds).
func pvTailMet(rels []float64, whole bool) bool {
	if whole {
		return pct(rels, 0.95) <= pvP95Rel
	}
	return !belowRate(withinRel(rels), len(rels), 1-pvP95Rel)
}

func TestPageviewTailBound(t *testing.T) {
	rels := func(n, off int) []float64 {
		r := make([]float64, n)
		for i := range off {
			r[i] = 0.096
		}
		return r
	}
	for _, c := range []struct {
		n, off int
		whole  bool
		want   bool
	}{
		{12, 0, false, true},
		{12, 1, false, true},  // one ambiguous loss in a run
		{12, 4, false, false}, // a third of a run's pages off
		{16, 16, false, false},
		{72, 3, true, true},
		{72, 5, true, false}, // the merged 95th percentile itself
		{20, 2, true, false},
	} {
		if got := pvTailMet(rels(c.n, c.off), c.whole); got != c.want {
			t.Errorf("%d of %d off (whole %v): met %v, want %v", c.off, c.n, c.whole, got, c.want)
		}
	}
}

// belowRate reports whether ok successes in n trials are significantly
// fewer than rate gives: P(X <= ok) < flagSignificance for X ~ B(n, rate).
func belowRate(ok, n int, rate float64) bool {
	var cdf float64
	for k := 0; k <= ok; k++ {
		lg, _ := math.Lgamma(float64(n + 1))
		lk, _ := math.Lgamma(float64(k + 1))
		lnk, _ := math.Lgamma(float64(n - k + 1))
		cdf += math.Exp(lg - lk - lnk + float64(k)*math.Log(rate) + float64(n-k)*math.Log1p(-rate))
	}
	return cdf < flagSignificance
}

func TestBelowRate(t *testing.T) {
	for _, c := range []struct {
		ok, n int
		want  bool
	}{{6, 7, false}, {7, 7, false}, {9, 12, false}, {7, 12, true}, {80, 100, true}, {86, 100, false}, {0, 3, true}} {
		if got := belowRate(c.ok, c.n, 0.9); got != c.want {
			t.Errorf("belowRate(%d, %d, 0.9) = %v, want %v", c.ok, c.n, got, c.want)
		}
	}
}

// detailf logs a per-page or per-packet line only under -v: a failing
// run in CI then shows its errors and summaries, not hundreds of details
// that push them out of a truncated log.
func detailf(t *testing.T, format string, args ...any) {
	t.Helper()
	if testing.Verbose() {
		t.Logf(format, args...)
	}
}
