package export

import (
	"bytes"
	"encoding/json"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

const msNS = int64(time.Millisecond)

var harBase = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).UnixNano()

func harTx(conn string, idx int, url, ct, ref string, startMS, tconn, treq, tserver, ttransfer int64) *reconstruct.Transaction {
	tx := &reconstruct.Transaction{ID: conn + "-" + string(rune('0'+idx)), ConnectionID: conn, Index: idx,
		Client: netip.MustParseAddr("198.51.100.7"), ClientPort: 40000, Server: netip.MustParseAddr("2001:db8::80"),
		ServerPort: 80, Start: harBase + startMS*msNS, Tconn: tconn * msNS, Trequest: treq, Tserver: tserver * msNS,
		Ttransfer: ttransfer*msNS + 123456, Method: "GET", Host: "www.example.com", URL: url, Status: 200,
		ContentType: ct, Referer: ref, UserAgent: "Mozilla/5.0", Accept: "*/*", ResponseBytes: 5300, BodyBytes: 5000}
	tx.Total = tx.Tconn + tx.Trequest + tx.Tserver + tx.Ttransfer
	tx.End = tx.Start + tx.Total
	tx.RequestFirst, tx.ResponseLast = tx.Start, tx.End
	return tx
}

// groupedPageview runs three transactions through a Grouper into a HARDir
// and a PageviewWriter, as rtmon analyze wires them.
func groupedPageview(t *testing.T, harDir, outDir string, format Format) (*pageview.Pageview, []*reconstruct.Transaction) {
	t.Helper()
	page := "http://www.example.com/shop/index.html"
	txs := []*reconstruct.Transaction{
		harTx("c1", 0, "/shop/index.html", "text/html; charset=utf-8", "", 0, 100, 7, 200, 50),
		harTx("c2", 0, "/img/a.png?w=10&name=caf%C3%A9&bad=%zz&flag", "image/png", page, 400, 100, 0, 10, 30),
		harTx("c1", 1, "/app.js", "", page, 420, 0, 1000, 20, 10),
	}
	hd, err := NewHARDir(harDir)
	if err != nil {
		t.Fatal(err)
	}
	pw, err := NewPageviewWriter(outDir, format)
	if err != nil {
		t.Fatal(err)
	}
	var got *pageview.Pageview
	var members []*reconstruct.Transaction
	keep := &pvKeeper{f: func(p *pageview.Pageview) {
		cp := *p
		got, members = &cp, append([]*reconstruct.Transaction(nil), p.Transactions...)
	}}
	g := pageview.NewGrouper(pageview.Config{}, nil, pageview.Tee{hd, pw, keep})
	for _, tx := range txs {
		g.Transaction(tx)
	}
	g.Connection(&reconstruct.Connection{ID: "c1", SYNLosses: 1, LastSeen: harBase + 2000*msNS})
	g.Connection(&reconstruct.Connection{ID: "c2", LastSeen: harBase + 2000*msNS})
	g.Flush()
	if err := hd.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	if got == nil || hd.Written() != 1 || len(members) != 3 {
		t.Fatalf("pageview %+v, %d HAR files, %d members", got, hd.Written(), len(members))
	}
	return got, members
}

type pvKeeper struct{ f func(*pageview.Pageview) }

func (*pvKeeper) Connection(*reconstruct.Connection)   {}
func (*pvKeeper) Transaction(*reconstruct.Transaction) {}
func (k *pvKeeper) Pageview(p *pageview.Pageview)      { k.f(p) }

// required lists HAR 1.2's required fields per object.
var required = map[string][]string{
	"log":      {"version", "creator", "entries"},
	"creator":  {"name", "version"},
	"page":     {"startedDateTime", "id", "title", "pageTimings"},
	"entry":    {"startedDateTime", "time", "request", "response", "cache", "timings"},
	"request":  {"method", "url", "httpVersion", "cookies", "headers", "queryString", "headersSize", "bodySize"},
	"response": {"status", "statusText", "httpVersion", "cookies", "headers", "content", "redirectURL", "headersSize", "bodySize"},
	"content":  {"size", "mimeType"},
	"timings":  {"send", "wait", "receive"},
}

