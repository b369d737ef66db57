package testbed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var (
	rttClients = map[netip.Addr]time.Duration{
		netip.MustParseAddr("198.51.100.10"): 80 * time.Millisecond,
		netip.MustParseAddr("198.51.100.11"): 110 * time.Millisecond,
		netip.MustParseAddr("198.51.100.12"): 150 * time.Millisecond,
	}
)

// listenIn opens a TCP listener inside h's namespace.
func listenIn(t *testing.T, h *Host, port int) net.Listener {
	t.Helper()
	var ln net.Listener
	err := inNS(h.NS, func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(h.Addr, uint16(port)).String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln
}

// TestBridgeRTT: a TCP connect from each client address takes one RTT
// (SYN out, SYN/ACK back), which must be the configured one within a few
// ms. The RTT is the client kernel's own handshake sample (TCP_INFO), not
// a clock read in this process, which a busy machine delays; handshakes
// during which the link itself stalled (BridgeStats.Stalls) show the
// stall, not the configured delay, and are left out of the median. No
// handshake may ever be faster than the configured RTT.
func TestBridgeRTT(t *testing.T) {
	needPackage(t, "/usr/sbin/ethtool", "ethtool")
	ctx := testContext(t)
	tb := New(t, Options{Link: &LinkOptions{RTT: rttClients, DefaultRTT: 20 * time.Millisecond, Seed: 1}})
	ln := listenIn(t, tb.Server, 9000)
	const want = 8 // handshakes the link did not stall
	for addr, rtt := range rttClients {
		var clean, all []time.Duration
		for tries := 0; len(clean) < want; tries++ {
			if tries == 20*want {
				t.Fatalf("%s: the link stalled during %d of %d handshakes", addr, tries-len(clean), tries)
			}
			d := Dialer(tb, addr)
			from := time.Now()
			c, err := d.DialContext(ctx, "tcp4", ln.Addr().String())
			if err != nil {
				t.Fatalf("dial from %s: %v", addr, err)
			}
			to := time.Now()
			k, err := handshakeRTT(c)
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, k)
			if tb.Link.Bridge.Stats().StallWithin(from.UnixNano(), to.UnixNano()) == 0 {
				clean = append(clean, k)
			}
		}
		slices.Sort(clean)
		slices.Sort(all)
		med := clean[len(clean)/2]
		t.Logf("%s: configured RTT %v, kernel handshake RTTs %v (%d more during link stalls)", addr, rtt, clean, len(all)-len(clean))
		if d := (med - rtt).Abs(); d > 4*time.Millisecond {
			t.Errorf("%s: median handshake RTT %v, configured RTT %v (off by %v)", addr, med, rtt, d)
		}
		// The kernel's sample has microsecond resolution.
		if all[0] < rtt-time.Millisecond {
			t.Errorf("%s: a handshake took %v, less than the RTT %v", addr, all[0], rtt)
		}
	}
	if s := tb.Link.Bridge.Stats(); s.SendErrors != [2]int64{} || s.Lost != [2]int64{} {
		t.Errorf("bridge stats %+v: want no send errors, no loss", s)
	}
}

