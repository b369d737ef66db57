package web

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/query"
	"github.com/rtmon/rtmon/store/storetest"
	"github.com/rtmon/rtmon/synth"
)

// Two front ends' sensors write into one store. The second's id is
// hostile on purpose: sensor ids are configuration, but a UI that sets
// them as markup would run whatever a sensor was named.
const hostileSensor = `fe-b<img src=x onerror="window.__pwned=1">`

var (
	twoSensorsOnce sync.Once
	twoSensorsDB   string
	twoSensorsDir  string
	twoSensorsN    map[string]int64 // transactions each sensor stored
	twoSensorsErr  error
)

// twoSensorStore returns a store two sensors wrote into, each from its own
// synthetic capture, and how many transactions each stored.
func twoSensorStore(t *testing.T) (store.Store, map[string]int64) {
	t.Helper()
	classes := testClasses(t)
	open := func(sensor string) (store.Store, error) {
		return store.Open(context.Background(), "duckdb:"+twoSensorsDB, store.Options{Sensor: sensor,
			Classify: func(a netip.Addr) string { n, _ := classes.Classify(a); return n }})
	}
	twoSensorsOnce.Do(func() {
		// Shared by the tests of the package: removed in TestMain's exit.
		dir, err := os.MkdirTemp("", "rtmon-web-sensors-")
		if err != nil {
			twoSensorsErr = err
			return
		}
		twoSensorsDir = dir
		twoSensorsDB, twoSensorsN = filepath.Join(dir, "two.db"), map[string]int64{}
		for i, sensor := range []string{"fe-a", hostileSensor} {
			pcap := filepath.Join(dir, fmt.Sprintf("fe%d.pcap", i))
			wl := synth.Workload{Seed: int64(31 + i), Clients: 6 + 4*i, Duration: 30 * time.Second, PageviewsPerClient: 2}
			if _, err := synth.GenerateFile(pcap, synth.Options{Nanosecond: true}, wl); err != nil {
				twoSensorsErr = err
				return
			}
			// DuckDB has one writer per file: the sensors take turns.
			st, err := open(sensor)
			if err != nil {
				twoSensorsErr = err
				return
			}
			before := st.Stats().Written
			ingest(t, st, classes, pcap)
			res, err := st.Search(context.Background(), query.SearchQuery{Sensor: sensor, Limit: 1})
			if err == nil {
				err = st.Close()
			}
			if err != nil {
				twoSensorsErr = err
				return
			}
			if res.Total == 0 || st.Stats().Written == before {
				twoSensorsErr = fmt.Errorf("sensor %s stored no transactions", sensor)
				return
			}
			twoSensorsN[sensor] = res.Total
		}
	})
	if twoSensorsErr != nil {
		t.Fatal(twoSensorsErr)
	}
	st, err := open("reader")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, twoSensorsN
}

