package whatif

import (
	"reflect"
	"testing"
	"time"
)

// TestRequestResendFollowsLinuxTimers: the resend times of a request the
// server dropped, as Linux's tail-loss probe and retransmission timer set
// them from the handshake's round trip. In the testbed's FAST SYN runs
// (paths of 80-150 ms) a request whose SYN a copy got in after 200 ms was
// resent no sooner than 0.78 s after it was sent, and one let in after
// 400 ms 1.19 s after.
func TestRequestResendFollowsLinuxTimers(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	for _, c := range []struct {
		rtt  int64
		n    int
		want int64
	}{
		// A short round trip: the probe (2 RTT + 200 ms) goes when the
		// retransmission timer (RTT + 200 ms) would fire, then the
		// timer runs from it, doubling (the overload baselines' 80 ms
		// paths: requests taken 0.58, 1.16, 2.31 s after sent).
		{ms(80), 1, ms(280)},
		{ms(80), 2, ms(280 + 280)},
		{ms(80), 3, ms(280 + 280 + 560)},
		{ms(80), 4, ms(280 + 280 + 560 + 1120)},
		// A copy taken after 200 ms on an 80 ms path: the probe first.
		{ms(280), 1, ms(760)},
		{ms(280), 2, ms(760 + 840)},
		// After 400 ms on a 100 ms path.
		{ms(500), 1, ms(1200)},
		{ms(500), 3, ms(1200 + 1500 + 3000)},
		// Each backoff stops at 120 s.
		{ms(50_000), 2, ms(100_200 + 120_000)},
	} {
		if got := requestResend(c.rtt, c.n); got != c.want {
			t.Errorf("requestResend(%v, %d) = %v, want %v", time.Duration(c.rtt), c.n, time.Duration(got), time.Duration(c.want))
		}
	}
}

// TestFastSYNCopyMeetsFullAcceptQueue: one worker and an accept queue of
// one. A FAST SYN copy gets a connection in at 1.0 s, when the queue has
// just emptied, and its handshake completes at 1.1 s into a queue that
// has filled again. On a server that drops such handshakes (as Linux
// does) the client, which measured 700 ms for its handshake, resends its
// request at 2.7, 4.8, 9.0 and 17.4 s, and only the last finds room; on a
// server that queued it anyway it would have been served at 12 s.
func TestFastSYNCopyMeetsFullAcceptQueue(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	q := &queueData{
		conns: []queueConn{
			{txs: []int{0}, unit: 0},
			{txs: []int{1}, unit: 0},
			{txs: []int{2}, unit: 0, fresh: true, synStart: ms(400), synAt: []int64{0}, rtt: ms(100)},
			{txs: []int{3}, unit: 0},
		},
		txs: []queueTx{
			{conn: 0, measured: ms(1000), service: ms(1000)},
			{conn: 1, arrival: ms(10), sent: ms(10), queued: ms(10), measured: ms(10_990), service: ms(10_000)},
			{conn: 2, arrival: ms(500), sent: ms(500), queued: ms(500), measured: ms(20), service: ms(20)},
			{conn: 3, arrival: ms(1050), sent: ms(1050), queued: ms(1050), measured: ms(10_950), service: ms(1000)},
		},
	}
	for _, c := range []struct {
		overflowDrops bool
		want          int64
		limbo         int
	}{
		{true, ms(17_400+20) - ms(1100), 1},
		{false, ms(12_000+20) - ms(1100), 0},
	} {
		ch := &queueChange{connDelay: make([]int64, 4), connGone: make([]bool, 4), connSpliced: make([]bool, 4),
			connBindsAtHello: make([]bool, 4), connFastSYN: []int64{0, 0, ms(200), 0}, connAttempt: make([]int, 4),
			txsRemoved: make([]bool, 4)}
		out := (&Dataset{}).simulate(q, &Options{SYNAttempts: 3, SYNTimeout: time.Second}, serverShape{workers: 1, backlog: 1, overflowDrops: c.overflowDrops}, ch)
		if out.synWait[2] != ms(600) {
			t.Fatalf("overflow drops %v: the copy got in after %v, want 600ms", c.overflowDrops, time.Duration(out.synWait[2]))
		}
		if out.server[2] != c.want || out.limbo != c.limbo {
			t.Errorf("overflow drops %v: server time %v with %d connections in limbo; want %v and %d", c.overflowDrops,
				time.Duration(out.server[2]), out.limbo, time.Duration(c.want), c.limbo)
		}
	}
}

