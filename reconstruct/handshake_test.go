package reconstruct_test

import (
	"slices"
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
)

func TestHandshakeWaits(t *testing.T) {
	const (
		sec = int64(time.Second)
		ms  = int64(time.Millisecond)
		us  = int64(time.Microsecond)
	)
	cases := []struct {
		name          string
		syns, synacks []int64
		est           int64
		syn, synack   []int64
	}{
		// The cases whatif's models were tested with when it kept its own split.
		{"clean", []int64{0}, []int64{30 * us}, 100 * ms, nil, nil},
		{"SYNs lost until the third", []int64{0, 3 * sec, 9 * sec}, []int64{9*sec + 30*us}, 9*sec + 30*us + 100*ms,
			[]int64{3 * sec, 6 * sec}, nil},
		{"SYN/ACKs of the first two SYNs lost", []int64{0, 3 * sec, 9 * sec}, []int64{30 * us, 3*sec + 30*us, 9*sec + 30*us},
			9*sec + 30*us + 100*ms, nil, []int64{3 * sec, 6 * sec}},
		{"server retransmits its SYN/ACK", []int64{0}, []int64{30 * us, sec + 30*us, 3*sec + 30*us}, 3*sec + 30*us + 100*ms,
			nil, []int64{sec, 2 * sec}},
		{"first SYN dropped", []int64{0, 3 * sec}, []int64{3*sec + 30*us}, 3*sec + 30*us + 100*ms, []int64{3 * sec}, nil},
		{"one server SYN/ACK retransmission", []int64{0}, []int64{30 * us, sec}, sec + 100*ms, nil, []int64{sec - 30*us}},
		{"negative times", []int64{-4 * sec, -3 * sec}, []int64{-3*sec + 30*us}, -2900 * ms, []int64{sec}, nil},
		{"SYN lost at 600 ms", []int64{600 * ms, 3600 * ms}, []int64{3600*ms + 30*us}, 3700 * ms, []int64{3 * sec}, nil},
		// Both kinds on one connection, and a SYN/ACK after the handshake.
		{"mixed", []int64{0, sec, 3 * sec}, []int64{sec + 30*us, 3*sec + 30*us, 4*sec + 30*us, 9 * sec}, 4*sec + 100*ms,
			[]int64{sec}, []int64{2 * sec, sec}},
		{"SYN/ACK before any SYN", []int64{sec}, []int64{0, sec + 30*us}, sec + 100*ms, nil, nil},
	}
	for _, c := range cases {
		conn := &reconstruct.Connection{SYNTimes: c.syns, SYNACKTimes: c.synacks, Established: c.est}
		syn, synack := reconstruct.HandshakeWaits(conn)
		if !slices.Equal(syn, c.syn) || !slices.Equal(synack, c.synack) {
			t.Errorf("%s: syn %v synack %v, want %v and %v", c.name, syn, synack, c.syn, c.synack)
		}
	}

	// A handshake that never completed: the server's retransmissions have no
	// end to be measured against (whatif never models such a connection).
	conn := &reconstruct.Connection{SYNTimes: []int64{0, 3 * sec}, SYNACKTimes: []int64{3*sec + 30*us, 4*sec + 30*us}}
	if syn, synack := reconstruct.HandshakeWaits(conn); !slices.Equal(syn, []int64{3 * sec}) || synack != nil {
		t.Errorf("unfinished handshake: syn %v synack %v", syn, synack)
	}
}
