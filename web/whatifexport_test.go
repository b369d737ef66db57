package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/whatif"
)

// checkRulesFile wants a rules file that parses to exactly want (rule text)
// and says what it is for.
func checkRulesFile(t *testing.T, body string, want []string, mentions ...string) {
	t.Helper()
	rs, err := whatif.ParseRules(body)
	if err != nil {
		t.Fatalf("the rules file does not parse: %v\n%s", err, body)
	}
	var got []string
	for _, r := range rs {
		got = append(got, r.String())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the rules file holds %q, want %q\n%s", got, want, body)
	}
	for _, m := range mentions {
		if !strings.Contains(body, m) {
			t.Errorf("the rules file does not mention %q:\n%s", m, body)
		}
	}
}

func TestWhatIfRulesFile(t *testing.T) {
	tee := whatIfCapture(t)
	ts := whatIfServer(t, tee, WhatIfOptions{})
	q := url.Values{"rules": {fastSYN}}
	_, api := whatIfAPI(t, ts, q)
	if len(api.Ranking) < 2 {
		t.Fatalf("ranking of %d entries", len(api.Ranking))
	}
	for _, rank := range []int{1, len(api.Ranking)} {
		qq := url.Values{"rules": {fastSYN}, "rank": {strconv.Itoa(rank)}}
		resp := get(t, ts.URL+"/whatif/rules.txt?"+qq.Encode())
		body := string(readAll(t, resp))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("rank %d: %d %s", rank, resp.StatusCode, body)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			t.Errorf("Content-Type %q", ct)
		}
		if cd := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment;") || !strings.Contains(cd, "rank-"+strconv.Itoa(rank)) {
			t.Errorf("Content-Disposition %q", cd)
		}
		r := api.Ranking[rank-1]
		mentions := []string{"Rank " + strconv.Itoa(rank) + " of the ranking for class " + api.Class,
			strconv.Itoa(api.Loaded.Transactions) + " transactions", strconv.Itoa(api.Loaded.Pageviews) + " pageviews"}
		for _, c := range api.Classes {
			mentions = append(mentions, "#   "+c.Class+" ("+string(c.Priority)+" priority")
		}
		checkRulesFile(t, body, r.Rules, mentions...)
	}
	// Without a rank: the rules evaluated.
	resp := get(t, ts.URL+"/whatif/rules.txt?"+q.Encode())
	checkRulesFile(t, string(readAll(t, resp)), api.Rules, "Assumptions of the models:")
	// The link names the rules it showed: a ranking that moved since gives
	// them at their new rank, or 409 when they are no longer ranked.
	second := strings.Join(api.Ranking[1].Rules, "\n")
	resp = get(t, ts.URL+"/whatif/rules.txt?"+url.Values{"rules": {fastSYN}, "rank": {"1"}, "expect": {second}}.Encode())
	checkRulesFile(t, string(readAll(t, resp)), api.Ranking[1].Rules, "Rank 2 of the ranking")
	resp = get(t, ts.URL+"/whatif/rules.txt?"+url.Values{"rules": {fastSYN}, "rank": {"1"}, "expect": {"IF IP.SRC == 10.9.9.9 THEN SPLICE"}}.Encode())
	if b := readAll(t, resp); resp.StatusCode != http.StatusConflict {
		t.Errorf("rules no longer ranked: %d %s, want 409", resp.StatusCode, b)
	}
	// Bad ranks and rules are the link's fault.
	for _, bad := range []url.Values{{"rules": {fastSYN}, "rank": {"0"}}, {"rules": {fastSYN}, "rank": {"x"}},
		{"rules": {fastSYN}, "rank": {strconv.Itoa(len(api.Ranking) + 1)}}, {"rules": {"IF nonsense"}, "rank": {"1"}}} {
		resp := get(t, ts.URL+"/whatif/rules.txt?"+bad.Encode())
		if b := readAll(t, resp); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%v: %d %s, want 400", bad, resp.StatusCode, b)
		}
	}
}

func TestBrowserWhatIfDownloadRules(t *testing.T) {
	tee := whatIfCapture(t)
	ts := whatIfServer(t, tee, WhatIfOptions{})
	q := url.Values{"rules": {fastSYN}}
	tb := newTab(t)
	tb.open(ts.URL+"/whatif/?"+q.Encode(), `#whatif-result[data-rendered="1"]`)
	var shown struct {
		Rows, Links int
		Download    bool
		Href, Rules string
	}
	tb.eval(`(() => {
	  const rows = [...document.querySelectorAll('#ranking tbody tr[data-gain]')];
	  const a = rows.length ? rows[0].querySelector('a.rk-download') : null;
	  return { Rows: rows.length, Links: document.querySelectorAll('#ranking a.rk-download').length,
	    Download: !!a && a.hasAttribute('download'), Href: a ? a.getAttribute('href') : '', Rules: rows.length ? rows[0].dataset.rules : '' };
	})()`, &shown)
	if shown.Rows == 0 || shown.Links != shown.Rows || !shown.Download || !strings.HasPrefix(shown.Href, "/whatif/rules.txt?") {
		t.Fatalf("ranking rows %d, download links %d (download attribute %v), first %q", shown.Rows, shown.Links, shown.Download, shown.Href)
	}
	// Fetch the link as the page would and read what it gives.
	var got struct {
		Status     int
		Type, Disp string
		Text       string
	}
	tb.eval(`fetch(document.querySelector('#ranking a.rk-download').href).then(async (r) => { window.__dl = {
	  Status: r.status, Type: r.headers.get('content-type'), Disp: r.headers.get('content-disposition'), Text: await r.text() }; },
	  (e) => { window.__dl = { Status: -1, Text: String(e) }; }), true`, nil)
	tb.waitFor(`window.__dl`, 2*time.Minute)
	tb.eval(`window.__dl`, &got)
	if got.Status != http.StatusOK || !strings.HasPrefix(got.Type, "text/plain") || !strings.HasPrefix(got.Disp, "attachment") {
		t.Fatalf("the download answered %d %q %q: %s", got.Status, got.Type, got.Disp, got.Text)
	}
	checkRulesFile(t, got.Text, strings.Split(shown.Rules, "\n"), "Rank 1 of the ranking for class ")
	tb.clean("what-if download")
}