// A handshake the replay let in where the capture does not say when (its
// connection moved by the rules) completes a round trip after its SYN,
// into a full accept queue: left half-open, its request gets in on the
// client's resend, behind a request that came meanwhile. One the capture
// decides keeps the capture's evidence: it was queued at once.
func TestJudgedHandshakeMeetsFullAcceptQueue(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	q := &queueData{
		conns: []queueConn{
			{txs: []int{0}, unit: 0},
			{txs: []int{1}, unit: 0, fresh: true, synStart: ms(100), synAt: []int64{0}, rtt: ms(100)},
			{txs: []int{2}, unit: 0},
			{txs: []int{3}, unit: 0},
		},
		txs: []queueTx{
			{conn: 0, measured: ms(1000), service: ms(1000)},
			{conn: 1, arrival: ms(200), sent: ms(200), queued: ms(200), measured: ms(920), service: ms(20)},
			// Fills the queue before the handshake completes.
			{conn: 2, arrival: ms(180), sent: ms(180), queued: ms(180), measured: ms(920), service: ms(100)},
			// Comes while the half-open connection waits for its resend.
			{conn: 3, arrival: ms(1050), sent: ms(1050), queued: ms(1050), measured: ms(150), service: ms(100)},
		},
		dataTxs: 4,
	}
	for _, c := range []struct {
		name    string
		delay   int64
		server  int64
		limbo   int
		maxWait int // requests waiting at once
	}{
		// Its SYN at 150 ms finds room; its ACK at 250 ms does not. The
		// resends (Linux: a probe at 300 ms, then the timer's 300 ms and
		// 600 ms) find the queue full at 550 and 850 ms and free at
		// 1,450 ms, after the request of 1,050 ms was served.
		{"moved 50 ms", ms(50), ms(1470) - ms(250), 1, 1},
		{"as captured", 0, ms(1120) - ms(200), 0, 2},
	} {
		ch := &queueChange{connDelay: []int64{0, c.delay, 0, 0}, connGone: make([]bool, 4), connSpliced: make([]bool, 4),
			connBindsAtHello: make([]bool, 4), connFastSYN: make([]int64, 4), connAttempt: make([]int, 4), txsRemoved: make([]bool, 4)}
		s := (&Dataset{}).newQueueSim(q, &Options{SYNAttempts: 3, SYNTimeout: time.Second}, serverShape{workers: 1, backlog: 1, overflowDrops: true}, ch)
		s.nullQueue, s.nullDropQueue = make([]int, 4), make([][]int, 4)
		for ci := range q.conns {
			s.start(ci)
		}
		for len(s.h) > 0 {
			s.step()
			if len(s.waiting) > c.maxWait {
				t.Fatalf("%s: %d requests wait on a backlog of 1, want at most %d", c.name, len(s.waiting), c.maxWait)
			}
		}
		if s.out.server[1] != c.server || s.out.limbo != c.limbo {
			t.Errorf("%s: server time %v, %d left half-open; want %v and %d", c.name,
				time.Duration(s.out.server[1]), s.out.limbo, time.Duration(c.server), c.limbo)
		}
	}
}

// TestRuleThatNeverActsReplaysTheCapture: a replay whose rules never act
// changes nothing, so on a server whose accept queue left connections
// half-open it must predict every unit as measured. A copy of a request
// that the capture shows refused is taken early only where the replayed
// queue holds fewer than the null replay's did then; taken wherever the
// model's queue had room, such copies sat in the queue early and made it
// look full to others (on the testbed's overload baselines, a rule that
// never fired moved the high class's p90 by 5%).
func TestRuleThatNeverActsReplaysTheCapture(t *testing.T) {
	srv := prefork{workers: 4, backlog: 8, limbo: true}
	arr := pfWorkload(3, 90*time.Second, 100, 10*time.Millisecond)
	conns, txs, _ := srv.run(arr)
	halfOpen := 0
	for _, tx := range txs {
		if tx.RequestAcked-tx.RequestLast > acceptLimbo {
			halfOpen++
		}
	}
	if halfOpen < 50 {
		t.Fatalf("only %d of %d connections waited half-open: the workload does not test them", halfOpen, len(txs))
	}
	ds, err := NewDataset(conns, txs, nil)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := ParseRules("IF CLASS == low AND RT_HIGH > 1000s THEN DROP SYN")
	if err != nil {
		t.Fatal(err)
	}
	res, err := ds.Evaluate(rules, Options{Priorities: map[string]Priority{"high": High}, ServerModel: ServerQueue})
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, u := range res.Units {
		if u.Predicted != u.Measured {
			if moved < 5 {
				t.Errorf("unit %s (%s): predicted %v, measured %v", u.ID, u.Class, time.Duration(u.Predicted), time.Duration(u.Measured))
			}
			moved++
		}
	}
	if moved > 0 {
		t.Errorf("%d of %d units moved under a rule that never acted (%d connections half-open)", moved, len(res.Units), halfOpen)
	}
}

