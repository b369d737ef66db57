package synth

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"time"

	"github.com/rtmon/rtmon/internal/minheap"
)

// Workload describes a synthetic population of browsers loading pages.
// Zero fields take the defaults documented on each.
type Workload struct {
	Seed    int64
	Clients int // distinct client addresses; default 10
	Servers int // distinct server addresses (port 80); default 1, at most 100
	// Duration bounds the start times of pageviews (0 = unbounded when
	// TargetBytes is set, else 60 s). Connections still open at the end are
	// finished, so the capture runs a few seconds past it.
	Duration time.Duration
	// PageviewsPerClient sets the mean think time between a client's pageviews
	// to Duration/PageviewsPerClient (exponential); default 3. Without a
	// Duration the mean think time is 20 s.
	PageviewsPerClient float64
	ObjectsPerPage     [2]int           // embedded objects per page, uniform in [min, max]; default 1..11
	ConnsPerClient     int              // parallel keep-alive connections per pageview (1..6); default 6
	RTTs               []time.Duration  // client i has RTT RTTs[i%len]; default 160/220/300 ms
	SYNLossRate        float64          // a SYN reaches the server but gets no SYN/ACK (listen-queue drop)
	SYNACKLossRate     float64          // a SYN/ACK leaves the server but never reaches the client
	DataLossRate       float64          // a response segment is lost after the capture point
	ServerTime         [2]time.Duration // embedded-object processing time, uniform; default 1..20 ms
	ContainerTime      [2]time.Duration // HTML page processing time, uniform; default 20..300 ms
	// TargetBytes stops starting pageviews once the uncompressed file reaches
	// this size (0 = no size bound). Open pageviews are completed, so the file
	// ends slightly larger.
	TargetBytes int64
	// IPv6 puts clients and servers in 2001:db8::/32 instead of IPv4 ranges.
	IPv6 bool
	// Markup gives the basic model's containers an HTML document
	// (HTMLDocument) naming the pageview's objects instead of filler, of
	// the same length and from its own random source: every packet keeps
	// its size and time, only the container bytes change. Benchmarks want
	// it, since real pages are markup from the first byte. The extended
	// model ignores it (see HTML).
	Markup bool

	// The options below add what real browsers and lossy paths produce. All
	// zero, the output is byte for byte what it always was. Any of them set
	// switches the generator to its extended model, which also: echoes
	// timestamps as Linux peers do (ConnOptions.ClientRTT), has the server
	// ACK a connection's first request at once (quickack) and out-of-order
	// data with SACK blocks, has clients SACK their dupACKs, sends
	// browser-like request headers (Accept and Sec-Fetch-* by destination),
	// and times every request as described on TruthRecord.

	// IPID chooses the IPv4 Identification fields; IPIDPerConn is Linux.
	IPID IPIDMode
	// AckLossRate: each pure client ACK (not a SYN or FIN, and not a dupACK
	// reporting a hole, which the DataLossRate model relies on) is lost
	// before the capture point. A lost ACK of a response's last byte makes
	// the server retransmit its tail spuriously (see TruthRecord).
	AckLossRate float64
	// UpstreamLossRate: each copy of a client data segment is lost before
	// the capture point; the client recovers as Linux does (RACK, tail loss
	// probe, RTO with backoff).
	UpstreamLossRate float64
	// ReorderRate: the first segment of a multi-segment request reaches the
	// capture point 0.5-5 ms late, behind the later ones.
	ReorderRate float64
	// RequestBodies: when set, a fifth of containers are form POSTs with a
	// body of a size uniform in [min, max] and a third of clients carry
	// cookies of 1.5-4 KB, so their requests span several segments. A
	// request is cut to initCwnd segments, one flight.
	RequestBodies [2]int
	// HTML: containers carry a real HTML page that references exactly the
	// objects the pageview fetches (stylesheets, scripts, images, a
	// preload, an inline background), with absolute and relative URLs.
	HTML bool
	// GzipRate: this fraction of HTML containers (with HTML) is sent
	// gzip-compressed, half of those with chunked transfer encoding.
	GzipRate float64
	// AfterLoad: after a pageview's load event and a render delay of 5-60
	// ms the browser fetches /favicon.ico and POSTs a beacon on the page's
	// keep-alive connections (TruthRecord.AfterLoad).
	AfterLoad bool
	// NoRefererRate: this fraction of clients never sends Referer, browses
	// one server with 1-4 s think times and reuses its keep-alive
	// connections across pageviews until the server's idle timeout.
	NoRefererRate float64
	// Redirects: this fraction of pageviews starts with GET /go/<n>, a 302
	// to the container, fetched next on the same connection.
	Redirects float64
}

