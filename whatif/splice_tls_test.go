package whatif

import (
	"net/netip"
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
)

// On HTTPS a splicer that does not terminate TLS binds at the ClientHello:
// its SYN meets the server's backlog a TLS handshake before the request,
// and the request follows that handshake through the splice. One that
// terminates TLS binds when the request has come. Here the backlog is
// full at the handshake (one request served, one waiting) and free by the
// request: binding at the hello costs a connect(2) retry, a second, which
// the terminating splicer does not pay; both count server time from the
// request, so the TLS handshake (the client's Ttls) is not counted twice.
func TestSpliceBindsAtClientHelloOnHTTPS(t *testing.T) {
	ms := func(n int64) int64 { return n * 1_000_000 }
	q := &queueData{
		conns: []queueConn{
			{txs: []int{0}, unit: 0},
			{txs: []int{1}, unit: 0},
			{txs: []int{2}, unit: 0, fresh: true, synStart: ms(50), rttServer: ms(1), tlsLead: ms(400)},
		},
		txs: []queueTx{
			{conn: 0, arrival: 0, sent: 0, queued: 0, measured: ms(300), service: ms(300)},
			{conn: 1, pos: 0, arrival: ms(10), sent: ms(10), queued: ms(10), measured: ms(390), service: ms(100)},
			{conn: 2, arrival: ms(500), sent: ms(500), queued: ms(500), measured: ms(20), service: ms(20)},
		},
	}
	sh := serverShape{workers: 1, backlog: 1}
	run := func(atHello bool) queueOutcome {
		ch := &queueChange{connDelay: make([]int64, 3), connGone: make([]bool, 3), connSpliced: []bool{false, false, true},
			connBindsAtHello: []bool{false, false, atHello}, connFastSYN: make([]int64, 3), connAttempt: make([]int, 3),
			txsRemoved: make([]bool, 3)}
		return (&Dataset{}).simulate(q, &Options{}, sh, ch)
	}
	hello, terminated := run(true), run(false)
	t.Logf("server time: bound at the hello %v (drops %d), at the request %v (drops %d)",
		hello.server[2], hello.connDrops[2], terminated.server[2], terminated.connDrops[2])
	// The request waits for the splicer's handshake, a round trip on the
	// server's side.
	if terminated.server[2] != ms(21) || terminated.connDrops[2] != 0 {
		t.Errorf("bound at the request: server time %d, %d SYNs dropped; want its service and the handshake, none", terminated.server[2], terminated.connDrops[2])
	}
	// The hello's bind, at 100 ms (the request less the TLS handshake),
	// meets the full backlog; connect(2) tries again a second later, at
	// the kernel's next 32 ms tick (1.12 s); the request follows 400 ms
	// after that.
	if want := ms(1120) - ms(100) + ms(20); hello.server[2] != want || hello.connDrops[2] != 1 {
		t.Errorf("bound at the hello: server time %d, %d SYNs dropped; want %d and 1", hello.server[2], hello.connDrops[2], want)
	}
}

// The standard candidates offer the TLS-terminating splicer only where it
// differs: on a capture holding HTTPS.
func TestStandardCandidatesOfferTLSTerminationOnHTTPS(t *testing.T) {
	for _, flags := range []reconstruct.Flags{0, reconstruct.FlagTLS} {
		c := &reconstruct.Connection{ID: "c1", Client: netip.MustParseAddr("198.51.100.7"), ClientPort: 40000,
			Server: netip.MustParseAddr("203.0.113.2"), ServerPort: 443, SYNTimes: []int64{1e9}, SYNACKTimes: []int64{1e9 + 1e6},
			Established: 1e9 + 2e6, RTTClient: 2e6, Transactions: 1}
		tx := &reconstruct.Transaction{ID: "t1", ConnectionID: "c1", Client: c.Client, ClientPort: c.ClientPort, Server: c.Server,
			ServerPort: 443, Method: "GET", URL: "/", Status: 200, Start: 1e9, End: 1e9 + 50e6, Total: 50e6, Tconn: 2e6,
			Tserver: 48e6, RequestFirst: 1e9 + 2e6, RequestLast: 1e9 + 2e6, ResponseFirst: 1e9 + 49e6, ResponseLast: 1e9 + 49e6,
			RTTClient: 2e6, Flags: flags}
		d, err := NewDataset([]*reconstruct.Connection{c}, []*reconstruct.Transaction{tx}, nil)
		if err != nil {
			t.Fatal(err)
		}
		cands, err := d.StandardCandidates(Options{})
		if err != nil {
			t.Fatal(err)
		}
		offered := false
		for _, rs := range cands {
			offered = offered || rs[0].Actions[0] == Action{Kind: Splice, TerminateTLS: true}
		}
		if offered != (flags != 0) {
			t.Errorf("flags %v: SPLICE TERMINATE TLS offered %v among %d candidates", flags, offered, len(cands))
		}
	}
}