func need(t *testing.T, kind string, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is %T, not an object", kind, v)
	}
	for _, k := range required[kind] {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks required %q", kind, k)
		}
	}
	return m
}

var isoMS = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func checkTime(t *testing.T, v any) time.Time {
	t.Helper()
	s, _ := v.(string)
	ts, err := time.Parse(time.RFC3339, s)
	if err != nil || !isoMS.MatchString(s) {
		t.Errorf("startedDateTime %q: %v", s, err)
	}
	return ts
}

func TestHAR(t *testing.T) {
	harDir, outDir := t.TempDir(), t.TempDir()
	pv, members := groupedPageview(t, harDir, outDir, JSONL)
	data, err := os.ReadFile(filepath.Join(harDir, pv.ID+".har"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	log := need(t, "log", doc["log"])
	if log["version"] != "1.2" {
		t.Errorf("version %v", log["version"])
	}
	if c := need(t, "creator", log["creator"]); c["name"] != "rtmon" {
		t.Errorf("creator %v", c)
	}
	pages := log["pages"].([]any)
	if len(pages) != 1 {
		t.Fatalf("%d pages", len(pages))
	}
	pg := need(t, "page", pages[0])
	if pg["id"] != pv.ID || !checkTime(t, pg["startedDateTime"]).Equal(time.Unix(0, pv.Start).Truncate(time.Millisecond)) {
		t.Errorf("page %v", pg)
	}
	if onLoad := pg["pageTimings"].(map[string]any)["onLoad"].(float64); math.Abs(onLoad-float64(pv.Total)/1e6) > 0.001 {
		t.Errorf("onLoad %v, total %d", onLoad, pv.Total)
	}
	entries := log["entries"].([]any)
	if len(entries) != 3 {
		t.Fatalf("%d entries", len(entries))
	}
	for i, ev := range entries {
		e := need(t, "entry", ev)
		tx := members[i] // the Grouper lists them container first, then by Start: the HAR's order too
		checkTime(t, e["startedDateTime"])
		req := need(t, "request", e["request"])
		resp := need(t, "response", e["response"])
		need(t, "content", resp["content"])
		tm := need(t, "timings", e["timings"])
		if _, ok := e["cache"].(map[string]any); !ok {
			t.Errorf("cache %v", e["cache"])
		}
		var sum float64
		for _, k := range []string{"blocked", "dns", "connect", "send", "wait", "receive"} {
			v, ok := tm[k].(float64)
			if !ok {
				t.Fatalf("timing %s: %v", k, tm[k])
			}
			if v < 0 && v != -1 {
				t.Errorf("timing %s = %v", k, v)
			}
			if v > 0 {
				sum += v
			}
		}
		if tm["ssl"].(float64) != -1 || tm["dns"].(float64) != -1 {
			t.Errorf("ssl/dns %v %v", tm["ssl"], tm["dns"])
		}
		if et := e["time"].(float64); math.Abs(sum-et) > 1e-9 || math.Abs(et-float64(tx.Total)/1e6) > 0.002 {
			t.Errorf("entry %d: timings sum %v, time %v, total %v ms", i, sum, et, float64(tx.Total)/1e6)
		}
		if wantConnect := float64(tx.Tconn) / 1e6; (tx.Tconn == 0 && tm["connect"].(float64) != -1) || (tx.Tconn > 0 && tm["connect"].(float64) != wantConnect) {
			t.Errorf("entry %d connect %v, Tconn %d", i, tm["connect"], tx.Tconn)
		}
		if e["pageref"] != pv.ID || e["connection"] != tx.ConnectionID || e["serverIPAddress"] != "2001:db8::80" {
			t.Errorf("entry %d: pageref %v connection %v server %v", i, e["pageref"], e["connection"], e["serverIPAddress"])
		}
		if req["url"] != "http://www.example.com"+tx.URL || req["method"] != "GET" || req["httpVersion"] != "HTTP/1.1" {
			t.Errorf("request %v", req)
		}
		if resp["status"].(float64) != 200 || resp["statusText"] != "OK" || resp["bodySize"].(float64) != 5000 || resp["headersSize"].(float64) != 300 {
			t.Errorf("response %v", resp)
		}
	}
	// Query string, headers and the missing content type.
	img := entries[1].(map[string]any)
	qs, _ := json.Marshal(img["request"].(map[string]any)["queryString"])
	if string(qs) != `[{"name":"w","value":"10"},{"name":"name","value":"café"},{"name":"bad","value":"%zz"},{"name":"flag","value":""}]` {
		t.Errorf("queryString %s", qs)
	}
	hdrs, _ := json.Marshal(img["request"].(map[string]any)["headers"])
	if !strings.Contains(string(hdrs), `{"name":"Referer","value":"http://www.example.com/shop/index.html"}`) ||
		!strings.Contains(string(hdrs), `{"name":"Host","value":"www.example.com"}`) {
		t.Errorf("headers %s", hdrs)
	}
	js := entries[2].(map[string]any)["response"].(map[string]any)
	if js["content"].(map[string]any)["mimeType"] != "x-unknown" || len(js["headers"].([]any)) != 0 {
		t.Errorf("response without content type: %v", js)
	}
	if entries[0].(map[string]any)["_synLosses"] != nil {
		t.Error("SYN losses without a connection map")
	}

	// With the connection map, the opener of a lossy connection says so.
	var buf bytes.Buffer
	if err := WriteHAR(&buf, nil, members, map[string]*reconstruct.Connection{"c1": {ID: "c1", SYNLosses: 1}}); err != nil {
		t.Fatal(err)
	}
	var alone struct {
		Log struct {
			Pages   []any `json:"pages"`
			Entries []struct {
				Pageref   *string `json:"pageref"`
				SYNLosses int     `json:"_synLosses"`
			} `json:"entries"`
		} `json:"log"`
	}
	if err := json.Unmarshal(buf.Bytes(), &alone); err != nil {
		t.Fatal(err)
	}
	if alone.Log.Pages == nil || len(alone.Log.Pages) != 0 || alone.Log.Entries[0].Pageref != nil || alone.Log.Entries[0].SYNLosses != 1 {
		t.Errorf("stand-alone HAR %s", buf.String())
	}
}

func TestHARFileNames(t *testing.T) {
	dir := t.TempDir()
	for _, id := range []string{"../../etc/passwd", "a/b", "", strings.Repeat("x", 100), "C:\\x", "ok-id_1"} {
		pv := &pageview.Pageview{ID: id, Client: netip.MustParseAddr("198.51.100.1"), URL: "/../../x"}
		if err := WriteHARDir(dir, pv, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 6 {
		t.Errorf("%d files", len(ents))
	}
	for _, e := range ents {
		if !regexp.MustCompile(`^[0-9A-Za-z_-]{1,64}\.har$`).MatchString(e.Name()) {
			t.Errorf("file name %q", e.Name())
		}
	}
	if HARFileName("ok-id_1") != "ok-id_1.har" {
		t.Error("a safe id is kept")
	}
	if err := WriteHARDir(dir, nil, nil, nil); err == nil {
		t.Error("nil pageview accepted")
	}
}

// A keyless HTTPS transaction's TLS handshake is HAR's ssl timing, which
// HAR 1.2 counts within connect; the entry's time is still its Total.
func TestHARTimesTLS(t *testing.T) {
	tx := harTx("tls", 0, "", "", "", 0, 40, 0, 30, 2)
	tx.Ttls = 25 * msNS
	tx.Total += tx.Ttls
	tx.End = tx.Start + tx.Total
	var b bytes.Buffer
	if err := WriteHAR(&b, nil, []*reconstruct.Transaction{tx}, nil); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Log struct {
			Entries []struct {
				Time    float64
				Timings struct{ Connect, SSL, Send, Wait, Receive float64 }
			}
		}
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil || len(doc.Log.Entries) != 1 {
		t.Fatalf("%v: %s", err, b.String())
	}
	e := doc.Log.Entries[0]
	if e.Timings.Connect != 65 || e.Timings.SSL != 25 || math.Abs(e.Time-float64(tx.Total)/1e6) > 0.001 {
		t.Errorf("connect %v ssl %v time %v, want 65, 25, %v", e.Timings.Connect, e.Timings.SSL, e.Time, float64(tx.Total)/1e6)
	}
}