// TestFreeBandIsTheModelRunningFree: a replay that takes the SYNs out of
// the capture's hands (FAST SYN, SPLICE) is as good as the model judging
// every SYN, which the anchored null replay (exact on the SYNs it anchors)
// does not show. The fit's free band must be that replay's error (checked
// against a FAST SYN rule whose copies never come: every SYN judged, none
// copied), and such rules must carry it; DROP SYN keeps the anchored band.
func TestFreeBandIsTheModelRunningFree(t *testing.T) {
	srv := prefork{workers: 4, backlog: 8, syncookies: true, limbo: true}
	arr := pfWorkload(2, 90*time.Second, 100, 10*time.Millisecond)
	conns, txs, _ := srv.run(arr)
	ds, err := NewDataset(conns, txs, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Priorities: map[string]Priority{"high": High}, ServerModel: ServerQueue}
	eval := func(rule string) *Result {
		t.Helper()
		rules, err := ParseRules(rule)
		if err != nil {
			t.Fatal(err)
		}
		res, err := ds.Evaluate(rules, opts)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	never := eval("IF IP.SRC == * THEN FAST SYN GAP 1000s")
	fast := eval("IF IP.SRC == * THEN FAST SYN GAP 200ms")
	drop := eval("IF CLASS == low THEN DROP SYN")
	splice := eval("IF IP.SRC == * THEN SPLICE")
	m := fast.Queue
	if m.Backlog == 0 {
		t.Fatal("no backlog fitted: the workload drops no SYN at a full queue")
	}
	off := 0.0
	for _, f := range m.Fit {
		n := never.Class(f.Class)
		t.Logf("%s: measured p50 %v p90 %v; anchored null %v %v; free null %v %v (band %.1f%%/%.1f%%); every SYN judged by a rule %v %v",
			f.Class, time.Duration(f.UnitP50[0]), time.Duration(f.UnitP90[0]), time.Duration(f.UnitP50[1]), time.Duration(f.UnitP90[1]),
			time.Duration(f.FreeUnitP50), time.Duration(f.FreeUnitP90), 100*f.FreeBand[0], 100*f.FreeBand[1],
			time.Duration(n.Predicted.P50), time.Duration(n.Predicted.P90))
		off = max(off, relErr(n.Predicted.P50, n.Measured.P50), relErr(n.Predicted.P90, n.Measured.P90))
		if e50, e90 := relErr(f.FreeUnitP50, n.Predicted.P50), relErr(f.FreeUnitP90, n.Predicted.P90); e50 > 0.01 || e90 > 0.01 {
			t.Errorf("%s: the free null replay's p50/p90 %v/%v are %.1f%%/%.1f%% from the replay with every SYN judged (%v/%v)", f.Class,
				time.Duration(f.FreeUnitP50), time.Duration(f.FreeUnitP90), 100*e50, 100*e90, time.Duration(n.Predicted.P50), time.Duration(n.Predicted.P90))
		}
		if want := [2]float64{relErr(f.FreeUnitP50, f.UnitP50[0]), relErr(f.FreeUnitP90, f.UnitP90[0])}; f.FreeBand != want {
			t.Errorf("%s: free band %v, its figures give %v", f.Class, f.FreeBand, want)
		}
		fc, dc := fast.Class(f.Class), drop.Class(f.Class)
		want := [2]float64{max(f.Band[0], f.FreeBand[0]), max(f.Band[1], f.FreeBand[1])}
		if !fc.BandFree || fc.Band == nil || *fc.Band != want {
			t.Errorf("%s: FAST SYN's band %v (free %v), want %v", f.Class, fc.Band, fc.BandFree, want)
		}
		if sc := splice.Class(f.Class); !sc.BandFree || sc.Band == nil || *sc.Band != want {
			t.Errorf("%s: SPLICE's band %v (free %v), want %v", f.Class, sc.Band, sc.BandFree, want)
		}
		if dc.BandFree || dc.Band == nil || *dc.Band != f.Band {
			t.Errorf("%s: DROP SYN's band %v (free %v), want the null replay's %v", f.Class, dc.Band, dc.BandFree, f.Band)
		}
	}
	if off < 0.005 {
		t.Fatalf("the model running free is within %.1f%% of the capture: the workload cannot tell the two null replays apart", 100*off)
	}
	if m.FreeWorst < off-1e-9 {
		t.Errorf("free worst %.3f under the judged replay's error %.3f", m.FreeWorst, off)
	}
}

// TestFastSYNPredictionPoolsMembers: a FAST SYN replay against a fitted
// backlog is one draw of a chaotic replay, so the prediction pools
// Options.Members replays whose own timers each member moves by up to a
// millisecond (fixed seeds: the same records give the same answer). The
// class figures must be the pool's, its counts one replay's, each class's
// member p90 range must hold the pooled p90, and rules without copies
// replay once.
func TestFastSYNPredictionPoolsMembers(t *testing.T) {
	srv := prefork{workers: 4, backlog: 8, syncookies: true, limbo: true}
	arr := pfWorkload(1, 90*time.Second, 100, 10*time.Millisecond)
	conns, txs, _ := srv.run(arr)
	ds, err := NewDataset(conns, txs, nil)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := ParseRules("IF IP.SRC == * THEN FAST SYN GAP 200ms")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Priorities: map[string]Priority{"high": High}, ServerModel: ServerQueue}
	one := opts
	one.Members = 1
	single, err := ds.Evaluate(rules, one)
	if err != nil {
		t.Fatal(err)
	}
	pooled, err := ds.Evaluate(rules, opts)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ds.Evaluate(rules, opts)
	if err != nil {
		t.Fatal(err)
	}
	if single.Members != 1 || pooled.Members != 8 {
		t.Fatalf("members: %d with Members 1, %d by default (want 8)", single.Members, pooled.Members)
	}
	if !reflect.DeepEqual(pooled, again) {
		t.Error("two evaluations of the same rules on the same records differ")
	}
	if !reflect.DeepEqual(single.Units, pooled.Units) {
		t.Error("the pooled result's units are not the first member's")
	}
	// The pool built here from the members' own replays.
	o, err := opts.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	qf := ds.queueFit(&o)
	pool := map[string][]int64{}
	for m := range uint64(8) {
		units, _, _, copied := ds.replayQueue(rules, &o, qf, m)
		if !copied {
			t.Fatalf("member %d sent no FAST SYN copy", m)
		}
		for _, u := range units {
			pool[u.Class] = append(pool[u.Class], u.Predicted)
		}
	}
	for _, c := range pooled.Classes {
		s := single.Class(c.Class)
		want := NewDistribution(pool[c.Class], o.Edges)
		p, r := c.Predicted, c.MembersP90
		t.Logf("%s: one replay p50 %v p90 %v; pooled %v %v; members' p90 %v..%v", c.Class, time.Duration(s.Predicted.P50),
			time.Duration(s.Predicted.P90), time.Duration(p.P50), time.Duration(p.P90), time.Duration(r[0]), time.Duration(r[1]))
		if p.P50 != want.P50 || p.P90 != want.P90 || p.P99 != want.P99 || p.Mean != want.Mean {
			t.Errorf("%s: pooled p50/p90/p99/mean %d/%d/%d/%d, the members' pool gives %d/%d/%d/%d", c.Class,
				p.P50, p.P90, p.P99, p.Mean, want.P50, want.P90, want.P99, want.Mean)
		}
		var sum int64
		for _, n := range p.Counts {
			sum += n
		}
		if p.N != s.Predicted.N || sum != p.N {
			t.Errorf("%s: pooled counts sum to %d, N %d; one replay has %d units", c.Class, sum, p.N, s.Predicted.N)
		}
		if r == nil || r[0] >= r[1] {
			t.Fatalf("%s: members' p90 range %v: the members did not differ, the test shows nothing", c.Class, r)
		}
		if p.P90 < r[0] || p.P90 > r[1] || s.Predicted.P90 < r[0] || s.Predicted.P90 > r[1] {
			t.Errorf("%s: pooled p90 %d or the first member's %d outside the members' range %v", c.Class, p.P90, s.Predicted.P90, *r)
		}
	}
	drop, err := ParseRules("IF CLASS == low THEN DROP SYN")
	if err != nil {
		t.Fatal(err)
	}
	res, err := ds.Evaluate(drop, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Members != 1 || res.Class("high").MembersP90 != nil {
		t.Errorf("DROP SYN, which copies nothing, pooled %d replays", res.Members)
	}
}
