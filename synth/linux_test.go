package synth

import (
	"io"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

func TestRTOEstimator(t *testing.T) {
	var e rtoEst
	e.sample(160*ms, 0, 0)
	if e.rto() != 480*ms || e.probeTimeout(1) != 480*ms || e.probeTimeout(2) != 322*ms {
		t.Fatalf("after one 160 ms sample: RTO %v, probe %v / %v", e.rto(), e.probeTimeout(1), e.probeTimeout(2))
	}
	var f rtoEst
	f.sample(50*ms, 0, 0)
	if f.rto() != 250*ms || f.backedOff(3) != 2000*ms || f.backedOff(20) != int64(rtoMax) {
		t.Fatalf("after one 50 ms sample: RTO %v, backed off %v %v", f.rto(), f.backedOff(3), f.backedOff(20))
	}
	// A steady path: each window's sample is the same RTT, and the
	// variance term decays to its 200 ms floor.
	for i := uint32(1); i <= 40; i++ {
		e.sample(160*ms, i, i)
	}
	if e.srtt != 160*ms || e.rto() < 360*ms || e.rto() > 361*ms {
		t.Fatalf("steady 160 ms: srtt %v RTO %v", time.Duration(e.srtt), time.Duration(e.rto()))
	}
	// Samples within one window do not decay it.
	g := rtoEst{}
	g.sample(160*ms, 0, 10)
	for range 20 {
		g.sample(160*ms, 5, 10)
	}
	if g.rttvar != 320*ms {
		t.Fatalf("rttvar decayed inside a window: %v", time.Duration(g.rttvar))
	}
}

// newTestGen is a generator writing nowhere, for planning single exchanges.
func newTestGen(t *testing.T, wl Workload) (*gen, *client) {
	t.Helper()
	w, err := NewWriter(io.Discard, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wl.defaults()
	g := &gen{w: w, wl: wl, rng: rand.New(rand.NewPCG(1, 2)), ext: true,
		servers: []netip.AddrPort{netip.AddrPortFrom(serverAddr(0, false), 80)}}
	cl := &client{addr: clientAddr(0, false), rtt: int64(wl.RTTs[0]), port: 40000, ua: userAgents[1]}
	return g, cl
}

// TestUpstreamTimers pins the client's retransmission schedule for a
// request whose every copy but the last allowed one is lost: a tail loss
// probe, then RTOs doubling, all from the handshake's RTT sample - which,
// after lost SYN/ACKs, spans the SYN timeouts (the SYN/ACK echoes the first
// SYN), but not after SYNs the server dropped.
func TestUpstreamTimers(t *testing.T) {
	for _, tc := range []struct {
		name string
		wl   Workload
		m    int64 // the handshake sample
	}{
		{"clean", Workload{RTTs: []time.Duration{160 * time.Millisecond}}, 160*ms + int64(synackDelay)},
		{"rtt300", Workload{RTTs: []time.Duration{300 * time.Millisecond}}, 300*ms + int64(synackDelay)},
		{"syn-dropped", Workload{RTTs: []time.Duration{160 * time.Millisecond}, SYNLossRate: 1}, 160*ms + int64(synackDelay)},
		{"synack-lost", Workload{RTTs: []time.Duration{160 * time.Millisecond}, SYNACKLossRate: 1}, 7000*ms + 160*ms + int64(synackDelay)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wl := tc.wl
			wl.UpstreamLossRate = 1
			g, cl := newTestGen(t, wl)
			pc := g.open(cl, g.servers[0], Base)
			req := Request("GET", "www1.example.com", "/", "User-Agent: test")
			t0 := pc.free
			i := g.exchangeExt(pc, req, ResponseHeader(200, "text/plain", 10), nil, 10, ms)
			// Each timer fires on the wheel's granule (fire), late by up to
			// 32 ms at 250 Hz.
			rto := tc.m + max(2*tc.m, 200*ms)
			first := min(2*tc.m+200*ms, rto)
			at := []int64{t0, fire(t0, first)}
			for k := range 3 {
				at = append(at, fire(at[len(at)-1], rto<<k))
			}
			want := make([]int64, len(at))
			for k := range at {
				want[k] = at[k] - t0
			}
			var got []int64
			for _, e := range g.ev {
				if e.c == pc.c && (e.kind == evReqAt || e.kind == evCLost && e.t > t0+pc.d-ms) && e.t >= t0 {
					got = append(got, e.t-pc.d-t0)
				}
			}
			// The lost handshake ACK would show up here too; it is not lost.
			if len(got) != len(want) {
				t.Fatalf("sends at %v, want %v", got, want)
			}
			for k := range want {
				if d := got[k] - want[k]; d < 0 || d > ms/1000 {
					t.Errorf("copy %d sent %v after the first, want %v", k, time.Duration(got[k]), time.Duration(want[k]))
				}
			}
			r := g.recs[i]
			if r.UpstreamLost != maxCopies-1 || r.Trequest != got[len(got)-1] || r.ReqFirstCap != t0+pc.d+got[len(got)-1] {
				t.Errorf("truth %+v", r)
			}
		})
	}
}

// TestTailProbes pins the server's schedule when every client ACK is lost:
// a probe of the last segment two RTTs (+2 ms) after it, then RTOs of the
// first segment doubling, each answered by a lost D-SACK but the last; each
// timer fires on the timer wheel's granule.
func TestTailProbes(t *testing.T) {
	g, cl := newTestGen(t, Workload{RTTs: []time.Duration{160 * time.Millisecond}, AckLossRate: 1})
	pc := g.open(cl, g.servers[0], Base)
	req := Request("GET", "www1.example.com", "/", "User-Agent: test")
	i := g.exchangeExt(pc, req, ResponseHeader(200, "text/plain", 5000), nil, 5000, ms)
	if pc.tail == nil || g.recs[i].AckCap != 0 {
		t.Fatal("no pending tail after losing every ACK")
	}
	last := g.recs[i].RespLastCap
	g.resolveTail(pc, noNext)
	r := g.recs[i]
	rtt := 160 * ms
	rto := 3 * rtt // the handshake's sample only: every later ACK was lost
	want := []int64{fire(last, 2*rtt+2*ms)}
	for k := range maxCopies - 1 {
		want = append(want, fire(want[k], rto<<k))
	}
	var got []int64
	var kinds []evKind
	for _, e := range g.ev {
		if e.kind == evRetrans || e.kind == evDupRetrans {
			got = append(got, e.t)
			kinds = append(kinds, e.kind)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("retransmissions at %v, want %v", got, want)
	}
	for k := range want {
		if got[k] != want[k] {
			t.Errorf("retransmission %d at +%v, want +%v", k, time.Duration(got[k]-last), time.Duration(want[k]-last))
		}
		if wantKind := evDupRetrans; k == 0 && kinds[k] != evRetrans || k > 0 && kinds[k] != wantKind {
			t.Errorf("retransmission %d is kind %d", k, kinds[k])
		}
	}
	if !r.SpuriousRetrans || r.AckCap != want[len(want)-1]+rtt || r.RespLastCap != want[len(want)-1] || r.End >= r.RespLastCap {
		t.Errorf("truth %+v", r)
	}
}

func TestPageviewsHelper(t *testing.T) {
	c := netip.MustParseAddrPort("198.51.100.1:40000")
	recs := []TruthRecord{
		{PageviewID: 2, Client: c, Container: true, URL: "/b", Start: 50, End: 90},
		{PageviewID: 1, Client: c, Redirect: true, URL: "/go/1", Start: 10, End: 20},
		{PageviewID: 1, Client: c, Container: true, Host: "h", URL: "/a", Start: 20, End: 40},
		{PageviewID: 1, Client: c, URL: "/x.png", Start: 41, End: 60},
		{PageviewID: 1, Client: c, URL: "/favicon.ico", AfterLoad: true, Start: 70, End: 80},
	}
	pvs := Pageviews(recs)
	if len(pvs) != 2 || pvs[0].PageviewID != 1 || pvs[0].Start != 10 || pvs[0].End != 60 || pvs[0].URL != "/a" ||
		len(pvs[0].Members) != 4 || pvs[1].Start != 50 || pvs[1].End != 90 {
		t.Fatalf("%+v", pvs)
	}
}

// The wheel fires late, never early, by less than a granule: a jiffy (4 ms
// at 250 Hz) up to 63 jiffies, then 8, 64, ... jiffies.
func TestTimerWheel(t *testing.T) {
	for _, d := range []int64{ms, 200 * ms, 252 * ms, 256 * ms, 300 * ms, 2040 * ms, 2100 * ms, 9000 * ms} {
		for _, now := range []int64{Base, Base + 1, Base + 3*ms + 7, Base + 123456789} {
			at := fire(now, d)
			gran := jiffy
			for j := d / jiffy; j >= 64; j >>= 3 {
				gran <<= 3
			}
			if late := at - (now + d); late < 0 || late > gran+jiffy || at%jiffy != 0 {
				t.Errorf("fire(+%v) late by %v, granule %v", time.Duration(d), time.Duration(late), time.Duration(gran))
			}
		}
	}
}