// A splicer's connect(2) goes on sending its server SYN on the kernel's
// timer (0, 1, 2, 3, 4, 5, 7, 11, 19, 35 s, ...) while the backlog stays
// full: behind a server busy for 30 s it gets in at the SYN 35 s after the
// first, not at the seventh (7 s) where the replay once let it in.
func TestSpliceConnectsOnTheKernelTimer(t *testing.T) {
	ms := func(n int64) int64 { return n * 1_000_000 }
	q := &queueData{
		conns: []queueConn{
			{txs: []int{0}, unit: 0},
			{txs: []int{1}, unit: 0},
			{txs: []int{2}, unit: 0, fresh: true, synStart: ms(400), rttServer: ms(1)},
		},
		txs: []queueTx{
			{conn: 0, measured: ms(30_000), service: ms(30_000)},
			{conn: 1, arrival: ms(10), sent: ms(10), queued: ms(10), measured: ms(30_090), service: ms(100)},
			{conn: 2, arrival: ms(500), sent: ms(500), queued: ms(500), measured: ms(20), service: ms(20)},
		},
	}
	ch := &queueChange{connDelay: make([]int64, 3), connGone: make([]bool, 3), connSpliced: []bool{false, false, true},
		connBindsAtHello: make([]bool, 3), connFastSYN: make([]int64, 3), connAttempt: make([]int, 3), txsRemoved: make([]bool, 3)}
	out := (&Dataset{}).simulate(q, &Options{}, serverShape{workers: 1, backlog: 1}, ch)
	// The queue holds the second request until 30 s: the SYNs from 0.5 s
	// up to about 19.7 s are dropped (9), the one at about 35.8 s (each
	// retry on the timer wheel's next tick of its bucket) gets in, and the
	// request follows the handshake (1 ms).
	at := ms(500)
	for n := 1; n <= 9; n++ {
		at = spliceRetryAt(at, n)
	}
	if want := at + ms(1) + ms(20) - ms(500); out.server[2] != want || out.connDrops[2] != 9 {
		t.Errorf("spliced request: server time %v, %d server SYNs dropped; want %v and 9",
			time.Duration(out.server[2]), out.connDrops[2], time.Duration(want))
	}
	if at < ms(35_500) || at > ms(36_500) {
		t.Errorf("the tenth SYN at %v, want about 35.5 s plus the ticks' rounding", time.Duration(at))
	}
}

// Linux fires a timer a second away on the next 32 ms tick of the wheel
// (HZ=250, bucket of 8 jiffies), one 4 to 16 s away on a 256 ms tick: the
// splicer's SYNs dropped within one tick come again together.
func TestSpliceRetryAtTimerWheelTicks(t *testing.T) {
	ms := func(n int64) int64 { return n * 1_000_000 }
	for _, c := range []struct {
		t    int64
		n    int
		want int64
	}{
		{0, 1, ms(1024)},          // 1 s: up to the 32 ms tick
		{ms(5), 1, ms(1024)},      // the same bucket
		{ms(25), 1, ms(1056)},     // the next
		{ms(1024), 1, ms(2048)},   // on a tick: stays
		{ms(100), 6, ms(2112)},    // 2 s: still 8 jiffies
		{ms(100), 7, ms(4352)},    // 4 s: 64 jiffies, 256 ms
		{ms(100), 10, ms(32_768)}, // 32 s: 512 jiffies, 2.048 s
	} {
		if got := spliceRetryAt(c.t, c.n); got != c.want {
			t.Errorf("retry %d after a drop at %v: %v, want %v", c.n, time.Duration(c.t), time.Duration(got), time.Duration(c.want))
		}
	}
}

// SYNs of one instant all find the room one of them leaves: the kernel
// checks the accept queue at each SYN but queues the connection at its
// ACK. The second connection's handshake then completes into a full
// queue, and its request gets in on the splicer's retransmission timer
// (200 ms) once a worker has taken the first.
func TestSpliceHandshakesOfOneInstantOverflow(t *testing.T) {
	ms := func(n int64) int64 { return n * 1_000_000 }
	q := &queueData{
		conns: []queueConn{
			{txs: []int{0}, unit: 0},
			{txs: []int{1}, unit: 0, fresh: true, synStart: ms(40), rttServer: ms(1)},
			{txs: []int{2}, unit: 0, fresh: true, synStart: ms(40), rttServer: ms(1)},
		},
		txs: []queueTx{
			{conn: 0, arrival: 0, sent: 0, queued: 0, measured: ms(300), service: ms(300)},
			{conn: 1, arrival: ms(100), sent: ms(100), queued: ms(100), measured: ms(50), service: ms(50)},
			{conn: 2, arrival: ms(100), sent: ms(100), queued: ms(100), measured: ms(50), service: ms(50)},
		},
	}
	ch := &queueChange{connDelay: make([]int64, 3), connGone: make([]bool, 3), connSpliced: []bool{false, true, true},
		connBindsAtHello: make([]bool, 3), connFastSYN: make([]int64, 3), connAttempt: make([]int, 3), txsRemoved: make([]bool, 3)}
	out := (&Dataset{}).simulate(q, &Options{}, serverShape{workers: 1, backlog: 1}, ch)
	if out.connDrops[1] != 0 || out.connDrops[2] != 0 || out.limbo != 1 {
		t.Fatalf("server SYNs dropped %d and %d, %d left half-open; want none dropped and one half-open", out.connDrops[1], out.connDrops[2], out.limbo)
	}
	// The first queues at 101 ms and is served 300-350 ms; the second,
	// half-open, sends its request again at 302 ms, waits and is served
	// 350-400 ms.
	if out.server[1] != ms(250) || out.server[2] != ms(300) {
		t.Errorf("server times %v and %v, want 250ms and 300ms", time.Duration(out.server[1]), time.Duration(out.server[2]))
	}
}