// extended reports whether any option of the extended model is set.
func (wl *Workload) extended() bool {
	return wl.IPID != IPIDCounter || wl.AckLossRate > 0 || wl.UpstreamLossRate > 0 || wl.ReorderRate > 0 ||
		wl.RequestBodies != [2]int{} || wl.HTML || wl.GzipRate > 0 || wl.AfterLoad || wl.NoRefererRate > 0 || wl.Redirects > 0
}

func (wl *Workload) defaults() {
	if wl.Clients <= 0 {
		wl.Clients = 10
	}
	if wl.Servers <= 0 {
		wl.Servers = 1
	}
	wl.Servers = min(wl.Servers, 100) // 203.0.113.1-100
	if wl.Duration <= 0 && wl.TargetBytes <= 0 {
		wl.Duration = 60 * time.Second
	}
	if wl.PageviewsPerClient <= 0 {
		wl.PageviewsPerClient = 3
	}
	if wl.ObjectsPerPage == [2]int{} {
		wl.ObjectsPerPage = [2]int{1, 11}
	}
	if wl.ObjectsPerPage[1] < wl.ObjectsPerPage[0] {
		wl.ObjectsPerPage[1] = wl.ObjectsPerPage[0]
	}
	if wl.ConnsPerClient <= 0 {
		wl.ConnsPerClient = 6
	}
	wl.ConnsPerClient = min(wl.ConnsPerClient, 6)
	if len(wl.RTTs) == 0 {
		wl.RTTs = []time.Duration{160 * time.Millisecond, 220 * time.Millisecond, 300 * time.Millisecond}
	}
	if wl.ServerTime == [2]time.Duration{} {
		wl.ServerTime = [2]time.Duration{time.Millisecond, 20 * time.Millisecond}
	}
	if wl.ContainerTime == [2]time.Duration{} {
		wl.ContainerTime = [2]time.Duration{20 * time.Millisecond, 300 * time.Millisecond}
	}
}

// TruthRecord is the ground truth of one HTTP transaction.
//
// Model: the capture point is at the server (zero delay to it); the client is
// RTT/2 away in each direction and its clock is the capture clock. So a packet
// the client sends at c is captured at c+RTT/2 and a captured server packet
// reaches the client RTT/2 later. All client-side times below are exact in that
// model, not estimates:
//   - Start: the client's first SYN (new connection) or its request send time
//     (reused connection). End: the client receives the last response byte,
//     i.e. max over segments of the capture time of the first copy that
//     reached the client, plus RTT/2. A spurious retransmission
//     (SpuriousRetrans) changes nothing.
//   - Tconn = handshake-complete at the client (the accepted SYN/ACK's capture
//     time + RTT/2) - first SYN send; SYN-loss gaps included; 0 when reused.
//   - Trequest = the request complete at the server (ReqLastCap) - RTT/2 -
//     the request's first send (connected, on a new connection): the client
//     time by which it had sent every byte the server needed. So it includes
//     the waits for lost copies (UpstreamLost) and for a late first segment
//     (Reordered); 0 for one segment that got through.
//   - Tserver = first response byte at the client - (ReqLastCap - RTT/2)
//     = ServerTime + RTT.
//   - Ttransfer = End - first response byte at the client.
//
// Tconn + Trequest + Tserver + Ttransfer == End - Start exactly.
type TruthRecord struct {
	PageviewID    uint64
	Container     bool // the HTML page that starts the pageview
	Client        netip.AddrPort
	Server        netip.AddrPort
	NewConn       bool  // first transaction on its connection
	SYNs          int   // SYNs captured for the connection (NewConn only)
	SYNACKs       int   // SYN/ACKs captured (NewConn only)
	RTT           int64 // ns
	Method        string
	Host          string
	URL           string
	Referer       string
	UserAgent     string
	Status        int
	ContentType   string
	RequestBytes  int // request bytes on the wire
	ResponseBytes int // response head + body bytes
	BodyBytes     int
	RetransBytes  int   // response bytes retransmitted, spurious ones included
	ServerTime    int64 // server processing: request complete at the capture point -> first response byte sent

	// Client-perceived, ns since the epoch / ns.
	Start, End                          int64
	Tconn, Trequest, Tserver, Ttransfer int64

	// Capture-side times (what rtmon can see).
	SYNCap int64 // first SYN (NewConn only)
	// ReqFirstCap: the first copy the capture point saw of the segment
	// carrying the request's first byte (a retransmission when the first
	// copies were lost, the late segment when reordered).
	ReqFirstCap int64
	// ReqLastCap: the request became complete at the capture point (its
	// last missing byte arrived).
	ReqLastCap   int64
	RespFirstCap int64
	RespLastCap  int64 // last transmission of any response byte, spurious retransmissions included
	AckCap       int64 // first captured client packet acknowledging the last response byte

	// Extended model only (see Workload).
	Redirect  bool // a 302 that starts the pageview; the container follows on the same connection
	AfterLoad bool // fetched after the load event (favicon, beacon); outside the pageview's span
	// SpuriousRetrans: the capture shows the server retransmitting response
	// bytes the client already had (its ACK of the last byte was lost):
	// a tail loss probe or RTO, each answered by a D-SACK.
	SpuriousRetrans bool
	UpstreamLost    int  // copies of request segments lost before the capture point (late spurious ones included)
	Reordered       bool // the request's first segment reached the capture point behind later ones
	LostACKs        int  // client pure ACKs of this response lost before the capture point
	// WindowRestart (NewConn only): the transfer time the server lost by
	// starting this response with a window of one segment, as Linux does
	// after more than one SYN/ACK retransmission (tcp_init_transfer).
	WindowRestart int64
	// HandshakeACKLost (NewConn only): the handshake's ACK was lost; the
	// first request completed the handshake at the server.
	HandshakeACKLost bool
	// Preconnected (NewConn only): the first request went out after the
	// handshake had completed, on a spare connection; the client waited
	// for no connect, so it is timed as on a reused one (Start is its
	// send time, Tconn 0).
	Preconnected bool
}

