package web

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/rtmon/rtmon/compare"
)

// The compare page in Chromium: the verdicts of two ranges, a new range
// through the controls (a new URL), and Back restoring the first view.
func TestCompareBrowser(t *testing.T) {
	_, ts := newTestServer(t, Config{Store: compareTestStore(t)})
	tb := newTab(t)
	first := compareQuery()
	tb.open(ts.URL+"/compare?"+first.Encode(), `.compare-class[data-class="premium"]`)
	verdict := func(class string) string {
		var v string
		tb.eval(fmt.Sprintf(`(() => { const s = document.querySelector('.compare-class[data-class=%q] h2 .verdict'); return s ? s.textContent : ''; })()`, class), &v)
		return v
	}
	if v, w := verdict("premium"), verdict("standard"); v != compare.Slower || w != compare.NoChange {
		t.Errorf("verdicts: premium %q, standard %q", v, w)
	}
	var canvases, rows int
	tb.eval(`document.querySelectorAll('.compare-class[data-class="premium"] .compare-chart canvas').length`, &canvases)
	tb.eval(`document.querySelectorAll('.compare-class[data-class="premium"] table.compare > tbody > tr').length`, &rows)
	if canvases == 0 || rows != len(compare.TxComponents)+len(compare.PvComponents) {
		t.Errorf("premium: %d canvases, %d rows", canvases, rows)
	}
	var inputs []string
	tb.eval(`['a-from', 'a-to', 'b-from', 'b-to'].map((id) => document.getElementById(id).value)`, &inputs)
	if len(inputs) != 4 || inputs[0] != first.Get("a_from") || inputs[3] != first.Get("b_to") {
		t.Errorf("inputs %v, want the URL's ranges", inputs)
	}
	tb.screenshot("compare")
	tb.clean("compare page")

	// (Chromium shows whole minutes without seconds, as the URL has them.)
	// B becomes the second half of A: premium did not change there.
	newFrom := compareT0.Add(5 * time.Minute).Format("2006-01-02T15:04")
	tb.eval(fmt.Sprintf(`(() => {
	  document.getElementById('b-from').value = %q;
	  document.getElementById('b-to').value = document.getElementById('a-to').value;
	  document.getElementById('compare-go').click();
	  return true; })()`, newFrom), nil)
	tb.waitFor(fmt.Sprintf(`new URLSearchParams(location.search).get('b_from') === %q && !document.getElementById('compare-result').dataset.loading &&
	  document.querySelector('.compare-class[data-class="premium"] h2 .verdict').textContent === %q`, newFrom, compare.NoChange), time.Minute)
	var q string
	tb.eval(`location.search`, &q)
	if v, _ := url.ParseQuery(q[1:]); v.Get("b_to") != first.Get("a_to") {
		t.Errorf("URL after the change: %s", q)
	}

	// Back: the first comparison again, inputs and verdicts.
	tb.back()
	tb.waitFor(fmt.Sprintf(`new URLSearchParams(location.search).get('b_from') === %q && !document.getElementById('compare-result').dataset.loading &&
	  document.querySelector('.compare-class[data-class="premium"] h2 .verdict').textContent === %q &&
	  document.getElementById('b-from').value === %q`, first.Get("b_from"), compare.Slower, first.Get("b_from")), time.Minute)
	tb.clean("after back")
}
