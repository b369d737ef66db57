package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/query"
)

// ecmpSensors are the sensor names of front ends 0 and 1.
var ecmpSensors = [2]string{"fe0", "fe1"}

// ecmpLoads: pages with 6 to 11 objects, so Chromium opens its six
// connections and the router's hash spreads them over both front ends;
// one through a redirect, one without Referer.
var ecmpLoads = []Load{{Page: 5}, {Page: 9, Redirect: true}, {Page: 10}, {Page: 7}, {Page: 8}}

// ecmpRun is what one run of the ECMP testbed gave.
type ecmpRun struct {
	res      ScenarioResult // Truth, Wire, ClientCapture
	fronts   [2]string      // the sensors' captures
	frontW   [2]*ClientWire
	sensorOf map[connKey]string
}

// TestECMPFrontEnds is the two-sensor testbed's own proof: Chromium's
// connections to the VIP are split by the router's ECMP over two front
// ends, each front end's capture holds exactly its connections with the
// client's address and the VIP, each sensor alone stores partial
// pageviews of the split pages, and one sensor that sees every connection
// (the client's capture) meets the single-sensor bounds on this very run.
// TestTwoSensorsECMPPageviews (ecmp_stitch_test.go) adds the stitching.
func TestECMPFrontEnds(t *testing.T) {
	db := "duckdb:" + filepath.Join(t.TempDir(), "rtmon.db")
	ecmpSetup(t, [2]string{db, db})
}

// ecmpSetupResult is a run analyzed: each sensor's records in one store
// (not stitched), the one-sensor analysis of the client's capture.
type ecmpSetupResult struct {
	ctx    context.Context
	bin    string
	run    *ecmpRun
	split  int
	db     string      // store URL (the first sensor's)
	one    string      // analyze --out of the client's capture
	srv    *ClientWire // both front ends' captures
	before *stored
}

// ecmpSetup builds the testbed, runs the loads until ECMP splits pages,
// checks the one-sensor reference and stores each sensor's records, the
// front end i's sensor into stores[i] (one store, or servers of one
// cluster).
func ecmpSetup(t *testing.T, stores [2]string) *ecmpSetupResult {
	t.Helper()
	needChromium(t)
	bin, err := buildRtmon()
	if err != nil {
		t.Fatalf("rtmon is not buildable: %v", err)
	}
	ctx := testContext(t)
	e := NewECMP(t, "rte")
	run, split := splitECMPRun(ctx, t, e)
	keepECMP(t, run)
	r := &ecmpSetupResult{ctx: ctx, bin: bin, run: run, split: split, one: t.TempDir(),
		db:  stores[0],
		srv: &ClientWire{Conns: slices.Concat(run.frontW[0].Conns, run.frontW[1].Conns)}}
	// The reference: one sensor that sees every connection, judged as the
	// single-sensor scenarios are.
	rtmonCmd(ctx, t, bin, "analyze", "--out", r.one, run.res.ClientCapture)
	t.Run("one sensor sees all", func(t *testing.T) {
		compareWithRtmon(t, Scenario{}, run.res, r.srv, &LinkDelays{}, r.one).report(t, "one sensor, every connection", true)
	})
	for i, path := range run.fronts {
		rtmonCmd(ctx, t, bin, "analyze", "--store", stores[i], "--sensor", ecmpSensors[i], path)
	}
	r.before = readStored(ctx, t, r.db)
	checkSplitBeforeStitch(t, run, r.before, split)
	return r
}

// ecmpAttempts bounds the runs made until ECMP splits a page: the router
// hashes Chromium's four to six connections, all onto one front end in 1
// of 8 to 1 of 32 runs (2 of 18 runs seen), so eight runs all unsplit
// would be a broken premise, not chance.
const ecmpAttempts = 8

