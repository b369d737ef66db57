package bench

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	mrand "math/rand/v2"
	"net/netip"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rtmon/rtmon/internal/minheap"
	"github.com/rtmon/rtmon/synth"
)

// The HTTPS capture: Sessions distinct real TLS sessions (one in four TLS
// 1.2, the rest TLS 1.3) are recorded in memory, then replayed as TCP
// connections from distinct client addresses at shifted times until the
// capture reaches TargetBytes. Recording is the costly part (handshakes,
// encryption), replaying is as cheap as the cleartext generator.
//
// A replica carries its session's bytes unchanged, client random included,
// so every replica of a session decrypts with that session's key log lines:
// unlike real traffic, but what a throughput benchmark needs. crypto/tls
// draws its randomness from crypto/rand whatever the seed, so two captures
// of the same Params differ in their TLS bytes, not in their shape.

// DefaultHTTPSSessions is how many distinct sessions are recorded.
const DefaultHTTPSSessions = 200

// HTTPSSummary describes a generated HTTPS capture.
type HTTPSSummary struct {
	Packets, Bytes int64
	Sessions       int // distinct TLS sessions
	Connections    int // replicas written; connection k replays session k % Sessions
	Transactions   int // request/response pairs written
	Elapsed        time.Duration
}

// KeyLogPath names the key log written next to an HTTPS capture.
func KeyLogPath(capture string) string { return strings.TrimSuffix(capture, ".pcap") + ".keylog" }