// TestBridgeLossOrderRate sends numbered UDP datagrams through a lossy,
// rate-limited link: the loss count must be plausible for the configured
// probability, survivors must arrive in order, and the transfer must take
// about as long as the rate implies.
func TestBridgeLossOrderRate(t *testing.T) {
	const (
		n    = 2000
		size = 1000
		loss = 0.05
		rate = 1 << 20 // bytes/s
	)
	client := netip.MustParseAddr("198.51.100.10")
	needPackage(t, "/usr/sbin/ethtool", "ethtool")
	tb := New(t, Options{Link: &LinkOptions{RTT: map[netip.Addr]time.Duration{client: 20 * time.Millisecond},
		Loss: loss, Seed: 7, RateBytes: rate, MaxQueue: 5 * time.Second}})
	var srv *net.UDPConn
	if err := inNS(tb.Server.NS, func() (err error) {
		srv, err = net.ListenUDP("udp4", &net.UDPAddr{IP: tb.Server.Addr.AsSlice(), Port: 9001})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var cl *net.UDPConn
	if err := inNS(tb.Client.NS, func() (err error) {
		cl, err = net.DialUDP("udp4", &net.UDPAddr{IP: client.AsSlice()}, srv.LocalAddr().(*net.UDPAddr))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// The receiver runs while the sender sends, so the server socket's
	// buffer never overflows: every loss is the bridge's.
	var got []uint32
	var last time.Time
	recvDone := make(chan error, 1)
	go func() {
		rbuf := make([]byte, 2048)
		for {
			srv.SetReadDeadline(time.Now().Add(time.Second))
			m, err := srv.Read(rbuf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					err = nil
				}
				recvDone <- err
				return
			}
			got = append(got, binary.BigEndian.Uint32(rbuf[:m]))
			last = time.Now()
		}
	}()
	start := time.Now()
	buf := make([]byte, size)
	for i := range n {
		binary.BigEndian.PutUint32(buf, uint32(i))
		if _, err := cl.Write(buf); err != nil {
			t.Fatal(err)
		}
		// Pace above the link rate but not far: the test measures the
		// bridge's queue, not the client socket buffer overflowing.
		if i%64 == 63 {
			time.Sleep(time.Duration(64*size) * time.Second / (rate * 2))
		}
	}
	if err := <-recvDone; err != nil {
		t.Fatal(err)
	}
	lost := n - len(got)
	mean, sd := n*loss, math.Sqrt(n*loss*(1-loss))
	stats := tb.Link.Bridge.Stats()
	stats.Stalls = [2][]Stall{} // the spans are for judging below, not for the log
	t.Logf("received %d of %d (lost %d, expected %.0f±%.1f); last after %v; stats %+v",
		len(got), n, lost, mean, sd, last.Sub(start), stats)
	if math.Abs(float64(lost)-mean) > 5*sd {
		t.Errorf("lost %d of %d, implausible for loss %v (expected %.0f±%.1f)", lost, n, loss, mean, sd)
	}
	if !slices.IsSorted(got) {
		t.Errorf("datagrams reordered")
	}
	// Frames on the wire: payload + UDP 8 + IP 20 + Ethernet 14. The
	// link can be no faster than its rate; slower only by what a busy
	// machine took from it (its stalls) and from the receiver.
	want := time.Duration(float64(len(got)*(size+42)) / rate * float64(time.Second))
	stalled := tb.Link.Bridge.Stats().StallWithin(start.UnixNano(), last.UnixNano())
	if el := last.Sub(start); el < want*9/10 || el > want*12/10+100*time.Millisecond+stalled {
		t.Errorf("transfer took %v, the rate implies about %v (the link stalled %v)", el, want, stalled)
	}
}

// TestStallWithin: the stall log merges overlapping late sends, and a
// load's stall counts time during which either direction was late once,
// however many frames were late then.
func TestStallWithin(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	b := &Bridge{}
	t0 := time.Unix(0, ms(1000))
	b.noteStall(ToServer, t0, 5*time.Millisecond)                          // 1000-1005
	b.noteStall(ToServer, t0.Add(2*time.Millisecond), 6*time.Millisecond)  // 1002-1008: merged
	b.noteStall(ToServer, t0.Add(20*time.Millisecond), time.Millisecond/2) // under 1 ms: not a stall
	b.noteStall(ToServer, t0.Add(30*time.Millisecond), 4*time.Millisecond) // 1030-1034
	b.noteStall(ToClient, t0.Add(3*time.Millisecond), 10*time.Millisecond) // 1003-1013
	s := BridgeStats{Stalls: [2][]Stall{b.stalls[0], b.stalls[1]}}
	if want := []Stall{{ms(1000), ms(1008)}, {ms(1030), ms(1034)}}; !slices.Equal(s.Stalls[0], want) {
		t.Fatalf("to-server stalls %v, want %v", s.Stalls[0], want)
	}
	for _, c := range []struct {
		from, to int64
		want     time.Duration
	}{
		{ms(0), ms(2000), 17 * time.Millisecond}, // 1000-1013 and 1030-1034
		{ms(1004), ms(1032), 11 * time.Millisecond},
		{ms(1013), ms(1030), 0},
		{ms(1033), ms(1033), 0},
	} {
		if got := s.StallWithin(c.from, c.to); got != c.want {
			t.Errorf("StallWithin(%d, %d ms) = %v, want %v", c.from/ms(1), c.to/ms(1), got, c.want)
		}
	}
	full := &Bridge{}
	for i := range maxStalls + 10 {
		full.noteStall(ToClient, time.Unix(0, ms(int64(10*i))), 2*time.Millisecond)
	}
	st := full.stalls[ToClient]
	if len(st) != maxStalls || st[len(st)-1].To != ms(10*(maxStalls+9)+2) {
		t.Errorf("full log: %d spans, last %v: want %d spans, the last reaching the latest stall", len(st), st[len(st)-1], maxStalls)
	}
}

// handshakeRTT is the kernel's RTT sample of a just-connected socket: the
// SYN to SYN/ACK time, stamped by the kernel.
func handshakeRTT(c net.Conn) (time.Duration, error) {
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("tcp info: %w", err)
	}
	var info *unix.TCPInfo
	var ierr error
	if err := raw.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil {
		return 0, fmt.Errorf("tcp info: %w", err)
	}
	if ierr != nil {
		return 0, fmt.Errorf("tcp info: %w", ierr)
	}
	return time.Duration(info.Rtt) * time.Microsecond, nil
}
