package testbed

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/web"
)

// The RT_HIGH driver reads rtmon live's event stream as the UI does and
// switches the drop as the what-if's windows judge RT_HIGH: the lower
// median of the high class's pageviews completed in the last 30 s (by
// capture time), other classes and transactions ignored, no evidence no
// drop.
func TestRTHighDriverFollowsTheWindow(t *testing.T) {
	const s = int64(time.Second)
	t0 := int64(1_800_000_000) * s
	event := func(now int64, class, kind string, totals ...int64) string {
		ev := web.LiveEvent{Time: now}
		c := web.LiveClass{Class: class}
		for _, v := range totals {
			c.Points = append(c.Points, web.LivePoint{T: now - v, Kind: kind, Total: v})
		}
		ev.Classes = append(ev.Classes, c)
		js, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return "event: live\ndata: " + string(js) + "\n\n"
	}
	stream := strings.Join([]string{
		event(t0, ValidateLowClass, "pageview", 5*s, 6*s),           // the low class: not RT_HIGH
		event(t0+1*s, ValidateHighClass, "transaction", 4*s),        // transactions: not units here
		event(t0+2*s, ValidateHighClass, "pageview", 2*s, 3*s, s/2), // median 2 s > 1 s: on
		event(t0+3*s, ValidateHighClass, "pageview", s/10, s/10),    // 5 values, lower median 0.5 s: off
		event(t0+40*s, ValidateHighClass, "pageview", 3*s),          // the rest left the window: on
		event(t0+80*s, ValidateLowClass, "pageview", s),             // window empty: off
	}, "")
	var got []bool
	d := &rtHighDriver{spec: RTHighDrive{Above: time.Second, Window: 30 * time.Second}, done: make(chan struct{})}
	d.apply = func(_ context.Context, on bool) error { got = append(got, on); return nil }
	d.read(context.Background(), bufio.NewReader(strings.NewReader(stream)))
	want := []bool{true, false, true, false}
	if len(got) != len(want) {
		t.Fatalf("switched %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("switched %v, want %v", got, want)
		}
	}
	st, _ := d.stats, d.err
	if st.Switches != 4 || st.Events != 6 {
		t.Errorf("stats %+v: want 4 switches over 6 events", st)
	}
	// On from t0+2s to t0+3s and from t0+40s to t0+80s.
	if want := time.Duration(41 * s); st.On != want {
		t.Errorf("on for %v, want %v", st.On, want)
	}
	if d.err == nil || !strings.Contains(d.err.Error(), "EOF") {
		t.Errorf("the stream's end is not reported: %v", d.err)
	}
}