// splitECMPRun runs the loads until a run has pages split across the
// front ends (the test's premise) and returns it with their number.
func splitECMPRun(ctx context.Context, t *testing.T, e *ECMP) (*ecmpRun, int) {
	t.Helper()
	site := GenerateSite(12, 16)
	if _, err := e.StartNginx(ctx, NginxOptions{Content: site.Content, WebSite: true, KeepaliveTimeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; ; attempt++ {
		run := runECMPLoads(ctx, t, e, site, attempt)
		split := checkECMPHarness(t, run)
		if split > 0 {
			return run, split
		}
		if attempt == ecmpAttempts {
			t.Fatalf("ECMP split no page across the front ends in %d runs: the test's premise failed", attempt)
		}
		t.Logf("run %d: ECMP put every connection on one front end; running again", attempt)
	}
}

// runECMPLoads captures at the client and at both front ends while one
// Chromium loads ecmpLoads through the VIP, and attaches the client's wire
// truth.
func runECMPLoads(ctx context.Context, t *testing.T, e *ECMP, site *Site, attempt int) *ecmpRun {
	t.Helper()
	client, err := e.StartCapture(ctx, e.Client, fmt.Sprintf("client-%d", attempt))
	if err != nil {
		t.Fatal(err)
	}
	var fronts [2]*Capture
	for i, h := range e.FrontEnds {
		if fronts[i], err = e.StartCapture(ctx, h, fmt.Sprintf("%s-%d", ecmpSensors[i], attempt)); err != nil {
			t.Fatal(err)
		}
	}
	run := &ecmpRun{sensorOf: map[connKey]string{}}
	run.res.Truth, err = runChromiumSession(ctx, e.Testbed, site, "http://"+ECMPVIP.String(),
		Session{Browser: BrowserChromium, Client: e.Client.Addr, Loads: ecmpLoads})
	if err != nil {
		t.Fatalf("chromium session: %v", err)
	}
	for _, c := range append([]*Capture{client}, fronts[:]...) {
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
		if c.Dropped != 0 {
			t.Errorf("tcpdump on %s/%s dropped %d packets", c.Host.NS, c.Host.Iface, c.Dropped)
		}
	}
	run.res.ClientCapture = client.Path
	if run.res.Wire, err = ReadClientWire(client.Path); err != nil {
		t.Fatal(err)
	}
	run.res.Unattributed = AttachWireTruth(run.res.Truth, run.res.Wire)
	for i, c := range fronts {
		run.fronts[i] = c.Path
		if run.frontW[i], err = ReadClientWire(c.Path); err != nil {
			t.Fatalf("front end %d capture: %v", i, err)
		}
		for _, wc := range run.frontW[i].Conns {
			run.sensorOf[connKey{wc.Client, wc.ClientPort}] = ecmpSensors[i]
		}
	}
	return run
}

// pageSensors is the set of front ends a page's chain and in-load objects
// went through (its span), with afterLoad also its after-load requests
// (the whole pageview), by the front ends' captures.
func (r *ecmpRun) pageSensors(p *PageTruth, afterLoad bool) []string {
	var out []string
	xs := slices.Concat(p.Wire.Chain, p.Wire.InLoad)
	if afterLoad {
		xs = append(xs, p.Wire.AfterLoad...)
	}
	for _, x := range xs {
		s := r.sensorOf[connKey{netip.MustParseAddr(x.Client), x.Port}]
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// checkECMPHarness checks the run before rtmon: every page has wire truth,
// every client connection crossed exactly one front end with the client's
// address and the VIP. It returns how many pages ECMP split across both
// front ends (the test's premise, judged by the caller).
func checkECMPHarness(t *testing.T, r *ecmpRun) int {
	t.Helper()
	if len(r.res.Truth) != len(ecmpLoads) {
		t.Fatalf("%d pages loaded, want %d", len(r.res.Truth), len(ecmpLoads))
	}
	for _, u := range r.res.Unattributed {
		t.Errorf("wire transaction of no page: %s:%d #%d %s %s", u.Client, u.Port, u.Index, u.Method, u.URL)
	}
	perFront := [2]int{}
	for i, w := range r.frontW {
		perFront[i] = len(w.Conns)
		for _, c := range w.Conns {
			if c.Server != ECMPVIP || c.Client.String() != r.res.Truth[0].Client {
				t.Errorf("front end %d sees %s:%d -> %s, want the client to the VIP", i, c.Client, c.ClientPort, c.Server)
			}
		}
	}
	for _, c := range r.res.Wire.Conns {
		if _, ok := r.sensorOf[connKey{c.Client, c.ClientPort}]; !ok {
			t.Errorf("client connection %s:%d crossed no front end's capture", c.Client, c.ClientPort)
		}
	}
	if n := perFront[0] + perFront[1]; n != len(r.res.Wire.Conns) {
		t.Errorf("front ends saw %d + %d connections, the client's wire has %d", perFront[0], perFront[1], len(r.res.Wire.Conns))
	}
	split := 0
	for i := range r.res.Truth {
		p := &r.res.Truth[i]
		if p.Wire == nil || !p.Wire.Valid {
			t.Fatalf("%s: no usable wire truth: %+v", p, p.Wire)
		}
		s := r.pageSensors(p, false)
		if len(s) == 2 {
			split++
		}
		t.Logf("%s: %d in load, %d after load, front ends %v", p, len(p.Wire.InLoad), len(p.Wire.AfterLoad), s)
	}
	t.Logf("connections: client %d, front end 0 %d, front end 1 %d; pages split across front ends: %d of %d",
		len(r.res.Wire.Conns), perFront[0], perFront[1], split, len(r.res.Truth))
	return split
}

// rtmonCmd runs the rtmon binary and returns its stdout.
func rtmonCmd(ctx context.Context, t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr []byte
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = ee.Stderr
	}
	if err != nil {
		t.Fatalf("rtmon %v: %v\n%s%s", args, err, out, stderr)
	}
	return out
}

// stored is every record of a store, and each transaction's sensor.
type stored struct {
	txns     []*storedTxn
	pvs      map[string]*storedPV // by id
	conns    []any
	bySensor map[string][]*storedPV
}

type storedTxn struct {
	rec    rtmonTxnRec
	raw    any
	sensor string
}

type storedPV struct {
	rec rtmonPV
	raw any
	// sensors as the record says.
	sensors []string
}

// readStored reads every record of the store, sensor by sensor.
func readStored(ctx context.Context, t *testing.T, url string) *stored {
	t.Helper()
	st, err := store.Open(ctx, url, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := &stored{pvs: map[string]*storedPV{}, bySensor: map[string][]*storedPV{}}
	for _, sensor := range ecmpSensors {
		for _, kind := range []query.Kind{query.Transactions, query.Pageviews} {
			res, err := st.Search(ctx, query.SearchQuery{Kind: kind, Sensor: sensor, Limit: 10000})
			if err != nil {
				t.Fatalf("search %s of %s: %v", kind, sensor, err)
			}
			if res.Total > 10000 {
				t.Fatalf("%d %s: more than one page", res.Total, kind)
			}
			for _, x := range res.Transactions {
				s.txns = append(s.txns, &storedTxn{rec: recode[rtmonTxnRec](t, x), raw: x, sensor: sensor})
			}
			for _, p := range res.Pageviews {
				pv := &storedPV{rec: recode[rtmonPV](t, p), raw: p, sensors: p.Sensors}
				s.pvs[pv.rec.ID] = pv
				s.bySensor[sensor] = append(s.bySensor[sensor], pv)
			}
		}
		cs, err := st.SearchConnections(ctx, query.ConnectionSearch{Sensor: sensor, Limit: 10000})
		if err != nil {
			t.Fatalf("connections of %s: %v", sensor, err)
		}
		for _, c := range cs.Connections {
			s.conns = append(s.conns, c)
		}
	}
	t.Logf("store: %d transactions, %d pageviews, %d connections", len(s.txns), len(s.pvs), len(s.conns))
	return s
}

// recode turns a stored record into the JSON Lines record the
// single-sensor tests read (analyze --out writes the same encoding).
func recode[T any](t *testing.T, v any) T {
	t.Helper()
	var out T
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		t.Fatalf("recode %T: %v", v, err)
	}
	return out
}

// txnOf finds the stored transaction of a wire transaction: same client,
// port and index (the ports of one run are not reused: checked by
// checkECMPHarness's one connection per port and front end).
func (s *stored) txnOf(x WireID) *storedTxn {
	for _, st := range s.txns {
		r := &st.rec
		if r.Client == x.Client && r.ClientPort == int(x.Port) && r.Index == x.Index && pathOf(r.URL) == x.URL {
			return st
		}
	}
	return nil
}

// checkSplitBeforeStitch: with each sensor's own grouping, a page whose
// connections took both front ends has its container's pageview short of
// the objects the other front end carried. Some page must show it, or
// stitching would have nothing to do.
func checkSplitBeforeStitch(t *testing.T, r *ecmpRun, before *stored, split int) {
	t.Helper()
	short := 0
	for i := range r.res.Truth {
		p := &r.res.Truth[i]
		pw := p.Wire
		cx := before.txnOf(pw.Chain[len(pw.Chain)-1])
		if cx == nil {
			t.Errorf("%s: container not stored by any sensor", p)
			continue
		}
		pv := before.pvs[cx.rec.PageviewID]
		if pv == nil {
			t.Errorf("%s: container in no pageview of sensor %s", p, cx.sensor)
			continue
		}
		other := 0
		for _, x := range pw.InLoad {
			if s := r.sensorOf[connKey{netip.MustParseAddr(x.Client), x.Port}]; s != cx.sensor {
				other++
			}
		}
		t.Logf("%s: before stitching, sensor %s's pageview has %d objects of %d in load (%d on the other front end), sensors %v",
			p, cx.sensor, pv.rec.Objects, len(pw.InLoad), other, pv.sensors)
		if other > 0 && pv.rec.Objects < len(pw.InLoad) {
			short++
		}
	}
	t.Logf("before stitching: %d of the %d pages ECMP split have a pageview short of objects", short, split)
	if short == 0 {
		t.Errorf("before stitching, no page's pageview lacks objects of the other front end (%d pages split): nothing to stitch", split)
	}
}

// keepECMP copies the run's captures into -testbed.keep.
func keepECMP(t *testing.T, r *ecmpRun) {
	if *keepDir == "" {
		return
	}
	for _, src := range append([]string{r.res.ClientCapture}, r.fronts[:]...) {
		b, err := os.ReadFile(src)
		if err == nil {
			err = os.WriteFile(filepath.Join(*keepDir, "ecmp-"+filepath.Base(src)), b, 0o644)
		}
		if err != nil {
			t.Errorf("keep capture: %v", err)
		}
	}
	t.Logf("captures kept in %s", *keepDir)
}