// The sensor panel's numbers, search's and the what-if's sensor= each
// answer for one front end's records exactly.
func TestSensorsAPI(t *testing.T) {
	st, n := twoSensorStore(t)
	ts := whatIfServer(t, st, WhatIfOptions{})
	var sr SensorsResponse
	getJSONInto(t, ts.URL+"/api/sensors", &sr)
	if len(sr.Sensors) != 2 || sr.Truncated {
		t.Fatalf("sensors %+v, want two", sr.Sensors)
	}
	for _, row := range sr.Sensors {
		var inClasses int64
		for _, c := range row.Classes {
			inClasses += c.Count
			if len(c.Values) != len(quantiles) || c.Values[0] > c.Values[len(c.Values)-1] {
				t.Errorf("%s/%s: percentiles %v", row.Sensor, c.Class, c.Values)
			}
		}
		if row.Transactions != n[row.Sensor] || inClasses != row.Transactions || row.Connections == 0 || row.First > row.Last {
			t.Errorf("sensor %q: %+v (%d in its classes), want %d transactions", row.Sensor, row.SensorCounts, inClasses, n[row.Sensor])
		}
	}
	all := n["fe-a"] + n[hostileSensor]
	for _, sensor := range []string{"fe-a", hostileSensor, ""} {
		want := n[sensor]
		if sensor == "" {
			want = all
		}
		var res SearchResponse
		if getJSONInto(t, ts.URL+"/api/search?sensor="+url.QueryEscape(sensor), &res); res.Total != want {
			t.Errorf("search sensor=%q: %d matches; want %d", sensor, res.Total, want)
		}
		var wr WhatIfResponse
		if getJSONInto(t, ts.URL+"/whatif/api?rules=&sensor="+url.QueryEscape(sensor), &wr); int64(wr.Loaded.Transactions) != want || wr.Loaded.Matching != want {
			t.Errorf("what-if sensor=%q: loaded %+v; want %d transactions", sensor, wr.Loaded, want)
		}
		checkSensorOverviewAPI(t, ts.URL, st, sensor, want, "")
	}
	// Where the overview reads rollups, one sensor's reads its own rows
	// (the rollups are kept per sensor) and says what the records say.
	rolled, rts := newTestServer(t, Config{Store: st, ExactBelow: 1})
	ext := extent{N: all}
	if !rolled.useRollups(ext, overviewParams{component: "total"}, time.Minute) ||
		!rolled.useRollups(ext, overviewParams{component: "total", sensor: "fe-a"}, time.Minute) {
		t.Error("the overview of every sensor and of one should read the rollups")
	}
	for _, sensor := range []string{"fe-a", hostileSensor, ""} {
		want := n[sensor]
		if sensor == "" {
			want = all
		}
		checkSensorOverviewAPI(t, rts.URL, st, sensor, want, "")
	}
	// The panel there reads every sensor's percentiles from one read of
	// the rollups: the same classes and counts as the exact panel, each
	// value within the rollups' error, and it says so.
	var rolledSR SensorsResponse
	getJSONInto(t, rts.URL+"/api/sensors", &rolledSR)
	if rolledSR.Approx != query.RollupRelError || sr.Approx != 0 {
		t.Errorf("approx %v from the rollups, %v exact; want %v and 0", rolledSR.Approx, sr.Approx, query.RollupRelError)
	}
	if len(rolledSR.Sensors) != len(sr.Sensors) {
		t.Fatalf("%d sensors from the rollups, %d exact", len(rolledSR.Sensors), len(sr.Sensors))
	}
	for i, row := range rolledSR.Sensors {
		exact := sr.Sensors[i]
		if row.SensorCounts != exact.SensorCounts {
			t.Errorf("sensor %q from the rollups %+v, exact %+v", row.Sensor, row.SensorCounts, exact.SensorCounts)
		}
		for _, miss := range storetest.RollupPercentileMisses(panelClasses(row), panelClasses(exact), quantiles) {
			t.Errorf("sensor %q from the rollups: %s", row.Sensor, miss)
		}
	}
	long := strings.Repeat("s", maxSensorName+1)
	for _, path := range []string{"/api/search", "/whatif/api", "/api/overview"} {
		if resp := get(t, ts.URL+path+"?sensor="+long); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s with a %d-byte sensor: %d, want 400", path, len(long), resp.StatusCode)
		}
	}
}

