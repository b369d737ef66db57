package web

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
)

// sloRecord is one stored record as the test wrote it.
type sloRecord struct {
	kind  string // pageview.SLOPageview or SLOTransaction
	class string
	start int64
	total int64
}

var sloTestObjectives = []pageview.ClassSLO{
	{Class: "premium", SLO: pageview.SLO{Kind: pageview.SLOTransaction, Under: 250 * time.Millisecond, Target: 0.99, Window: 30 * 24 * time.Hour}},
	{Class: "premium", SLO: pageview.SLO{Kind: pageview.SLOPageview, Under: 2 * time.Second, Target: 0.95, Window: 7 * 24 * time.Hour}},
	{Class: "standard", SLO: pageview.SLO{Kind: pageview.SLOPageview, Under: time.Second, Target: 0.9, Window: 14 * 24 * time.Hour}},
}

// sloStore fills a store with records spread over 40 days before end (and
// a few after it), at ages on and around every window's bounds, with
// response times on both sides of every threshold (none in the 1.5%
// under a threshold where the grid edge lies). It returns what it wrote.
func sloStore(t *testing.T, end int64) (store.Store, []sloRecord) {
	t.Helper()
	st := openStore(t, testClasses(t))
	h, d := time.Hour, 24*time.Hour
	ages := []time.Duration{-5 * time.Minute, 10 * time.Second, 30 * time.Minute, h - time.Second, h, h + time.Second, 5 * h,
		6 * h, 6*h + time.Minute, 30 * h, 3*d - time.Second, 3 * d, 3*d + 2*time.Minute, 6 * d, 7 * d, 8 * d, 13 * d,
		14*d + time.Second, 15 * d, 29 * d, 30 * d, 31 * d, 40 * d}
	ms := int64(time.Millisecond)
	totals := []int64{100 * ms, 240 * ms, 250 * ms, 900 * ms, 1000 * ms, 1500 * ms, 2000 * ms, 2500 * ms, 5000 * ms}
	classes := []string{"premium", "standard", "other"}
	var recs []sloRecord
	n := 0
	for ai, age := range ages {
		for ti, total := range totals {
			// Not every combination: the classes' counts differ per window.
			if (ai+ti)%4 == 3 {
				continue
			}
			class := classes[(ai*7+ti)%len(classes)]
			start := end - int64(age)
			n++
			id := fmt.Sprintf("r%04d", n)
			client := netip.MustParseAddr("192.0.2." + strconv.Itoa(1+n%200))
			st.Transaction(&reconstruct.Transaction{ID: id, ConnectionID: "c" + id, Client: client, Class: class,
				Start: start, End: start + total, Total: total, Method: "GET", URL: "/x", Status: 200})
			recs = append(recs, sloRecord{pageview.SLOTransaction, class, start, total})
			if ti%2 == 0 {
				st.Pageview(&pageview.Pageview{ID: "p" + id, Client: client, Class: class, Start: start, End: start + total,
					Total: total, URL: "/x", Status: 200})
				recs = append(recs, sloRecord{pageview.SLOPageview, class, start, total})
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return st, recs
}

// expectSLO counts the written records of the objective in [end-w, end).
func expectSLO(recs []sloRecord, s pageview.ClassSLO, w time.Duration, end int64) (good, total int64) {
	for _, r := range recs {
		if r.kind != s.Kind || r.class != s.Class || r.start < end-int64(w) || r.start >= end {
			continue
		}
		total++
		if r.total < int64(s.Under) {
			good++
		}
	}
	return good, total
}

func checkSLOWindow(t *testing.T, what string, got SLOWindow, recs []sloRecord, s pageview.ClassSLO, w time.Duration, end int64) {
	t.Helper()
	good, total := expectSLO(recs, s, w, end)
	if got.Good != good || got.Total != total || got.Window != int64(w) || got.From != end-int64(w) || got.To != end {
		t.Errorf("%s %s over %v: good %d of %d [%d, %d), want %d of %d [%d, %d)", s.Class, what, w, got.Good, got.Total,
			got.From, got.To, good, total, end-int64(w), end)
	}
	if total == 0 {
		if got.Attained != nil || got.BurnRate != nil {
			t.Errorf("%s %s over %v: ratios without records", s.Class, what, w)
		}
		return
	}
	att := float64(good) / float64(total)
	burn := (1 - att) / (1 - s.Target)
	if got.Attained == nil || got.BurnRate == nil || math.Abs(*got.Attained-att) > 1e-12 || math.Abs(*got.BurnRate-burn) > 1e-9 {
		t.Errorf("%s %s over %v: attained %v burn %v, want %v and %v", s.Class, what, w, got.Attained, got.BurnRate, att, burn)
	}
}

func TestSLOAttainmentAndBurnFromRollups(t *testing.T) {
	end := time.Date(2026, 11, 30, 12, 34, 56, 789, time.UTC).UnixNano() // not on a minute: partial minutes too
	st, recs := sloStore(t, end)
	got, err := computeSLOs(context.Background(), st, sloTestObjectives, end)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(sloTestObjectives) {
		t.Fatalf("%d objectives, want %d", len(got), len(sloTestObjectives))
	}
	distinct := map[int64]bool{}
	for i, s := range sloTestObjectives {
		g := got[i]
		if g.Class != s.Class || g.ID != s.ID() || g.Target != s.Target || len(g.Burn) != 3 {
			t.Fatalf("objective %d: %+v, want %s %s with 3 burn windows", i, g, s.Class, s.ID())
		}
		checkSLOWindow(t, "attainment", g.Attainment, recs, s, s.Window, end)
		if g.Attainment.BudgetLeft == nil || math.Abs(*g.Attainment.BudgetLeft-(1-*g.Attainment.BurnRate)) > 1e-12 {
			t.Errorf("%s: budget left %v with burn %v", s.Class, g.Attainment.BudgetLeft, g.Attainment.BurnRate)
		}
		for j, w := range []time.Duration{time.Hour, 6 * time.Hour, 72 * time.Hour} {
			checkSLOWindow(t, "burn "+g.Burn[j].Label, g.Burn[j], recs, s, w, end)
			distinct[g.Burn[j].Total] = true
		}
	}
	// The windows must count different records, or the test proves little.
	if len(distinct) < 4 {
		t.Errorf("the burn windows count too few distinct totals: %v", distinct)
	}

	// The API: as of the range's end, else the newest record.
	_, ts := newTestServer(t, Config{Store: st, SLOs: sloTestObjectives})
	var resp SLOResponse
	getJSONInto(t, ts.URL+"/api/slo?to="+strconv.FormatInt(end, 10), &resp)
	if resp.AsOf != end || len(resp.SLOs) != len(got) {
		t.Fatalf("/api/slo?to=end: as of %d with %d objectives, want %d and %d", resp.AsOf, len(resp.SLOs), end, len(got))
	}
	for i := range got {
		checkSLOWindow(t, "api attainment", resp.SLOs[i].Attainment, recs, sloTestObjectives[i], sloTestObjectives[i].Window, end)
	}
	newest := int64(0)
	for _, r := range recs {
		if r.kind == pageview.SLOTransaction {
			newest = max(newest, r.start)
		}
	}
	getJSONInto(t, ts.URL+"/api/slo", &resp)
	if resp.AsOf != newest+1 {
		t.Errorf("/api/slo: as of %d, want the newest transaction's start + 1 = %d", resp.AsOf, newest+1)
	}
	s := sloTestObjectives[0]
	checkSLOWindow(t, "api burn 1h", resp.SLOs[0].Burn[0], recs, s, time.Hour, newest+1)
}

func getJSONInto(t *testing.T, url string, out any) {
	t.Helper()
	resp := get(t, url)
	b := readAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}

func TestBrowserOverviewSLOPanel(t *testing.T) {
	end := time.Date(2026, 11, 30, 12, 34, 56, 789, time.UTC).UnixNano()
	st, _ := sloStore(t, end)
	_, ts := newTestServer(t, Config{Store: st, SLOs: sloTestObjectives})
	var api SLOResponse
	q := "?from=" + strconv.FormatInt(end-int64(40*24*time.Hour), 10) + "&to=" + strconv.FormatInt(end, 10)
	getJSONInto(t, ts.URL+"/api/slo"+q, &api)
	tb := newTab(t)
	tb.open(ts.URL+"/"+q, `#slo-card[data-state="shown"]`)
	var rows []struct {
		Class, Text, Attained, AttText string
		Burn                           []struct{ Window, Burn, Text string }
	}
	tb.eval(`[...document.querySelectorAll('#slo tbody tr')].map((tr) => ({
	  Class: tr.dataset.class, Text: tr.cells[1].textContent,
	  Attained: tr.querySelector('.slo-att').dataset.attained, AttText: tr.querySelector('.slo-att').textContent,
	  Burn: [...tr.querySelectorAll('.slo-burn')].map((td) => ({Window: td.dataset.window, Burn: td.dataset.burn, Text: td.textContent})),
	}))`, &rows)
	if len(rows) != len(api.SLOs) {
		t.Fatalf("%d rows for %d objectives", len(rows), len(api.SLOs))
	}
	for i, s := range api.SLOs {
		r := rows[i]
		wantAtt := "–"
		if s.Attainment.Attained != nil {
			wantAtt = fmt.Sprintf("%.2f%%", 100**s.Attainment.Attained)
		}
		if r.Class != s.Class || r.Text != s.Text || r.AttText != wantAtt {
			t.Errorf("row %d: %q %q %q, want %q %q %q", i, r.Class, r.Text, r.AttText, s.Class, s.Text, wantAtt)
		}
		if len(r.Burn) != 3 {
			t.Fatalf("row %d: %d burn cells", i, len(r.Burn))
		}
		for j, w := range s.Burn {
			want := "–"
			if w.BurnRate != nil {
				want = fmt.Sprintf("%.2f×", *w.BurnRate)
				if *w.BurnRate >= 10 {
					want = fmt.Sprintf("%.1f×", *w.BurnRate)
				}
				if f, err := strconv.ParseFloat(r.Burn[j].Burn, 64); err != nil || math.Abs(f-*w.BurnRate) > 1e-9 {
					t.Errorf("row %d burn %s: data %q, want %v", i, w.Label, r.Burn[j].Burn, *w.BurnRate)
				}
			}
			if r.Burn[j].Window != w.Label || r.Burn[j].Text != want {
				t.Errorf("row %d burn %d: %q %q, want %q %q", i, j, r.Burn[j].Window, r.Burn[j].Text, w.Label, want)
			}
		}
	}
	if want := []string{"1h", "6h", "3d"}; rows[0].Burn[0].Window != want[0] || rows[0].Burn[1].Window != want[1] || rows[0].Burn[2].Window != want[2] {
		t.Errorf("burn windows %+v, want %v", rows[0].Burn, want)
	}
	var text string
	tb.eval(`document.getElementById('slo-card').textContent`, &text)
	if strings.Contains(text, "null") || strings.Contains(text, "undefined") || strings.Contains(text, "NaN") {
		t.Errorf("the objectives panel shows %q", text)
	}
	tb.clean("overview with objectives")
	tb.screenshot("overview-slo")
}

// /metrics carries each objective's attainment, budget left and burn rates
// as the overview counts them: as of the newest record, from the store.
func TestMetricsSLOAttainmentAndBurn(t *testing.T) {
	end := time.Date(2026, 11, 30, 12, 34, 56, 789, time.UTC).UnixNano()
	st, recs := sloStore(t, end)
	_, ts := newTestServer(t, Config{Store: st, SLOs: sloTestObjectives})
	var api SLOResponse
	getJSONInto(t, ts.URL+"/api/slo", &api)
	body := string(readAll(t, get(t, ts.URL+"/metrics")))
	value := func(name, labels string) (float64, bool) {
		prefix := name + "{" + labels + "} "
		for _, line := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(line, prefix); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				return f, true
			}
		}
		return 0, false
	}
	checked := 0
	for _, s := range sloTestObjectives {
		labels := fmt.Sprintf(`class=%q,kind=%q,slo=%q`, s.Class, SLOKind(s.SLO), s.ID())
		good, total := expectSLO(recs, s, s.Window, api.AsOf)
		att, ok := value("rtmon_slo_attainment_ratio", labels)
		if total == 0 {
			if ok {
				t.Errorf("%s: attainment %v without records", labels, att)
			}
			continue
		}
		want := float64(good) / float64(total)
		if !ok || math.Abs(att-want) > 1e-12 {
			t.Errorf("%s: attainment %v (present %v), want %d/%d", labels, att, ok, good, total)
		}
		left, ok := value("rtmon_slo_error_budget_remaining_ratio", labels)
		if wantLeft := 1 - (1-want)/(1-s.Target); !ok || math.Abs(left-wantLeft) > 1e-9 {
			t.Errorf("%s: budget left %v, want %v", labels, left, wantLeft)
		}
		for _, w := range []struct {
			label string
			d     time.Duration
		}{{"1h", time.Hour}, {"6h", 6 * time.Hour}, {"3d", 72 * time.Hour}} {
			good, total := expectSLO(recs, s, w.d, api.AsOf)
			burn, ok := value("rtmon_slo_burn_rate", labels+fmt.Sprintf(`,window=%q`, w.label))
			if total == 0 {
				if ok {
					t.Errorf("%s over %s: burn %v without records", labels, w.label, burn)
				}
				continue
			}
			wantBurn := (1 - float64(good)/float64(total)) / (1 - s.Target)
			if !ok || math.Abs(burn-wantBurn) > 1e-9 {
				t.Errorf("%s over %s: burn %v (present %v), want %v", labels, w.label, burn, ok, wantBurn)
			}
			checked++
		}
	}
	if checked < 4 {
		t.Errorf("only %d burn rates had records: the test proves little", checked)
	}
}