// Summary counts what Generate wrote.
type Summary struct {
	Pageviews    int
	Transactions int
	Connections  int
	Packets      int64
	Bytes        int64 // uncompressed file size
	SYNRetrans   int   // SYNs beyond the first per connection
	SYNACKs      int
	DataRetrans  int   // retransmitted data segments
	First, Last  int64 // capture times of the first and last packet
	Elapsed      time.Duration

	// Extended model only.
	SpuriousRetrans int // server retransmissions of bytes the client had
	UpstreamLost    int // client data copies lost before the capture point
	LostACKs        int // client pure ACKs lost before the capture point
	Reordered       int // requests whose first segment arrived behind a later one
}

const (
	synackDelay = 30 * time.Microsecond  // server kernel answering a SYN
	segGap      = 12 * time.Microsecond  // 1500 B at ~1 Gbit/s
	parseDelay  = 5 * time.Millisecond   // browser parses HTML before fetching objects
	delAckMax   = 40 * time.Millisecond  // Linux delayed ACK: server ACKs slow requests
	minRTO      = 200 * time.Millisecond // Linux minimum RTO, for tail losses
	keepAlive   = 5 * time.Second        // server closes idle keep-alive connections
	initCwnd    = 10
	mss         = 1460
)

// SYN retransmission gaps of Linux (initial RTO 1 s, doubling); the last
// attempt always succeeds so every pageview completes.
var synGaps = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}

type stream struct {
	ev []event
	i  int
}

// item is what the heap orders: a client's next pageview, a stream of
// planned packets, or a keep-alive connection's pending close.
type item struct {
	t   int64
	seq uint64
	cl  *client
	st  *stream
	pc  *pconn
}

// Before orders items by time, then creation.
func (a *item) Before(b *item) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	return a.seq < b.seq
}

type gen struct {
	w       *Writer
	wl      Workload
	rng     *rand.Rand
	truth   func(TruthRecord)
	servers []netip.AddrPort
	sum     Summary
	pvID    uint64
	ev      []event // the pageview being built
	planned int64   // estimated file bytes of every packet planned so far
	free    [][]event
	h       minheap.Heap[*item]
	seq     uint64

	ext  bool          // the extended model (Workload.extended)
	recs []TruthRecord // the pageview's truth, emitted once it is planned
	mem  map[destKey]*rttMemory
}

