package testbed

import "testing"

// TestTimedOutLoad: a load whose container could not connect failed after
// the connect's wait; one whose object could not connect ended when that
// connect gave up or the last response came, whichever was later; a load
// with an object neither answered nor timed out is not one of these.
func TestTimedOutLoad(t *testing.T) {
	cont := ObjectTruth{ConnectStart: 100, ConnectEnd: 150, RequestStart: 150, ResponseEnd: 400}
	answered := ObjectTruth{ConnectStart: 400, ConnectEnd: 450, RequestStart: 450, ResponseEnd: 900}
	gaveUp := ObjectTruth{ConnectStart: 410, ConnectEnd: 7410}
	cases := []struct {
		name       string
		pt         PageTruth
		ok, failed bool
		total      int64
	}{
		{"container", PageTruth{Container: ObjectTruth{ConnectStart: 100, ConnectEnd: 7100}}, true, true, 7000},
		{"object", PageTruth{Container: cont, Objects: []ObjectTruth{answered, gaveUp}}, true, false, 7310},
		{"object, a later response", PageTruth{Container: cont, Objects: []ObjectTruth{{ConnectStart: 400, ConnectEnd: 450, RequestStart: 450, ResponseEnd: 9000}, gaveUp}}, true, false, 8900},
		{"object unanswered", PageTruth{Container: cont, Objects: []ObjectTruth{{ConnectStart: 400, ConnectEnd: 450, RequestStart: 450}, gaveUp}}, false, false, 0},
		{"nothing timed out", PageTruth{Container: cont, Objects: []ObjectTruth{answered}}, false, false, 0},
		{"container never tried", PageTruth{}, false, false, 0},
	}
	for _, c := range cases {
		l, ok := timedOutLoad(ValidationLoad{Truth: c.pt})
		if ok != c.ok || ok && (l.Failed != c.failed || l.TotalNS != c.total) {
			t.Errorf("%s: ok %v failed %v total %d, want %v %v %d", c.name, ok, l.Failed, l.TotalNS, c.ok, c.failed, c.total)
		}
	}
}
