package reconstruct

import (
	"math/rand/v2"
	"testing"
)

// A burst of a per-connection counter's packets overtaken on the way (seen
// on the testbed when the link stalled) looks at first like a jump no such
// counter makes; the overtaken packets arriving next show it was
// reordering, and a later lost packet is read again.
func TestIPIDReorderedBurstKeepsTrust(t *testing.T) {
	var tr ipidTrack
	id := uint16(49500)
	for range 50 {
		tr.step(id, false)
		id++
	}
	// 49550..49563 are overtaken by 49564..49566.
	for _, x := range []uint16{49564, 49565, 49566} {
		tr.step(x, false)
	}
	for x := uint16(49550); x < 49564; x++ {
		tr.step(x, false)
	}
	if tr.wild {
		t.Fatal("reordered burst left the numbering untrusted")
	}
	if lost := tr.step(49568, false); lost != 1 {
		t.Errorf("one packet lost after the burst: step says %d", lost)
	}
}

// Random IDs never earn trust, whatever reordering they seem to show.
func TestIPIDRandomNumberingNotTrusted(t *testing.T) {
	var tr ipidTrack
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		if lost := tr.step(uint16(rng.Uint32()), false); lost != 0 {
			t.Fatalf("random numbering read as %d lost packets", lost)
		}
	}
}
