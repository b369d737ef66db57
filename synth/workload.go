package synth

import (
	"cmp"
	"container/heap"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/rtmon/rtmon/capture"
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

type evKind uint8

const (
	evSYN evKind = iota
	evSYNACK
	evACK
	evReq
	evData    // first transmission of a response segment (advances)
	evRetrans // retransmission at rel
	evCAckTo
	evSAck
	evSFIN
	evCFIN
	// Extended model.
	evCLost      // a client packet lost before the capture point
	evReqAt      // client data at rel (any order)
	evSAckTo     // server ACK to rel, SACK blocks in payload
	evCAckSACK   // client ACK to rel, SACK blocks in payload
	evDupRetrans // server retransmission of bytes the client acknowledged
)

type event struct {
	t    int64
	c    *Conn
	kind evKind
	// idOff shifts a client packet's IP ID from the connection's counter:
	// a packet captured out of the order it was sent in keeps the ID it
	// was sent with.
	idOff int8
	// lag (µs) is how long a reordered client packet was held up on its
	// way to the capture point: its timestamps are of its send time.
	lag uint16
	rel uint32
	// payload is the data; for ACKs with SACK blocks the blocks, 8 bytes
	// each (relative left, right), which keeps events small.
	payload []byte
}

type stream struct {
	ev []event
	i  int
}

type client struct {
	idx  int
	addr netip.Addr
	rtt  int64
	port uint16
	ua   string
	npv  int

	// Extended model.
	noRef bool
	// lastEnd: when the client's latest page, after-load fetches
	// included, ended at the client (extended model).
	lastEnd int64
	srv     int      // the one server a no-Referer client browses
	conns   []*pconn // its keep-alive connections (no-Referer clients)
	cookie  string
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

type itemHeap []*item

func (h itemHeap) Len() int { return len(h) }
func (h itemHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].seq < h[j].seq
}
func (h itemHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)   { *h = append(*h, x.(*item)) }
func (h *itemHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
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
	h       itemHeap
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
	heap.Init(&g.h)
	first := true
	for len(g.h) > 0 {
		it := g.h[0]
		if it.cl != nil {
			if g.stop(it.t) {
				heap.Pop(&g.h)
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
			heap.Fix(&g.h, 0)
			continue
		}
		if it.pc != nil {
			heap.Pop(&g.h)
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
			heap.Fix(&g.h, 0)
		} else {
			heap.Pop(&g.h)
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
	heap.Push(&g.h, it)
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

func (g *gen) apply(e *event) {
	c := e.c
	off := uint16(int16(e.idOff))
	c.ClientIPID += off
	c.lag = int64(e.lag) * 1000
	switch e.kind {
	case evSYN:
		c.SYN(e.t)
	case evSYNACK:
		c.SYNACK(e.t)
	case evACK:
		c.ACK(e.t)
	case evReq:
		c.Client(e.t, e.payload)
	case evData:
		c.Server(e.t, e.payload)
	case evRetrans:
		c.ServerAt(e.t, e.rel, e.payload)
	case evCAckTo:
		c.ClientAckTo(e.t, e.rel)
	case evSAck:
		c.ServerAck(e.t)
	case evSFIN:
		c.ServerFIN(e.t)
	case evCFIN:
		c.ClientFIN(e.t)
	case evCLost:
		c.ClientLost()
	case evReqAt:
		c.ClientAt(e.t, e.rel, e.payload)
		if end := e.rel + uint32(len(e.payload)); int32(end-c.cNext) > 0 {
			c.cNext = end // the client's snd_nxt, whatever the capture missed
		}
	case evSAckTo:
		var b [capture.MaxSACKBlocks]capture.SACKBlock
		c.ServerAckToSACK(e.t, e.rel, decodeSACK(e.payload, &b)...)
	case evCAckSACK:
		var b [capture.MaxSACKBlocks]capture.SACKBlock
		c.ClientAckToSACK(e.t, e.rel, decodeSACK(e.payload, &b)...)
	case evDupRetrans:
		c.ServerDupAt(e.t, e.rel, e.payload)
	}
	c.ClientIPID -= off
	c.lag = 0
}

// pconn is a connection being planned: the generator's own view of the
// sequence space, since the Conn only advances when events are written.
type pconn struct {
	c       *Conn
	d       int64 // one-way client delay
	start   int64 // client's first SYN send time
	ready   int64 // handshake complete at the client
	syns    int
	synacks int
	sSYN    int64
	cRel    uint32
	sRel    uint32
	used    bool
	free    int64 // client time it can send the next request
	lastCap int64 // capture time of the last packet planned

	// Extended model.
	srv   netip.AddrPort
	capSA int64 // capture time of the accepted SYN/ACK
	// hsAck is the handshake ACK's capture time while it is unplanned: its
	// loss is decided with the first request, which then completes the
	// handshake at the server.
	hsAck      int64
	crto, srto rtoEst // the client's and the server's retransmission timers
	hadData    bool   // the server has had data: its quickack mode is over
	// restart: the server retransmitted its SYN/ACK more than once, so its
	// first response starts with a window of one segment (Linux
	// tcp_init_transfer, RFC 5681 3.1).
	restart bool
	tail    *tailLoss // the last response's final ACK was lost
	closeAt int64     // planned keep-alive close (no-Referer clients)
	closed  bool
}

func (g *gen) add(t int64, c *Conn, k evKind, rel uint32, p []byte) {
	g.ev = append(g.ev, event{t: t, c: c, kind: k, rel: rel, payload: p})
}

// open plans a handshake started by the client at tc (client clock).
func (g *gen) open(cl *client, srv netip.AddrPort, tc int64) *pconn {
	cl.port++
	if cl.port < 32768 || cl.port > 60999 {
		cl.port = 32768
	}
	c := g.w.Conn(netip.AddrPortFrom(cl.addr, cl.port), srv, g.rng.Uint32(), g.rng.Uint32())
	pc := &pconn{c: c, d: cl.rtt / 2, start: tc, srv: srv}
	g.sum.Connections++
	answered := int64(-1) // send time of the first SYN the server answered
	if g.ext {
		c.Opts.IPID = g.wl.IPID
		c.Opts.ClientRTT = 2 * pc.d
		if g.wl.IPID == IPIDPerConn {
			c.ClientIPID, c.ServerIPID = uint16(g.rng.Uint32()), uint16(g.rng.Uint32())
		}
	}
	for attempt := 0; ; attempt++ {
		last := attempt == len(synGaps)
		capSYN := tc + pc.d
		if attempt == 0 {
			pc.sSYN = capSYN
		} else {
			g.sum.SYNRetrans++
		}
		g.add(capSYN, c, evSYN, 0, nil)
		pc.syns++
		if !last && g.rng.Float64() < g.wl.SYNLossRate {
			tc += int64(synGaps[attempt])
			continue
		}
		capSA := capSYN + int64(synackDelay)
		if answered < 0 {
			answered = tc
		}
		g.add(capSA, c, evSYNACK, 0, nil)
		pc.synacks++
		g.sum.SYNACKs++
		if !last && g.rng.Float64() < g.wl.SYNACKLossRate {
			tc += int64(synGaps[attempt])
			continue
		}
		pc.ready = capSA + pc.d
		pc.lastCap = capSA + 2*pc.d
		pc.restart = pc.synacks > 2
		pc.free = pc.ready
		if g.ext {
			// The client's RTT sample comes from the SYN/ACK's timestamp
			// echo, which names the first SYN the server answered: after
			// a lost SYN/ACK it spans the client's SYN timeout (Linux then
			// starts with an RTO of about 3 s; with a SYN dropped at the
			// server the sample is one round trip).
			pc.capSA, pc.hsAck = capSA, pc.lastCap
			pc.crto.sample(pc.ready-answered, 0, 0)
			if crtt := g.recalled(destKey{cl.addr, srv.Addr()}, pc.ready); crtt > pc.crto.srtt {
				pc.crto.initRTO = crtt + max(2*crtt, int64(minRTO))
			}
			return pc
		}
		g.add(pc.lastCap, c, evACK, 0, nil)
		return pc
	}
}

// exchange plans one request/response on pc, the request sent at pc.free
// (client clock), and returns its truth.
func (g *gen) exchange(pc *pconn, req, head []byte, bodyLen int, srvTime int64) TruthRecord {
	d := pc.d
	rtt := 2 * d
	tReq := pc.free
	capReq := tReq + d
	g.add(capReq, pc.c, evReq, 0, req)
	pc.cRel += uint32(len(req))
	tr := TruthRecord{NewConn: !pc.used, RTT: rtt, RequestBytes: len(req), ServerTime: srvTime,
		ReqFirstCap: capReq, ReqLastCap: capReq, Start: tReq}
	if !pc.used {
		tr.Start, tr.Tconn = pc.start, pc.ready-pc.start
		tr.SYNs, tr.SYNACKs, tr.SYNCap = pc.syns, pc.synacks, pc.sSYN
	}
	pc.used = true
	if srvTime > int64(delAckMax) {
		g.add(capReq+int64(delAckMax), pc.c, evSAck, 0, nil)
	}
	respStart := capReq + srvTime
	g.respond(pc, &tr, -1, head, nil, len(head)+bodyLen, respStart)
	tr.Trequest = 0
	tr.Tserver = (respStart + d) - tReq
	tr.Ttransfer = tr.End - (respStart + d)
	return tr
}

// sendSpan is the time from a response's first segment to its last
// segment's first transmission when slow start begins at cwnd segments and
// nothing is lost: the schedule respond follows.
func sendSpan(nseg, cwnd int, rtt int64) int64 {
	var seg int
	var round int64
	for {
		n := min(cwnd, nseg-seg)
		if seg+n >= nseg {
			return round + int64(n-1)*int64(segGap)
		}
		seg += n
		round = max(round+rtt, round+int64(n)*int64(segGap))
		cwnd *= 2
	}
}

// response is one response respond is planning.
type response struct {
	pc      *pconn
	tr      *TruthRecord
	base    uint32 // the server's relative sequence number of its first byte
	total   int
	nseg    int
	payload func(i int) []byte // segment i's bytes
	arrive  []int64            // each segment's (last copy's) arrival at the client
	// The extended model needs each segment's first transmission, for the
	// server's RTT samples (none from retransmitted data: Karn).
	tx     []int64
	retx   []bool
	lastTx int64 // capture time of the last transmission
}

// respond plans a response of total bytes (head, then body or filler when
// body is nil) whose first byte leaves at respStart, and the client's ACKs;
// it fills tr's response fields and End. rec is tr's index in g.recs
// (extended model: a lost final ACK leaves a tail to resolve).
func (g *gen) respond(pc *pconn, tr *TruthRecord, rec int, head, body []byte, total int, respStart int64) {
	r := &response{pc: pc, tr: tr, base: pc.sRel, total: total, nseg: (total + mss - 1) / mss,
		payload: segmenter(head, body, total)}
	r.arrive = make([]int64, r.nseg)
	if g.ext {
		r.tx, r.retx = make([]int64, r.nseg), make([]bool, r.nseg)
	}
	g.sendResponse(r, respStart)
	a := g.ackResponse(r)
	pc.sRel += uint32(total)
	pc.free = a.end
	pc.lastCap = max(a.ackCap, r.lastTx, a.lastClient)
	if g.ext && a.ackCap == 0 {
		// The ACK of the last byte was lost: the server's timers run from
		// its last transmission or the last ACK it had.
		pc.tail = &tailLoss{rec: rec, base: r.base, total: total, nseg: r.nseg, acked: a.srvAcked,
			t0: max(r.lastTx, a.lastAck), payload: r.payload}
	}
	tr.ResponseBytes, tr.BodyBytes = total, total-len(head)
	tr.RespFirstCap, tr.RespLastCap, tr.AckCap = respStart, r.lastTx, a.ackCap
	tr.End = a.end
}

// segmenter returns the bytes of a response's segment i: head then body,
// or head then filler when body is nil.
func segmenter(head, body []byte, total int) func(i int) []byte {
	var wire []byte
	if body != nil {
		wire = append(append(make([]byte, 0, total), head...), body...)
	}
	return func(i int) []byte {
		off, end := i*mss, min((i+1)*mss, total)
		if wire != nil {
			return wire[off:end]
		}
		if off >= len(head) {
			return filler[off-len(head) : end-len(head)]
		}
		p := make([]byte, 0, end-off)
		p = append(p, head[off:min(end, len(head))]...)
		if end > len(head) {
			p = append(p, filler[:end-len(head)]...)
		}
		return p
	}
}

// sendResponse plans the server's segments in slow start from respStart,
// with their losses after the capture point and retransmissions.
func (g *gen) sendResponse(r *response, respStart int64) {
	pc, tr, nseg := r.pc, r.tr, r.nseg
	rtt := 2 * pc.d
	r.lastTx = respStart
	cwnd, seg, round := initCwnd, 0, respStart
	if pc.restart {
		pc.restart, cwnd = false, 1
		tr.WindowRestart = sendSpan(nseg, 1, rtt) - sendSpan(nseg, initCwnd, rtt)
	}
	for seg < nseg {
		n := min(cwnd, nseg-seg)
		for i := range n {
			s := seg + i
			t := round + int64(i)*int64(segGap)
			p := r.payload(s)
			g.add(t, pc.c, evData, r.base+uint32(s*mss), p)
			final := t
			if g.rng.Float64() < g.wl.DataLossRate {
				// Lost after the capture point: fast retransmit when the
				// dupACKs of later segments arrive, else an RTO.
				if s < nseg-1 {
					final = t + rtt + int64(segGap)
				} else {
					final = t + max(rtt+int64(minRTO), 2*rtt)
				}
				g.add(final, pc.c, evRetrans, r.base+uint32(s*mss), p)
				g.sum.DataRetrans++
				tr.RetransBytes += len(p)
			}
			if r.tx != nil {
				r.tx[s], r.retx[s] = t, final != t
			}
			r.arrive[s] = final + pc.d
			r.lastTx = max(r.lastTx, final)
		}
		seg += n
		round = max(round+rtt, round+int64(n)*int64(segGap))
		cwnd *= 2
	}
}

// responseAcks is what the client's ACKs of a response came to.
type responseAcks struct {
	end        int64 // the last segment's arrival at the client
	ackCap     int64 // capture time of the ACK of the last byte (0: lost)
	lastClient int64 // capture time of the client's last ACK (extended model)
	// The server's view in the extended model: segments it has seen
	// acknowledged, and when it last saw them advance.
	srvAcked int
	lastAck  int64
}

// ackResponse plans the client's ACKs: every second in-order segment,
// immediately on a hole (dupACK) and when a hole is filled; always for the
// last byte.
func (g *gen) ackResponse(r *response) responseAcks {
	pc, nseg := r.pc, r.nseg
	order := make([]int, nseg)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(r.arrive[a], r.arrive[b]) })
	got := make([]bool, nseg)
	cum, cnt := 0, 0
	var a responseAcks
	sent, maxGot := 0, -1 // the server's sent segments by an ACK's time; the highest segment the client has
	for _, s := range order {
		got[s] = true
		hole := s != cum
		before := cum
		for cum < nseg && got[cum] {
			cum++
		}
		cnt++
		a.end = max(a.end, r.arrive[s])
		if !hole && cum-before <= 1 && cnt%2 != 0 && cum != nseg {
			if g.ext {
				maxGot = max(maxGot, s)
			}
			continue
		}
		ackRel := r.base + uint32(min(cum*mss, r.total))
		t := r.arrive[s] + pc.d
		if !g.ext {
			g.add(t, pc.c, evCAckTo, ackRel, nil)
			if cum == nseg && a.ackCap == 0 {
				a.ackCap = t
			}
			continue
		}
		maxGot = max(maxGot, s)
		a.lastClient = t
		switch {
		case maxGot >= cum:
			// Data above a hole: a dupACK with SACK blocks, never lost
			// here (the fast retransmits above assume it arrives).
			g.add(t, pc.c, evCAckSACK, ackRel, sackOf(nseg, func(i int) bool { return got[i] }, cum, s, r.base, r.total))
		case g.wl.AckLossRate > 0 && g.rng.Float64() < g.wl.AckLossRate:
			g.add(t, pc.c, evCLost, 0, nil)
			r.tr.LostACKs++
			g.sum.LostACKs++
			continue
		default:
			g.add(t, pc.c, evCAckTo, ackRel, nil)
		}
		if cum == nseg && a.ackCap == 0 {
			a.ackCap = t
		}
		if cum > a.srvAcked {
			for sent < nseg && r.tx[sent] <= t {
				sent++
			}
			if !slices.Contains(r.retx[a.srvAcked:cum], true) {
				pc.srto.sample(t-r.tx[a.srvAcked], ackRel, r.base+uint32(min(sent*mss, r.total)))
			}
			a.srvAcked, a.lastAck = cum, t
		}
	}
	return a
}

// close plans the server's keep-alive timeout close and the client's answer.
func (g *gen) close(pc *pconn) {
	t := pc.lastCap + int64(keepAlive)
	g.add(t, pc.c, evSFIN, 0, nil)
	g.add(t+2*pc.d, pc.c, evCFIN, 0, nil)
	g.add(t+2*pc.d+int64(synackDelay), pc.c, evSAck, 0, nil)
	if g.ext {
		// That ACK reaches the client one way later: it stores its RTT.
		g.remember(destKey{pc.c.ClientAddr.Addr(), pc.srv.Addr()}, t+3*pc.d+int64(synackDelay), pc.crto.srtt)
	}
}

var userAgents = []string{
	"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
}

type object struct {
	url, ctype string
	size       int
	dest       dest
}

func (g *gen) uniform(r [2]time.Duration) int64 {
	if r[1] <= r[0] {
		return int64(r[0])
	}
	return int64(r[0]) + g.rng.Int64N(int64(r[1]-r[0]))
}

// pageview plans one page load by cl starting at tc (client clock) and emits
// its truth records.
func (g *gen) pageview(cl *client, tc int64) *stream {
	g.pvID++
	g.sum.Pageviews++
	cl.npv++
	g.takeEv()
	si := g.rng.IntN(len(g.servers))
	srv := g.servers[si]
	host := "www" + strconv.Itoa(si+1) + ".example.com"
	page := "/site/" + strconv.Itoa(g.rng.IntN(500)) + "/index.html"
	referer := "http://" + host + page
	emit := func(tr TruthRecord, o object, container bool, method string) {
		tr.PageviewID, tr.Container = g.pvID, container
		tr.Method, tr.Host, tr.URL, tr.Status, tr.ContentType = method, host, o.url, 200, o.ctype
		tr.UserAgent = cl.ua
		if !container {
			tr.Referer = referer
		}
		g.sum.Transactions++
		if g.truth != nil {
			g.truth(tr)
		}
	}

	c0 := g.open(cl, srv, tc)
	htmlSize := 4000 + g.rng.IntN(76000)
	req := Request("GET", host, page, "User-Agent: "+cl.ua,
		"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
		"Accept-Encoding: gzip, deflate", "Connection: keep-alive")
	head := ResponseHeader(200, "text/html; charset=utf-8", htmlSize, "Server: synth", "Connection: keep-alive")
	tr := g.exchange(c0, req, head, htmlSize, g.uniform(g.wl.ContainerTime))
	tr.Client, tr.Server = c0.c.ClientAddr, srv
	emit(tr, object{url: page, ctype: "text/html; charset=utf-8", size: htmlSize}, true, "GET")

	nobj := g.wl.ObjectsPerPage[0] + g.rng.IntN(g.wl.ObjectsPerPage[1]-g.wl.ObjectsPerPage[0]+1)
	conns := []*pconn{c0}
	if nobj > 0 {
		tp := c0.free + int64(parseDelay)
		c0.free = tp
		for range min(nobj, g.wl.ConnsPerClient) - 1 {
			conns = append(conns, g.open(cl, srv, tp))
		}
	}
	for k := range nobj {
		o := g.object(k)
		pc := conns[0]
		for _, x := range conns[1:] {
			if x.free < pc.free {
				pc = x
			}
		}
		req := Request("GET", host, o.url, "User-Agent: "+cl.ua, "Accept: */*",
			"Referer: "+referer, "Accept-Encoding: gzip, deflate", "Connection: keep-alive")
		head := ResponseHeader(200, o.ctype, o.size, "Server: synth", "Cache-Control: max-age=3600", "Connection: keep-alive")
		tr := g.exchange(pc, req, head, o.size, g.uniform(g.wl.ServerTime))
		tr.Client, tr.Server = pc.c.ClientAddr, srv
		emit(tr, o, false, "GET")
	}
	for _, pc := range conns {
		g.close(pc)
	}
	return g.seal()
}

// takeEv starts planning a new stream in a recycled event slice.
func (g *gen) takeEv() {
	if n := len(g.free); n > 0 {
		g.ev, g.free = g.free[n-1], g.free[:n-1]
	} else {
		g.ev = nil
	}
}

// seal orders the planned events into a stream and counts their bytes.
func (g *gen) seal() *stream {
	slices.SortStableFunc(g.ev, func(a, b event) int { return cmp.Compare(a.t, b.t) })
	// Per-packet overhead: record header, link, IP and TCP headers with
	// timestamps; close enough for TargetBytes.
	per := int64(16 + 14 + 20 + 32)
	if g.wl.IPv6 {
		per += 20
	}
	for i := range g.ev {
		if g.ev[i].kind != evCLost {
			g.planned += per + int64(len(g.ev[i].payload))
		}
	}
	return &stream{ev: g.ev}
}

func (g *gen) object(k int) object {
	n := strconv.Itoa(k)
	switch r := g.rng.IntN(10); {
	case r < 2:
		return object{url: "/static/app" + n + ".js", ctype: "application/javascript", size: 2000 + g.rng.IntN(58000), dest: destScript}
	case r < 3:
		return object{url: "/static/style" + n + ".css", ctype: "text/css", size: 2000 + g.rng.IntN(38000), dest: destStyle}
	case r < 9:
		if r&1 == 0 {
			return object{url: "/img/photo" + n + ".jpg", ctype: "image/jpeg", size: 1000 + g.rng.IntN(119000), dest: destImage}
		}
		return object{url: "/img/icon" + n + ".png", ctype: "image/png", size: 500 + g.rng.IntN(20000), dest: destImage}
	default:
		// The large images the REWRITE EMBEDS what-if is about.
		return object{url: "/img/hero" + n + ".jpg", ctype: "image/jpeg", size: 240000 + g.rng.IntN(30000), dest: destImage}
	}
}

// clientAddr spreads clients over the documentation ranges while they fit
// (198.51.100.0/24 then 203.0.113.0/24 from .101), else over the benchmark
// range 198.18.0.0/15.
func clientAddr(i int, v6 bool) netip.Addr {
	if v6 {
		j := i + 1
		return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 13: byte(j >> 16), 14: byte(j >> 8), 15: byte(j)})
	}
	switch {
	case i < 254:
		return netip.AddrFrom4([4]byte{198, 51, 100, byte(i + 1)})
	case i < 254+150:
		return netip.AddrFrom4([4]byte{203, 0, 113, byte(i - 254 + 101)})
	}
	j := i - 404 + 1
	return netip.AddrFrom4([4]byte{198, 18 + byte(j>>16&1), byte(j >> 8), byte(j)})
}

// serverAddr uses 203.0.113.1-100 (at most 100 servers).
func serverAddr(i int, v6 bool) netip.Addr {
	if v6 {
		return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 2, 15: byte(i + 1)})
	}
	return netip.AddrFrom4([4]byte{203, 0, 113, byte(i%100 + 1)})
}