// RecordSessions records n sessions and returns them with their key log
// (NSS format, sessions in order). Sessions are recorded in parallel.
func RecordSessions(n int, seed int64) ([]*Session, []byte, error) {
	cert, err := selfSigned()
	if err != nil {
		return nil, nil, err
	}
	sessions := make([]*Session, n)
	logs := make([]bytes.Buffer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range max(runtime.GOMAXPROCS(0), 1) {
		wg.Go(func() {
			for i := range next {
				rng := mrand.New(mrand.NewPCG(uint64(seed), uint64(i)))
				version := uint16(tls.VersionTLS13)
				if i%4 == 3 {
					version = tls.VersionTLS12
				}
				sessions[i], errs[i] = recordSession(version, cert, planExchanges(rng, i), &logs[i])
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	var keyLog bytes.Buffer
	for i := range n {
		if errs[i] != nil {
			return nil, nil, fmt.Errorf("session %d: %w", i, errs[i])
		}
		keyLog.Write(logs[i].Bytes())
	}
	return sessions, keyLog.Bytes(), nil
}

type opKind uint8

const (
	opSYN opKind = iota
	opSYNACK
	opACK
	opClient
	opServer
	opClientAck
	opClientFIN
	opServerFIN
)

// op is one segment of a connection at a time relative to its SYN.
type op struct {
	at   int64
	kind opKind
	b    []byte
}

const (
	segMSS = 1448                         // MSS 1460 less the timestamp option
	segGap = int64(12 * time.Microsecond) // a full segment at 1 Gbit/s
	// segOverhead is a segment's bytes in the file besides its payload: pcap
	// record header, Ethernet, IPv4, TCP with timestamps.
	segOverhead = 16 + 14 + 20 + 32
)

// flight is consecutive writes of one side in one phase: the kernel sends
// them as one stream of segments.
type flight struct {
	fromClient bool
	phase      int
	b          []byte
}

func flights(ws []tlsWrite) []flight {
	var fs []flight
	for _, w := range ws {
		if n := len(fs); n > 0 && fs[n-1].fromClient == w.fromClient && fs[n-1].phase == w.phase {
			fs[n-1].b = append(fs[n-1].b, w.b...)
			continue
		}
		fs = append(fs, flight{w.fromClient, w.phase, append([]byte(nil), w.b...)})
	}
	return fs
}

// script lays a session out as the capture point beside the server sees
// it: the client is rtt away, the server answers handshake flights at once
// and requests after 1-30 ms, sends responses in slow-start windows the
// client acknowledges an RTT later, and the client sends its next request
// 0-20 ms after a response arrived.
func script(s *Session, rng *mrand.Rand) []op {
	rtt := int64(10*time.Millisecond) + rng.Int64N(int64(140*time.Millisecond))
	us := int64(time.Microsecond)
	ops := []op{{0, opSYN, nil}, {50 * us, opSYNACK, nil}, {50*us + rtt, opACK, nil}}
	at, serverEnd, cwnd := 50*us+rtt, int64(0), 10
	prevClient := true
	for _, f := range flights(s.writes) {
		switch {
		case f.fromClient && !prevClient:
			at = serverEnd + rtt
			if f.phase > 1 {
				at += rng.Int64N(int64(20 * time.Millisecond))
			}
		case !f.fromClient && prevClient && f.phase > 0:
			at += int64(time.Millisecond) + rng.Int64N(int64(29*time.Millisecond))
		case !f.fromClient && prevClient:
			at += 200*us + rng.Int64N(800*us)
		}
		if f.fromClient {
			for off := 0; off < len(f.b); off += segMSS {
				ops = append(ops, op{at, opClient, f.b[off:min(off+segMSS, len(f.b))]})
				at += 10 * us
			}
		} else {
			ops, serverEnd = serverFlight(ops, at, f.b, rtt, &cwnd)
			at = serverEnd
		}
		prevClient = f.fromClient
	}
	ops = append(ops, op{at, opClientFIN, nil}, op{at + 100*us, opServerFIN, nil}, op{at + 100*us + rtt, opClientAck, nil})
	// The client's ACK of a window may fall after its next flight's start.
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].at < ops[j].at })
	return ops
}

// serverFlight sends b in windows of cwnd segments, doubling per RTT, each
// acknowledged by the client an RTT after its last segment; it returns the
// ops and the time of the last segment.
func serverFlight(ops []op, at int64, b []byte, rtt int64, cwnd *int) ([]op, int64) {
	last := at
	for off := 0; off < len(b); {
		for n := 0; n < *cwnd && off < len(b); n++ {
			end := min(off+segMSS, len(b))
			ops = append(ops, op{at, opServer, b[off:end]})
			last, off, at = at, end, at+segGap
		}
		ops = append(ops, op{last + rtt, opClientAck, nil})
		if off < len(b) {
			at = last + rtt + segGap
			*cwnd = min(2**cwnd, 200)
		}
	}
	return ops, last
}

// replica is one connection replaying a session's script from shift on.
type replica struct {
	c     *synth.Conn
	ops   []op
	i     int
	shift int64
}

func (r *replica) next() int64            { return r.shift + r.ops[r.i].at }
func (r *replica) Before(o *replica) bool { return r.next() < o.next() }

func (r *replica) step() {
	o, c, t := r.ops[r.i], r.c, r.next()
	switch o.kind {
	case opSYN:
		c.SYN(t)
	case opSYNACK:
		c.SYNACK(t)
	case opACK:
		c.ACK(t)
	case opClient:
		c.Client(t, o.b)
	case opServer:
		c.Server(t, o.b)
	case opClientAck:
		c.ClientAck(t)
	case opClientFIN:
		c.ClientFIN(t)
	case opServerFIN:
		c.ServerFIN(t)
	}
	r.i++
}

// WriteHTTPS replays sessions into w, in order and then again as replicas,
// until w holds about targetBytes. Connections start 1 ms apart on
// average (exponential), so about a thousand are open at once.
func WriteHTTPS(w *synth.Writer, sessions []*Session, targetBytes, seed int64) (HTTPSSummary, error) {
	start := time.Now()
	sum := HTTPSSummary{Sessions: len(sessions)}
	if len(sessions) == 0 {
		return sum, fmt.Errorf("no sessions to write")
	}
	rng := mrand.New(mrand.NewPCG(uint64(seed), 0x7715))
	scripts := make([][]op, len(sessions))
	sizes := make([]int64, len(sessions))
	for i, s := range sessions {
		scripts[i] = script(s, rng)
		for _, o := range scripts[i] {
			sizes[i] += int64(len(o.b)) + segOverhead
		}
	}
	server := netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, 10}), 443)
	var h minheap.Heap[*replica]
	// Starting connections stops once those started will fill targetBytes:
	// w.Bytes() lags behind by all the open connections' remaining bytes.
	startAt, committed := synth.Base, int64(pcapHeaderLen)
	for k := 0; ; {
		more := k == 0 || committed < targetBytes
		if more && (len(h) == 0 || startAt <= h[0].next()) {
			a := [4]byte{10, byte((k + 1) >> 16), byte((k + 1) >> 8), byte(k + 1)}
			client := netip.AddrPortFrom(netip.AddrFrom4(a), uint16(32768+k%28000))
			c := w.Conn(client, server, rng.Uint32(), rng.Uint32())
			h.Push(&replica{c: c, ops: scripts[k%len(sessions)], shift: startAt - synth.Base})
			sum.Transactions += len(sessions[k%len(sessions)].Exchanges)
			committed += sizes[k%len(sessions)]
			k, sum.Connections = k+1, k+1
			startAt += int64(rng.ExpFloat64() * float64(time.Millisecond))
			continue
		}
		if len(h) == 0 {
			break
		}
		r := h[0]
		if r.step(); r.i == len(r.ops) {
			h.Pop()
		} else {
			h.Fix(0)
		}
		if err := w.Err(); err != nil {
			return sum, fmt.Errorf("writing connection: %w", err)
		}
	}
	sum.Packets, sum.Bytes, sum.Elapsed = w.Packets(), w.Bytes(), time.Since(start)
	return sum, nil
}

// GenerateHTTPSFile records p.Sessions sessions and writes the capture to
// path and their key log to KeyLogPath(path), mode 0600 as a key log must
// be (its secrets decrypt the capture).
func GenerateHTTPSFile(path string, p Params) (HTTPSSummary, error) {
	start := time.Now()
	sessions, keyLog, err := RecordSessions(max(p.Sessions, 1), p.Seed)
	if err != nil {
		return HTTPSSummary{}, err
	}
	if err := writeKeyLog(KeyLogPath(path), keyLog); err != nil {
		return HTTPSSummary{}, err
	}
	f, err := os.Create(path)
	if err != nil {
		return HTTPSSummary{}, fmt.Errorf("https capture: %w", err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	w, err := synth.NewWriter(bw, p.Options())
	if err != nil {
		f.Close()
		return HTTPSSummary{}, fmt.Errorf("https capture: %w", err)
	}
	sum, err := WriteHTTPS(w, sessions, p.TargetBytes, p.Seed)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return sum, fmt.Errorf("https capture %s: %w", path, err)
	}
	sum.Elapsed = time.Since(start)
	return sum, nil
}

// writeKeyLog replaces path with b, created 0600 whatever the umask.
func writeKeyLog(path string, b []byte) error {
	tmp := path + ".partial"
	_ = os.Remove(tmp) // a leftover may carry other permissions
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("key log: %w", err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("key log %s: %w", path, err)
	}
	return nil
}