// Generate writes the workload to w in capture-time order and reports each
// transaction's truth to truth (which may be nil). Deterministic for a Seed.
// Memory is bounded by the number of concurrently open pageviews: each
// pageview's packets are planned when it starts and merged into the output
// through a heap keyed by each stream's next packet time.
func Generate(w *Writer, wl Workload, truth func(TruthRecord)) (Summary, error) {
	began := time.Now()
	wl.defaults()
	g := &gen{w: w, wl: wl, truth: truth,
		rng: rand.New(rand.NewPCG(uint64(wl.Seed), 0x9e3779b97f4a7c15))}
	for i := range wl.Servers {
		g.servers = append(g.servers, netip.AddrPortFrom(serverAddr(i, wl.IPv6), 80))
	}
	think := g.meanThink()
	g.ext = wl.extended()
	for i := range wl.Clients {
		cl := &client{idx: i, addr: clientAddr(i, wl.IPv6), rtt: int64(wl.RTTs[i%len(wl.RTTs)]),
			port: uint16(32768 + g.rng.IntN(20000)), ua: userAgents[i%len(userAgents)]}
		g.seq++
		g.h = append(g.h, &item{t: Base + int64(g.rng.Float64()*float64(think)), seq: g.seq, cl: cl})
		if g.ext {
			g.newClient(cl)
		}
	}
	g.h.Init()
	first := true
	for len(g.h) > 0 {
		it := g.h[0]
		if it.cl != nil {
			if g.stop(it.t) {
				g.h.Pop()
				continue
			}
			var st *stream
			if g.ext {
				st = g.pageviewExt(it.cl, it.t)
			} else {
				st = g.pageview(it.cl, it.t)
			}
			g.push(&item{t: st.ev[0].t, st: st})
			if it.cl.noRef {
				// Short think times after the page (and its after-load
				// fetches) ended, so the next page often finds the
				// connections still open. A browser tab loads one page at
				// a time: without a Referer, overlapping loads could not be
				// told apart by anyone.
				it.t = max(it.t, it.cl.lastEnd) + int64(time.Second) + g.rng.Int64N(int64(3*time.Second))
			} else {
				it.t += max(int64(g.rng.ExpFloat64()*float64(think)), int64(time.Second))
			}
			g.h.Fix(0)
			continue
		}
		if it.pc != nil {
			g.h.Pop()
			if st := g.lazyClose(it); st != nil {
				g.push(&item{t: st.ev[0].t, st: st})
			}
			continue
		}
		st := it.st
		e := &st.ev[st.i]
		if first {
			g.sum.First, first = e.t, false
		}
		g.sum.Last = e.t
		g.apply(e)
		if w.err != nil {
			return g.sum, fmt.Errorf("synth: generating: %w", w.err)
		}
		st.i++
		if st.i < len(st.ev) {
			it.t = st.ev[st.i].t
			g.h.Fix(0)
		} else {
			g.h.Pop()
			g.free = append(g.free, st.ev[:0])
		}
	}
	g.sum.Packets = w.Packets()
	g.sum.Bytes = w.Bytes()
	g.sum.Elapsed = time.Since(began)
	return g.sum, nil
}

// push adds an item to the heap in arrival order for equal times.
func (g *gen) push(it *item) {
	g.seq++
	it.seq = g.seq
	g.h.Push(it)
}

// GenerateFile writes the workload to a new file at path.
func GenerateFile(path string, opts Options, wl Workload) (Summary, error) {
	var sum Summary
	err := WriteFile(path, opts, func(w *Writer) (err error) {
		sum, err = Generate(w, wl, nil)
		return err
	})
	return sum, err
}

// WriteFile creates path, runs script on a Writer over it and closes both,
// returning the first error: the one place tests and tools turn a scripted
// or generated conversation into a capture file.
func WriteFile(path string, opts Options, script func(*Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	w, err := NewWriter(f, opts)
	if err != nil {
		f.Close()
		return err
	}
	err = script(w)
	if cerr := w.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("synth: closing %s: %w", path, cerr)
	}
	return err
}

func (g *gen) meanThink() int64 {
	if g.wl.Duration > 0 {
		return int64(float64(g.wl.Duration) / g.wl.PageviewsPerClient)
	}
	return int64(20 * time.Second)
}

func (g *gen) stop(t int64) bool {
	if g.wl.Duration > 0 && t >= Base+int64(g.wl.Duration) {
		return true
	}
	// Compare the planned size, not what is written: with thousands of
	// pageviews in flight the written size lags by hundreds of MB.
	return g.wl.TargetBytes > 0 && g.planned >= g.wl.TargetBytes
}
