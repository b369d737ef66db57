package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store/query"
)

// An annotation posted through the API shows on the overview's time chart
// as a marker carrying its text, as text: a hostile text runs nothing.
func TestBrowserAnnotationMarker(t *testing.T) {
	classes := testClasses(t)
	st := openStore(t, classes)
	ingest(t, st, classes, knownCapturePath(t))
	ext, err := st.Extent(context.Background(), query.Transactions)
	if err != nil || ext.N == 0 {
		t.Fatalf("extent %+v, %v", ext, err)
	}
	_, ts := newTestServer(t, Config{Store: st, Annotations: st})
	c := annotationClient{t, ts}
	mid := (ext.First + ext.Last) / 2 / int64(time.Millisecond)
	text := `<img src=x onerror="window.__pwned=1">deploy <b>v2</b>`
	js, _ := json.Marshal(map[string]any{"text": text, "time": mid, "tags": []string{"deploy"}})
	if code, body := c.do("POST", "/api/annotations", string(js), "application/json", nil); code != http.StatusCreated {
		t.Fatalf("POST: %d %s", code, body)
	}
	// Outside the data: listed for no chart of this range.
	js, _ = json.Marshal(map[string]any{"text": "long ago", "time": ext.First/int64(time.Millisecond) - 86_400_000})
	if code, body := c.do("POST", "/api/annotations", string(js), "application/json", nil); code != http.StatusCreated {
		t.Fatalf("POST: %d %s", code, body)
	}

	tb := newTab(t)
	tb.open(ts.URL+"/", `#overview[data-rendered="1"]`)
	tb.waitFor(`document.querySelector('#series-chart .ann-marker')`, time.Minute)
	var markers []struct {
		Text, Title, Source string
		TimeMs              int64
		Hidden              bool
		X, Left, Right      float64
	}
	tb.eval(`[...document.querySelectorAll('#series-chart .ann-marker')].map((m) => {
		const over = m.closest('.u-over').getBoundingClientRect();
		return { text: m.querySelector('.ann-label').textContent, title: m.title, source: m.dataset.source,
			timeMs: Number(m.dataset.timeMs), hidden: m.hidden, x: m.getBoundingClientRect().left, left: over.left, right: over.right };
	})`, &markers)
	if len(markers) != 1 {
		t.Fatalf("markers %+v, want the one annotation inside the range", markers)
	}
	m := markers[0]
	if m.Text != text || !strings.Contains(m.Title, text) || !strings.Contains(m.Title, "[deploy]") || m.Source != query.SourceUser || m.TimeMs != mid {
		t.Errorf("marker %+v, want text %q", m, text)
	}
	if m.Hidden || m.X < m.Left || m.X > m.Right {
		t.Errorf("marker at x=%v, outside the plot [%v, %v] or hidden", m.X, m.Left, m.Right)
	}
	// Drawn where the chart puts its time: the same position uPlot gives
	// the annotation's time on this chart's x scale.
	var want float64
	tb.eval(fmt.Sprintf(`(() => { const u = document.getElementById('series-chart').uplot;
		return u ? u.over.getBoundingClientRect().left + u.valToPos(%d / 1000, 'x') : -1e9; })()`, mid), &want)
	if abs(want-m.X) > 2 { // -1e9: the chart's uPlot instance was not found
		t.Errorf("marker at x=%v, the chart puts that time at %v", m.X, want)
	}
	var injected struct {
		Pwned bool
		Imgs  int
	}
	tb.eval(`({ pwned: !!window.__pwned, imgs: document.querySelectorAll('#series-chart img, #series-chart b').length })`, &injected)
	if injected.Pwned || injected.Imgs != 0 {
		t.Errorf("annotation text became markup: %+v", injected)
	}
	tb.clean("overview with annotations")
	tb.screenshot("annotations")
}
