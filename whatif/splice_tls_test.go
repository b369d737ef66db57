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
	if terminated.server[2] != ms(20) || terminated.connDrops[2] != 0 {
		t.Errorf("bound at the request: server time %d, %d SYNs dropped; want its service and none", terminated.server[2], terminated.connDrops[2])
	}
	// The hello's bind, at 100 ms (the request less the TLS handshake),
	// meets the full backlog; connect(2) tries again a second later; the
	// request follows 400 ms after that.
	if want := spliceRetry(1) + ms(20); hello.server[2] != want || hello.connDrops[2] != 1 {
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
	// The queue holds the second request until 30 s: the SYNs at 0.5 s
	// up to 19.5 s are dropped (9), the one at 35.5 s gets in.
	if want := ms(35_000) + ms(20); out.server[2] != want || out.connDrops[2] != 9 {
		t.Errorf("spliced request: server time %v, %d server SYNs dropped; want %v and 9",
			time.Duration(out.server[2]), out.connDrops[2], time.Duration(want))
	}
}