// The overview lists both sensors as text, and a sensor's search link
// finds exactly its transactions, with the sensor in the form.
func TestBrowserSensorPanel(t *testing.T) {
	st, n := twoSensorStore(t)
	_, ts := newTestServer(t, Config{Store: st})
	tb := newTab(t)
	tb.open(ts.URL+"/", `#overview[data-rendered="1"]`)
	tb.waitFor(`document.querySelector('#sensor-card[data-state="shown"], #sensor-card[data-state="error"]')`, time.Minute)
	var rows []struct {
		Sensor string
		Tx     string
		Pwned  bool
		Imgs   int
	}
	tb.eval(`[...document.querySelectorAll('#sensors tbody tr')].filter((r) => r.querySelector('.sensor-tx')).map((r) => ({
		sensor: r.dataset.sensor, tx: r.querySelector('.sensor-tx').textContent,
		pwned: !!window.__pwned, imgs: document.querySelectorAll('#sensor-card img').length }))`, &rows)
	if len(rows) != 2 {
		t.Fatalf("sensor rows %+v, want two", rows)
	}
	for _, r := range rows {
		if strings.ReplaceAll(r.Tx, ",", "") != fmt.Sprint(n[r.Sensor]) || r.Pwned || r.Imgs != 0 {
			t.Errorf("row %+v: want %d transactions of %q, shown as text", r, n[r.Sensor], r.Sensor)
		}
	}
	var text string
	tb.eval(`document.getElementById('sensor-card').textContent`, &text)
	if !strings.Contains(text, hostileSensor) {
		t.Errorf("the hostile sensor id is not shown as text: %q", text)
	}
	tb.clean("overview with two sensors")
	tb.screenshot("sensors")
	tb.eval(`document.querySelector('#sensors tr[data-sensor="fe-a"] .sensor-search').click()`, nil)
	tb.waitFor(`document.querySelector('#result-summary')`, time.Minute)
	var got struct {
		Total  string
		Sensor string
	}
	tb.eval(`({ total: document.getElementById('result-summary').dataset.total, sensor: document.getElementById('sensor').value })`, &got)
	if got.Total != fmt.Sprint(n["fe-a"]) || got.Sensor != "fe-a" {
		t.Errorf("fe-a's search link: %+v, want %d transactions and the sensor in the form", got, n["fe-a"])
	}
	tb.clean("search of one sensor")

	// The hostile sensor's overview link: its numbers alone, its id as
	// text, and a way back to every sensor.
	tb.open(ts.URL+"/", `#overview[data-rendered="1"]`)
	tb.waitFor(`document.querySelector('#sensor-card[data-state="shown"]')`, time.Minute)
	tb.eval(`[...document.querySelectorAll('#sensors tr')].find((r) => r.dataset.sensor && r.dataset.sensor !== 'fe-a').querySelector('.sensor-overview').click()`, nil)
	tb.waitFor(`document.getElementById('overview-sensor')`, time.Minute)
	var ov struct {
		Sensor, Count string
		Pwned         bool
		Back          string
	}
	tb.eval(`({ sensor: document.getElementById('overview-sensor').textContent,
		count: [...document.querySelectorAll('#percentiles tbody tr')].reduce((a, r) => a + Number(r.dataset.count), 0).toString(),
		pwned: !!window.__pwned, back: document.getElementById('overview-all-sensors').getAttribute('href') })`, &ov)
	if ov.Sensor != hostileSensor || ov.Count != fmt.Sprint(n[hostileSensor]) || ov.Pwned || strings.Contains(ov.Back, "sensor=") {
		t.Errorf("hostile sensor's overview: %+v, want its %d transactions, its id as text, a link to all sensors", ov, n[hostileSensor])
	}
	tb.clean("overview of one sensor")
}

// checkSensorOverviewAPI: the overview of one sensor ("" all) counts its
// want transactions everywhere it counts them, and its counters, breakdown
// and top lists equal the store's own reads with that sensor.
func checkSensorOverviewAPI(t *testing.T, base string, st store.Store, sensor string, want int64, extra string) {
	t.Helper()
	var o Overview
	getJSONInto(t, base+"/api/overview?sensor="+url.QueryEscape(sensor)+extra, &o)
	var inPct, inHist, inBreakdown int64
	for _, p := range o.Percentiles {
		inPct += p.Count
	}
	for _, h := range o.Histograms {
		inHist += h.Total
	}
	for _, b := range o.Breakdown {
		inBreakdown += b.Count
	}
	if o.Sensor != sensor || o.Counters.Transactions != want || inPct != want || inHist != want || inBreakdown != want {
		t.Errorf("overview sensor=%q: sensor %q, counters %d, percentiles %d, histograms %d, breakdown %d transactions; want %d",
			sensor, o.Sensor, o.Counters.Transactions, inPct, inHist, inBreakdown, want)
	}
	k, err := st.SensorCounters(context.Background(), o.Range, "", sensor)
	if err != nil {
		t.Fatal(err)
	}
	if o.Counters != k {
		t.Errorf("overview sensor=%q: counters %+v, want the store's %+v", sensor, o.Counters, k)
	}
	top, err := st.TopSlow(context.Background(), query.TopQuery{Kind: query.Transactions, Range: o.Range, Sensor: sensor, By: "url", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(o.Top["url"]) != fmt.Sprint(nonNil(top)) {
		t.Errorf("overview sensor=%q: slowest URLs %v, want %v", sensor, o.Top["url"], top)
	}
}

// panelClasses is a panel row's classes as the store answers them.
func panelClasses(row SensorRow) []query.ClassPercentiles {
	out := make([]query.ClassPercentiles, len(row.Classes))
	for i, c := range row.Classes {
		out[i] = query.ClassPercentiles{Class: c.Class, Count: c.Count, Values: c.Values}
	}
	return out
}
