package reconstruct_test

import (
	"errors"
	"io"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/synth"
)

// TestInFlight follows what the tracker lists as in flight, packet by
// packet: a connection retrying its SYNs from its first SYN until its
// transaction is delivered, a spare connection only for the moments after
// its handshake, a request from its first byte, a connect never answered
// until its client must have given up, and never an event stream.
func TestInFlight(t *testing.T) {
	client := netip.MustParseAddr("198.51.100.7")
	srv := netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), 80)
	T := func(ms float64) int64 { return synth.Base + int64(ms*1e6) }
	path := filepath.Join(t.TempDir(), "inflight.pcap")
	if err := synth.WriteFile(path, synth.Options{Nanosecond: true}, func(w *synth.Writer) error {
		retry := w.Conn(netip.AddrPortFrom(client, 40000), srv, 1000, 5000)
		spare := w.Conn(netip.AddrPortFrom(client, 40001), srv, 2000, 6000)
		stream := w.Conn(netip.AddrPortFrom(client, 40002), srv, 3000, 7000)
		retry.SYN(T(0))
		spare.SYN(T(1))
		spare.SYNACK(T(1.1))
		spare.ACK(T(21))
		stream.SYN(T(2))
		stream.SYNACK(T(2.1))
		stream.ACK(T(22))
		stream.Client(T(22.1), synth.Request("GET", "example.test", "/events"))
		stream.Server(T(60), synth.ResponseHeader(200, "text/event-stream", 1<<20))
		retry.SYN(T(1000))
		retry.SYN(T(2000))
		retry.SYNACK(T(2000.1))
		retry.ACK(T(2020))
		retry.Client(T(2020.1), synth.Request("GET", "example.test", "/b.js"))
		spare.Client(T(2500), synth.Request("GET", "example.test", "/c.js"))
		retry.Server(T(3000), synth.Response(200, "text/javascript", []byte("b()")))
		retry.ClientAck(T(3020))
		spare.Server(T(3100), synth.Response(200, "text/javascript", []byte("c()")))
		spare.ClientAck(T(3120))
		// A connect the server never answers: two SYNs a second apart,
		// then the client gives up; the other client's packets move time on.
		dead := w.Conn(netip.AddrPortFrom(client, 40003), srv, 4000, 8000)
		dead.SYN(T(3200))
		dead.SYN(T(4200))
		ticker := w.Conn(netip.AddrPortFrom(netip.MustParseAddr("198.51.100.9"), 50000), srv, 9000, 9900)
		ticker.ClientRST(T(8000))
		ticker.ClientRST(T(8300))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	src, err := capture.OpenFiles([]string{path}, capture.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out := &collected{}
	tr := reconstruct.NewTracker(reconstruct.Config{}, out)
	inFlight := func() []int64 {
		var got []int64
		for since := range tr.InFlight(client) {
			got = append(got, since)
		}
		for range tr.InFlight(netip.MustParseAddr("198.51.100.9")) {
			t.Error("in flight for a client that only sent resets")
		}
		slices.Sort(got)
		return got
	}
	// After each packet's capture time, what must be in flight.
	want := map[int64][]int64{
		T(0):      {T(0)},
		T(21):     {T(0), T(1)},    // the spare connection just connected: a request may follow at once
		T(60):     {T(0)},          // spare idle past the preconnect threshold; the stream is not waited for
		T(2020.1): {T(0)},          // the retried connection's request: still from its first SYN
		T(2500):   {T(0), T(2500)}, // the spare connection's request, from its first byte
		T(3020):   {T(2500)},       // b.js delivered
		T(3120):   nil,             // c.js delivered
	}
	var p capture.Packet
	seen := 0
	for {
		if err := src.Next(&p); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		tr.Packet(&p)
		if w, ok := want[p.Timestamp]; ok {
			seen++
			if got := inFlight(); !slices.Equal(got, w) {
				t.Errorf("at %.1f ms: in flight since %v, want %v", float64(p.Timestamp-synth.Base)/1e6, rel(got), rel(w))
			}
		}
	}
	if seen != len(want) {
		t.Fatalf("checked %d moments, want %d", seen, len(want))
	}
	tr.Flush()
	checkInvariants(t, out)
}

func rel(ts []int64) []float64 {
	var out []float64
	for _, v := range ts {
		out = append(out, float64(v-synth.Base)/1e6)
	}
	return out
}
