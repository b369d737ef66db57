package whatif

import (
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
)

// A connection the client opened for an embedded object once it had the
// container starts in the replay as much later (or sooner) as the
// container's response left the server than in the null replay, and its
// request meets the server then, not at its captured time.
func TestEmbedConnectionFollowsItsContainer(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	q := &queueData{
		conns: []queueConn{
			{txs: []int{0}, unit: 0},
			{txs: []int{1}, unit: 0, fresh: true, synStart: ms(700), synAt: []int64{0}, rtt: ms(50)},
		},
		txs: []queueTx{
			{conn: 0, arrival: ms(100), sent: ms(100), queued: ms(100), measured: ms(500), service: ms(500)},
			{conn: 1, arrival: ms(750), sent: ms(750), queued: ms(750), measured: ms(100), service: ms(100)},
		},
		dataTxs: 2,
	}
	for _, c := range []struct {
		name  string
		delay int64 // the container's connection's delay
		want  int64 // when the embedded object's response leaves
	}{
		{"as captured", 0, ms(850)},
		{"container 2 s later", ms(2000), ms(2850)},
	} {
		ch := &queueChange{connDelay: []int64{c.delay, 0}, connGone: make([]bool, 2), connSpliced: make([]bool, 2),
			connBindsAtHello: make([]bool, 2), connFastSYN: make([]int64, 2), connAttempt: make([]int, 2), txsRemoved: make([]bool, 2)}
		s := (&Dataset{}).newQueueSim(q, &Options{}, serverShape{workers: 1, backlog: 4}, ch)
		s.nullDone = []int64{ms(600), ms(850)}
		s.start(0)
		s.gate(1, 0)
		for len(s.h) > 0 {
			s.step()
		}
		if got := s.out.doneAt[1]; got != c.want || s.out.server[1] != ms(100) {
			t.Errorf("%s: the embedded object left at %v after %v of server time, want %v and 100ms", c.name,
				time.Duration(got), time.Duration(s.out.server[1]), time.Duration(c.want))
		}
	}
}

// gateOf holds only the pageview's connections whose first request came
// after the container's response ended; the container's own connection
// and connections opened alongside it go as captured.
func TestGateOfHoldsOnlyConnectionsOpenedAfterTheContainer(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	tx := func(start, end int64) txInfo {
		return txInfo{tx: &reconstruct.Transaction{Start: start, End: end}}
	}
	d := &Dataset{
		txs:   []txInfo{tx(0, ms(600)), tx(ms(700), ms(900)), tx(ms(100), ms(300)), tx(ms(650), ms(800))},
		units: []unit{{container: 0, txs: []int{0, 2, 1, 3}}},
	}
	q := &queueData{
		// The container and a later request on one connection; an object
		// fetched alongside the container; one fetched after it.
		conns:   []queueConn{{txs: []int{0, 3}}, {txs: []int{2}}, {txs: []int{1}}},
		txs:     []queueTx{{conn: 0}, {conn: 2}, {conn: 1}, {conn: 0}},
		dataTxs: 4,
	}
	l := &closedLoop{d: d, q: q, qf: &queueFit{data: q, null: queueOutcome{doneAt: []int64{ms(500), ms(850), ms(250), ms(750)}}}}
	for ci, want := range []int{-1, -1, 0} {
		if got := l.gateOf(0, ci); got != want {
			t.Errorf("connection %d waits for %d, want %d", ci, got, want)
		}
	}
	d.units[0].container = -1
	if got := l.gateOf(0, 2); got != -1 {
		t.Errorf("no container seen: connection 2 waits for %d, want none", got)
	}
}

// A pageview whose container's every SYN the server dropped ends when its
// client gave up, admission delay included; its embedded objects, never
// asked for, add nothing. One whose container got in is not failed.
func TestFailedPageviewEndsWhenItsClientGaveUp(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	d := &Dataset{
		txs:   []txInfo{{tx: &reconstruct.Transaction{}}, {tx: &reconstruct.Transaction{}}},
		units: []unit{{start: ms(1000), container: 0, txs: []int{0, 1}}},
	}
	q := &queueData{
		conns:   []queueConn{{txs: []int{0}, fresh: true, synStart: ms(1010)}, {txs: []int{1}, fresh: true, synStart: ms(2500)}},
		txs:     []queueTx{{conn: 0}, {conn: 1}},
		dataTxs: 2,
	}
	l := &closedLoop{d: d, q: q, st: []unitState{{delay: ms(2030)}},
		sim: &queueSim{out: queueOutcome{failed: []bool{true, false}, synWait: []int64{ms(5075), 0}}}}
	if got, failed := l.gaveUp(0); !failed || got != ms(2030+10+5075) {
		t.Errorf("gave up after %v (failed %v), want 7.115s: the front end's 2.03 s, 10 ms to its first SYN, 5.075 s of the server's drops",
			time.Duration(got), failed)
	}
	l.sim.out.failed[0] = false
	if _, failed := l.gaveUp(0); failed {
		t.Errorf("container connection got in: the pageview did not fail")
	}
}
