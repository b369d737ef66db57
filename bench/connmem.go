package bench

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/synth"
)

// ConnState is what the open connections are doing when measured.
type ConnState int

const (
	// Idle: a keep-alive connection between transactions (one request and
	// its complete response, acknowledged): the common state of a busy
	// server's table.
	Idle ConnState = iota
	// MidResponse: a request answered by the response head and the first
	// body segment, more to come: parsers and a transaction are live.
	MidResponse
	// Handshake: SYN, SYN/ACK, ACK and nothing else yet.
	Handshake
	// RequestPending: a request sent, its response not begun (the
	// server's think time): a transaction waits in the queue.
	RequestPending
)

var connStateNames = [...]string{Idle: "idle keep-alive", MidResponse: "mid-response", Handshake: "handshake only",
	RequestPending: "request pending"}

func (s ConnState) String() string {
	if s >= 0 && int(s) < len(connStateNames) {
		return connStateNames[s]
	}
	return fmt.Sprintf("state(%d)", int(s))
}

// ConnMemory is the heap the tracker holds per open connection.
type ConnMemory struct {
	State       ConnState
	Connections int     // open in the tracker when measured
	LivePerConn float64 // live heap (HeapAlloc after GC) delta / connections
	HeapPerConn float64 // in-use spans (HeapInuse after GC) delta / connections
	// CountedPerConn is what the tracker counts each at against
	// --max-memory (Stats.MemoryInUse / connections).
	CountedPerConn float64
}

type discard struct{}

func (discard) Connection(*reconstruct.Connection)   {}
func (discard) Transaction(*reconstruct.Transaction) {}

// OpenConnectionPackets writes n concurrent connections in state s to a
// capture in dir and returns their decoded packets (payloads copied), in
// capture-time order.
func OpenConnectionPackets(dir string, n int, s ConnState) ([]capture.Packet, error) {
	path := filepath.Join(dir, fmt.Sprintf("open-%d-%d.pcap", n, s))
	defer os.Remove(path)
	if err := WriteOpenConnections(path, n, s); err != nil {
		return nil, err
	}
	src, err := capture.OpenFiles([]string{path}, capture.FileOptions{})
	if err != nil {
		return nil, err
	}
	defer src.Close()
	var pkts []capture.Packet
	for {
		var p capture.Packet
		if err := src.Next(&p); err != nil {
			if errors.Is(err, io.EOF) {
				return pkts, nil
			}
			return nil, fmt.Errorf("reading open connections capture: %w", err)
		}
		p.Payload = append([]byte(nil), p.Payload...)
		pkts = append(pkts, p)
	}
}

// WriteOpenConnections writes a capture of n connections open at once,
// all in state s at its end, to path.
func WriteOpenConnections(path string, n int, s ConnState) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("open connections capture: %w", err)
	}
	w, err := synth.NewWriter(f, synth.Options{Nanosecond: true})
	if err != nil {
		f.Close()
		return err
	}
	server := netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, 1}), 80)
	req := synth.Request("GET", "www.example.com", "/static/app.js",
		"User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
		"Accept: */*", "Accept-Encoding: gzip, deflate", "Connection: keep-alive")
	full := synth.ResponseLen(200, "application/javascript", 1000)
	head := synth.ResponseHeader(200, "application/javascript", 100000)
	partial := append(head, synth.Body(1000)...)
	// Interleave the connections in time, as on a busy server, all within a
	// few seconds so nothing idles out.
	const step = 2000 // ns between connections' phases
	t0 := synth.Base
	conns := make([]*synth.Conn, n)
	for i := range n {
		a := [4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}
		client := netip.AddrPortFrom(netip.AddrFrom4(a), uint16(40000+i%20000))
		conns[i] = w.Conn(client, server, uint32(i)*7919, uint32(i)*104729)
	}
	phase := func(k int, fn func(c *synth.Conn, t int64)) {
		for i, c := range conns {
			fn(c, t0+int64(k)*int64(n)*step+int64(i)*step)
		}
	}
	phase(0, func(c *synth.Conn, t int64) { c.SYN(t) })
	phase(1, func(c *synth.Conn, t int64) { c.SYNACK(t) })
	phase(2, func(c *synth.Conn, t int64) { c.ACK(t) })
	switch s {
	case Idle:
		phase(3, func(c *synth.Conn, t int64) { c.Client(t, req) })
		phase(4, func(c *synth.Conn, t int64) { c.Server(t, full) })
		phase(5, func(c *synth.Conn, t int64) { c.ClientAck(t) })
	case MidResponse:
		phase(3, func(c *synth.Conn, t int64) { c.Client(t, req) })
		phase(4, func(c *synth.Conn, t int64) { c.Server(t, partial) })
	case RequestPending:
		phase(3, func(c *synth.Conn, t int64) { c.Client(t, req) })
	}
	err = w.Close()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("open connections capture: %w", err)
	}
	return nil
}

func heapAfterGC() (live, inuse uint64) {
	runtime.GC()
	runtime.GC() // a second cycle also frees what the first one's finalizers released
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.HeapInuse
}

// MeasureOpenConnections feeds pkts (from OpenConnectionPackets) to a fresh
// tracker and returns the heap it holds per open connection. The table's
// map is included, amortised over the connections, as it is in production.
func MeasureOpenConnections(pkts []capture.Packet, s ConnState) (ConnMemory, error) {
	live0, inuse0 := heapAfterGC()
	tr := reconstruct.NewTracker(reconstruct.Config{}, discard{})
	for i := range pkts {
		tr.Packet(&pkts[i])
	}
	live1, inuse1 := heapAfterGC()
	st := tr.Stats()
	open := st.OpenConnections
	runtime.KeepAlive(tr)
	if open == 0 {
		return ConnMemory{}, fmt.Errorf("no connection open after %d packets", len(pkts))
	}
	return ConnMemory{State: s, Connections: open,
		LivePerConn:    (float64(live1) - float64(live0)) / float64(open),
		HeapPerConn:    (float64(inuse1) - float64(inuse0)) / float64(open),
		CountedPerConn: float64(st.MemoryInUse) / float64(open)}, nil
}
