package synth

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"time"
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
//     i.e. max over segments of (last transmission's capture time + RTT/2).
//   - Tconn = handshake-complete at the client (the accepted SYN/ACK's capture
//     time + RTT/2) - first SYN send; SYN-loss gaps included; 0 when reused.
//   - Trequest = last request byte sent - first sent (0: one segment).
//   - Tserver = first response byte at the client - last request byte sent
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
	RetransBytes  int   // response bytes retransmitted
	ServerTime    int64 // server processing: request captured -> first response byte sent

	// Client-perceived, ns since the epoch / ns.
	Start, End                          int64
	Tconn, Trequest, Tserver, Ttransfer int64

	// Capture-side times (what rtmon can see).
	SYNCap       int64 // first SYN (NewConn only)
	ReqFirstCap  int64
	ReqLastCap   int64
	RespFirstCap int64
	RespLastCap  int64 // last transmission of any response byte
	AckCap       int64 // client ACK covering the last response byte
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
)

type event struct {
	t       int64
	c       *Conn
	kind    evKind
	rel     uint32
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
}

type item struct {
	t   int64
	seq uint64
	cl  *client
	st  *stream
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
	var h itemHeap
	var seq uint64
	for i := range wl.Clients {
		cl := &client{idx: i, addr: clientAddr(i, wl.IPv6), rtt: int64(wl.RTTs[i%len(wl.RTTs)]),
			port: uint16(32768 + g.rng.IntN(20000)), ua: userAgents[i%len(userAgents)]}
		seq++
		h = append(h, &item{t: Base + int64(g.rng.Float64()*float64(think)), seq: seq, cl: cl})
	}
	heap.Init(&h)
	first := true
	for len(h) > 0 {
		it := h[0]
		if it.cl != nil {
			if g.stop(it.t) {
				heap.Pop(&h)
				continue
			}
			st := g.pageview(it.cl, it.t)
			seq++
			heap.Push(&h, &item{t: st.ev[0].t, seq: seq, st: st})
			it.t += max(int64(g.rng.ExpFloat64()*float64(think)), int64(time.Second))
			heap.Fix(&h, 0)
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
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
			g.free = append(g.free, st.ev[:0])
		}
	}
	g.sum.Packets = w.Packets()
	g.sum.Bytes = w.Bytes()
	g.sum.Elapsed = time.Since(began)
	return g.sum, nil
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
	}
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
	pc := &pconn{c: c, d: cl.rtt / 2, start: tc}
	g.sum.Connections++
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
		g.add(capSA, c, evSYNACK, 0, nil)
		pc.synacks++
		g.sum.SYNACKs++
		if !last && g.rng.Float64() < g.wl.SYNACKLossRate {
			tc += int64(synGaps[attempt])
			continue
		}
		pc.ready = capSA + pc.d
		pc.lastCap = capSA + 2*pc.d
		g.add(pc.lastCap, c, evACK, 0, nil)
		pc.free = pc.ready
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
	total := len(head) + bodyLen
	nseg := (total + mss - 1) / mss
	base := pc.sRel
	respStart := capReq + srvTime
	arrive := make([]int64, nseg)
	payload := func(i int) []byte {
		off, end := i*mss, min((i+1)*mss, total)
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
	lastTx := respStart
	cwnd, seg, round := initCwnd, 0, respStart
	for seg < nseg {
		n := min(cwnd, nseg-seg)
		for i := range n {
			s := seg + i
			tx := round + int64(i)*int64(segGap)
			p := payload(s)
			g.add(tx, pc.c, evData, base+uint32(s*mss), p)
			final := tx
			if g.rng.Float64() < g.wl.DataLossRate {
				// Lost after the capture point: fast retransmit when the
				// dupACKs of later segments arrive, else an RTO.
				if s < nseg-1 {
					final = tx + rtt + int64(segGap)
				} else {
					final = tx + max(rtt+int64(minRTO), 2*rtt)
				}
				g.add(final, pc.c, evRetrans, base+uint32(s*mss), p)
				g.sum.DataRetrans++
				tr.RetransBytes += len(p)
			}
			arrive[s] = final + d
			lastTx = max(lastTx, final)
		}
		seg += n
		round = max(round+rtt, round+int64(n)*int64(segGap))
		cwnd *= 2
	}
	// Client ACKs: every second in-order segment, immediately on a hole
	// (dupACK) and when a hole is filled; always for the last byte.
	order := make([]int, nseg)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmpInt64(arrive[a], arrive[b]) })
	got := make([]bool, nseg)
	cum, cnt := 0, 0
	var end, ackCap int64
	for _, s := range order {
		got[s] = true
		hole := s != cum
		before := cum
		for cum < nseg && got[cum] {
			cum++
		}
		cnt++
		if hole || cum-before > 1 || cnt%2 == 0 || cum == nseg {
			ackRel := base + uint32(min(cum*mss, total))
			t := arrive[s] + d
			g.add(t, pc.c, evCAckTo, ackRel, nil)
			if cum == nseg && ackCap == 0 {
				ackCap = t
			}
		}
		end = max(end, arrive[s])
	}
	pc.sRel += uint32(total)
	pc.free = end
	pc.lastCap = max(ackCap, lastTx)
	tr.ResponseBytes, tr.BodyBytes = total, bodyLen
	tr.RespFirstCap, tr.RespLastCap, tr.AckCap = respStart, lastTx, ackCap
	tr.End = end
	tr.Trequest = 0
	tr.Tserver = (respStart + d) - tReq
	tr.Ttransfer = end - (respStart + d)
	return tr
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// close plans the server's keep-alive timeout close and the client's answer.
func (g *gen) close(pc *pconn) {
	t := pc.lastCap + int64(keepAlive)
	g.add(t, pc.c, evSFIN, 0, nil)
	g.add(t+2*pc.d, pc.c, evCFIN, 0, nil)
	g.add(t+2*pc.d+int64(synackDelay), pc.c, evSAck, 0, nil)
}

var userAgents = []string{
	"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
}

type object struct {
	url, ctype string
	size       int
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
	if n := len(g.free); n > 0 {
		g.ev, g.free = g.free[n-1], g.free[:n-1]
	} else {
		g.ev = nil
	}
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
	slices.SortStableFunc(g.ev, func(a, b event) int { return cmpInt64(a.t, b.t) })
	// Per-packet overhead: record header, link, IP and TCP headers with
	// timestamps; close enough for TargetBytes.
	per := int64(16 + 14 + 20 + 32)
	if g.wl.IPv6 {
		per += 20
	}
	for i := range g.ev {
		g.planned += per + int64(len(g.ev[i].payload))
	}
	return &stream{ev: g.ev}
}

func (g *gen) object(k int) object {
	n := strconv.Itoa(k)
	switch r := g.rng.IntN(10); {
	case r < 2:
		return object{url: "/static/app" + n + ".js", ctype: "application/javascript", size: 2000 + g.rng.IntN(58000)}
	case r < 3:
		return object{url: "/static/style" + n + ".css", ctype: "text/css", size: 2000 + g.rng.IntN(38000)}
	case r < 9:
		if r&1 == 0 {
			return object{url: "/img/photo" + n + ".jpg", ctype: "image/jpeg", size: 1000 + g.rng.IntN(119000)}
		}
		return object{url: "/img/icon" + n + ".png", ctype: "image/png", size: 500 + g.rng.IntN(20000)}
	default:
		// The large images the REWRITE EMBEDS what-if is about.
		return object{url: "/img/hero" + n + ".jpg", ctype: "image/jpeg", size: 240000 + g.rng.IntN(30000)}
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
