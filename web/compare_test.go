package web

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/compare"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
)

// compareT0 starts the compare tests' records; side A is its first 10
// minutes, B the next 10.
var compareT0 = time.Date(2026, 3, 2, 14, 0, 0, 0, time.UTC)

// compareTestStore holds 300 transactions per class and side, totals
// lognormal around 200 ms; in B premium's server time is 150 ms longer,
// standard's unchanged (another draw of the same distribution).
func compareTestStore(t testing.TB) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), "memory:", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rng := rand.New(rand.NewPCG(17, 4))
	var b store.Batch
	for side := range 2 {
		for i := range 600 {
			class, client := "premium", netip.AddrFrom4([4]byte{198, 51, 100, byte(1 + i%7)})
			if i%2 == 1 {
				class, client = "standard", netip.AddrFrom4([4]byte{203, 0, 113, byte(1 + i%50)})
			}
			start := compareT0.UnixNano() + int64(side)*int64(10*time.Minute) + int64(i)*int64(time.Second)
			tconn := int64(20e6)
			tserver := int64(150e6 * math.Exp(0.4*rng.NormFloat64()))
			if side == 1 && class == "premium" {
				tserver += 150e6
			}
			ttransfer := int64(30e6 * math.Exp(0.3*rng.NormFloat64()))
			total := tconn + tserver + ttransfer
			id := fmt.Sprintf("c%d-%d", side, i)
			b.Transactions = append(b.Transactions, &reconstruct.Transaction{ID: id + "/0", ConnectionID: id,
				Client: client, ClientPort: uint16(40000 + i), Server: netip.MustParseAddr("192.0.2.1"), ServerPort: 80,
				Start: start, End: start + total, Tconn: tconn, Tserver: tserver, Ttransfer: ttransfer, Total: total,
				Method: "GET", Host: "example.com", URL: "/", Status: 200, Class: class})
		}
	}
	if err := st.WriteBatch(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if err := st.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

func compareQuery() url.Values {
	at := func(min int) string {
		return compareT0.Add(time.Duration(min) * time.Minute).Format("2006-01-02T15:04")
	}
	return url.Values{"a_from": {at(0)}, "a_to": {at(10)}, "b_from": {at(10)}, "b_to": {at(20)}}
}

func TestCompareAPI(t *testing.T) {
	_, ts := newTestServer(t, Config{Store: compareTestStore(t)})
	var rep compare.Report
	check := func(q url.Values) {
		t.Helper()
		resp := get(t, ts.URL+"/api/compare?"+q.Encode())
		body := readAll(t, resp)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", q.Encode(), resp.StatusCode, body)
		}
		rep = compare.Report{}
		if err := json.Unmarshal(body, &rep); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, c := range rep.Classes {
			got[c.Class] = c.Verdict
		}
		if got["premium"] != compare.Slower || got["standard"] != compare.NoChange {
			t.Errorf("%s: verdicts %v", q.Encode(), got)
		}
	}
	check(compareQuery())
	// The same sides as at= and window=.
	check(url.Values{"at": {compareT0.Add(10 * time.Minute).Format(time.RFC3339)}, "window": {"10m"}})
	if rep.A.Range.To != compareT0.Add(10*time.Minute).UnixNano() || rep.B.Range.From != rep.A.Range.To {
		t.Errorf("at/window sides: %+v %+v", rep.A, rep.B)
	}
	// No ranges: the stored span's two halves.
	resp := get(t, ts.URL+"/api/compare")
	if b := readAll(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"classes"`) {
		t.Errorf("no ranges: %d %s", resp.StatusCode, b)
	}
	for _, q := range []string{"a_from=yesterday", "at=2026-01-01&window=-5m", "a_from=2026-01-02&a_to=2026-01-01", "a_class=premium"} {
		resp := get(t, ts.URL+"/api/compare?"+q)
		if b := readAll(t, resp); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", q, resp.StatusCode, b)
		}
	}
	// Two classes, one side each.
	q := compareQuery()
	q.Set("a_class", "standard")
	q.Set("b_class", "premium")
	q.Set("b_from", q.Get("a_from"))
	q.Set("b_to", q.Get("a_to"))
	resp = get(t, ts.URL+"/api/compare?"+q.Encode())
	body := readAll(t, resp)
	if err := json.Unmarshal(body, &rep); err != nil || len(rep.Classes) != 1 || rep.Classes[0].Class != "premium vs standard" {
		t.Errorf("two classes: %v %s", err, body)
	}
}

func TestCompareReport(t *testing.T) {
	_, ts := newTestServer(t, Config{Store: compareTestStore(t)})
	q := compareQuery()
	q.Set("inline", "1")
	resp := get(t, ts.URL+"/export/report.html?"+q.Encode())
	body := string(readAll(t, resp))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="compare"`) {
		t.Fatalf("report with compare parameters: %d, no comparison section", resp.StatusCode)
	}
	sec := body[strings.Index(body, `id="compare"`):]
	sec = sec[:strings.Index(sec, "</section>")]
	for _, want := range []string{"premium: <span class=\"verdict\">" + compare.Slower, "standard: <span class=\"verdict\">" + compare.NoChange, "transactions tserver"} {
		if !strings.Contains(sec, want) {
			t.Errorf("comparison section lacks %q:\n%s", want, sec)
		}
	}
	resp = get(t, ts.URL+"/export/report.html?inline=1")
	if body := string(readAll(t, resp)); strings.Contains(body, `id="compare"`) {
		t.Error("a report without compare parameters has a comparison")
	}
}
