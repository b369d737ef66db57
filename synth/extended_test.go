package synth

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/binary"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/rtmon/rtmon/capture"
)

// extWorkload turns every extended option on, with losses frequent enough
// that each case occurs in 30 s of a dozen browsers.
func extWorkload() Workload {
	return Workload{Seed: 5, Clients: 16, Servers: 2, Duration: 30 * time.Second, ConnsPerClient: 4,
		SYNLossRate: 0.05, SYNACKLossRate: 0.05, DataLossRate: 0.01,
		IPID: IPIDPerConn, AckLossRate: 0.08, UpstreamLossRate: 0.08, ReorderRate: 0.3,
		RequestBodies: [2]int{300, 9000}, HTML: true, GzipRate: 0.6, AfterLoad: true,
		NoRefererRate: 0.4, Redirects: 0.3}
}

// xpkt is one fully decoded packet.
type xpkt struct {
	ts           int64
	src, dst     netip.AddrPort
	ipid         uint16
	seq, ack     uint32
	syn, fin     bool
	tsval, tsecr uint32
	sack         []capture.SACKBlock
	payload      []byte
}

func decodeFull(t *testing.T, raw []byte) []xpkt {
	t.Helper()
	r, err := pcapgo.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var out []xpkt
	for {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		tcp, _ := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if ip == nil || tcp == nil {
			t.Fatalf("packet %d is not TCP/IPv4", len(out))
		}
		src, _ := netip.AddrFromSlice(ip.SrcIP)
		dst, _ := netip.AddrFromSlice(ip.DstIP)
		x := xpkt{ts: ci.Timestamp.UnixNano(), src: netip.AddrPortFrom(src, uint16(tcp.SrcPort)),
			dst: netip.AddrPortFrom(dst, uint16(tcp.DstPort)), ipid: ip.Id, seq: tcp.Seq, ack: tcp.Ack,
			syn: tcp.SYN, fin: tcp.FIN, payload: tcp.Payload}
		for _, o := range tcp.Options {
			switch o.OptionType {
			case layers.TCPOptionKindTimestamps:
				x.tsval, x.tsecr = binary.BigEndian.Uint32(o.OptionData), binary.BigEndian.Uint32(o.OptionData[4:])
			case layers.TCPOptionKindSACK:
				for d := o.OptionData; len(d) >= 8; d = d[8:] {
					x.sack = append(x.sack, capture.SACKBlock{Left: binary.BigEndian.Uint32(d), Right: binary.BigEndian.Uint32(d[4:])})
				}
			}
		}
		out = append(out, x)
	}
}

// xconn is one connection of the capture with its HTTP exchanges.
type xconn struct {
	client       netip.AddrPort
	cISN, sISN   uint32
	pkts         []xpkt // in capture order, both directions
	reqs         []xreq
	cStream      []byte
	sStream      []byte
	truth        []TruthRecord // by ReqFirstCap
	declaredLost int           // client packets the truth says were lost
}

// xreq is one request/response pair as parsed from the reassembled streams.
type xreq struct {
	req          *http.Request
	reqOff, reqN int // client stream offset and length
	resp         *http.Response
	respOff      int
	respN        int
	payload      []byte // body after dechunking, before content decoding
}

func (c *xconn) toServer(p xpkt) bool { return p.src == c.client }

// relC and relS are stream offsets of client and server sequence numbers.
func (c *xconn) relC(seq uint32) int { return int(seq - c.cISN - 1) }
func (c *xconn) relS(seq uint32) int { return int(seq - c.sISN - 1) }

// connections splits a capture into connections, reassembles both byte
// streams (retransmissions overwrite with the same bytes) and parses them.
func connections(t *testing.T, pkts []xpkt) map[netip.AddrPort]*xconn {
	t.Helper()
	conns := map[netip.AddrPort]*xconn{}
	for _, p := range pkts {
		client := p.src
		if p.src.Port() == 80 {
			client = p.dst
		}
		c := conns[client]
		if c == nil {
			c = &xconn{client: client}
			conns[client] = c
		}
		if p.syn && p.src == client {
			c.cISN = p.seq
		} else if p.syn {
			c.sISN = p.seq
		}
		c.pkts = append(c.pkts, p)
	}
	for _, c := range conns {
		for _, p := range c.pkts {
			if len(p.payload) == 0 {
				continue
			}
			s, off := &c.sStream, c.relS(p.seq)
			if c.toServer(p) {
				s, off = &c.cStream, c.relC(p.seq)
			}
			if end := off + len(p.payload); end > len(*s) {
				*s = append(*s, make([]byte, end-len(*s))...)
			}
			copy((*s)[off:], p.payload)
		}
		c.parse(t)
	}
	return conns
}

// countReader counts what a bufio.Reader took from it.
type countReader struct {
	r io.Reader
	n int
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func (c *xconn) parse(t *testing.T) {
	t.Helper()
	cr := &countReader{r: bytes.NewReader(c.cStream)}
	br := bufio.NewReader(cr)
	sr := &countReader{r: bytes.NewReader(c.sStream)}
	bs := bufio.NewReader(sr)
	for {
		off := cr.n - br.Buffered()
		req, err := http.ReadRequest(br)
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("%v: request at %d: %v", c.client, off, err)
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			t.Fatalf("%v: request body: %v", c.client, err)
		}
		x := xreq{req: req, reqOff: off, reqN: cr.n - br.Buffered() - off}
		x.respOff = sr.n - bs.Buffered()
		resp, err := http.ReadResponse(bs, req)
		if err != nil {
			t.Fatalf("%v: response to %s: %v", c.client, req.URL, err)
		}
		if x.payload, err = io.ReadAll(resp.Body); err != nil {
			t.Fatalf("%v: response body of %s: %v", c.client, req.URL, err)
		}
		x.resp, x.respN = resp, sr.n-bs.Buffered()-x.respOff
		c.reqs = append(c.reqs, x)
	}
}

func TestExtendedDeterministic(t *testing.T) {
	wl := extWorkload()
	wl.Clients, wl.Duration = 6, 15*time.Second
	a, ta, sa := generate(t, Options{Nanosecond: true}, wl)
	b, tb, sb := generate(t, Options{Nanosecond: true}, wl)
	sa.Elapsed, sb.Elapsed = 0, 0
	if !bytes.Equal(a, b) || !reflect.DeepEqual(ta, tb) || sa != sb {
		t.Fatal("same seed gave different output")
	}
	wl.Seed++
	if c, _, _ := generate(t, Options{Nanosecond: true}, wl); bytes.Equal(a, c) {
		t.Fatal("different seeds gave the same file")
	}
	// IPv6 has no IP IDs; the rest of the model holds.
	wl.IPv6 = true
	_, truth, _ := generate(t, Options{Nanosecond: true}, wl)
	for _, r := range truth {
		if r.Tconn+r.Trequest+r.Tserver+r.Ttransfer != r.End-r.Start || r.Tconn < 0 || r.Trequest < 0 || r.Tserver < 0 || r.Ttransfer < 0 {
			t.Fatalf("IPv6: %+v", r)
		}
	}
}

// TestExtendedTruthMatchesCapture generates 30 s of browsers with every
// extended option on and checks each truth record against the packets.
func TestExtendedTruthMatchesCapture(t *testing.T) {
	raw, truth, sum := generate(t, Options{Nanosecond: true}, extWorkload())
	pkts := decodeFull(t, raw)
	if int64(len(pkts)) != sum.Packets || len(truth) != sum.Transactions {
		t.Fatalf("summary %+v, %d packets, %d truth records", sum, len(pkts), len(truth))
	}
	for i, p := range pkts {
		if i > 0 && p.ts < pkts[i-1].ts {
			t.Fatalf("packet %d goes back in time", i)
		}
	}
	conns := connections(t, pkts)
	for _, r := range truth {
		c := conns[r.Client]
		if c == nil {
			t.Fatalf("no connection for %v", r.Client)
		}
		c.truth = append(c.truth, r)
		c.declaredLost += r.UpstreamLost + r.LostACKs
		if r.HandshakeACKLost {
			c.declaredLost++
		}
	}
	var n counts
	for _, c := range conns {
		slices.SortFunc(c.truth, func(a, b TruthRecord) int { return cmp.Compare(a.ReqFirstCap, b.ReqFirstCap) })
		if len(c.truth) != len(c.reqs) {
			t.Errorf("%v: %d requests in the capture, %d truth records", c.client, len(c.reqs), len(c.truth))
			continue
		}
		checkIPIDs(t, c)
		for i := range c.truth {
			checkTransaction(t, c, i, &n)
		}
	}
	checkPages(t, conns, truth, &n)
	// Every case the options make must have occurred.
	for name, v := range map[string]int{"spurious": n.spurious, "D-SACK answers": n.dsack, "upstream loss": n.upLost,
		"reordered": n.reordered, "handshake ACK lost": n.hsLost, "gzip": n.gzip, "chunked": n.chunked,
		"redirects": n.redirects, "after-load": n.afterLoad, "reused across pageviews": n.reused,
		"POST containers": n.posts, "multi-segment GETs": n.bigGets,
		"echo of a probe": n.echoProbe} {
		if v == 0 {
			t.Errorf("no %s in the workload; the test proves nothing about it", name)
		}
	}
	t.Logf("%+v", n)
}

type counts struct {
	spurious, dsack, upLost, reordered, hsLost, gzip, chunked, redirects, afterLoad int
	reused, posts, bigGets, preconnected, echoProbe, echoOld                        int
}

// checkIPIDs: Linux numbers each side's packets per connection. The client's
// IDs, from its SYN's, are all distinct and miss exactly the declared
// losses; they go back only for a reordered segment. The server's start at
// its first packet after a SYN/ACK with ID 0 and have no gaps.
func checkIPIDs(t *testing.T, c *xconn) {
	t.Helper()
	var cIDs []int
	var first uint16
	var sLast uint16
	sSeen := false
	for i, p := range c.pkts {
		if !c.toServer(p) {
			switch {
			case p.syn:
				if p.ipid != 0 {
					t.Errorf("%v: SYN/ACK with IP ID %d", c.client, p.ipid)
				}
			case sSeen && p.ipid != sLast+1:
				t.Errorf("%v: server IP ID %d after %d", c.client, p.ipid, sLast)
			}
			if !p.syn {
				sLast, sSeen = p.ipid, true
			}
			continue
		}
		if i == 0 {
			first = p.ipid
		}
		cIDs = append(cIDs, int(p.ipid-first))
	}
	sorted := slices.Clone(cIDs)
	slices.Sort(sorted)
	if len(slices.Compact(slices.Clone(sorted))) != len(sorted) || sorted[0] != 0 {
		t.Errorf("%v: client IP IDs repeat or start below the SYN: %v", c.client, cIDs)
		return
	}
	if missing := sorted[len(sorted)-1] + 1 - len(sorted); missing != c.declaredLost {
		t.Errorf("%v: %d client IP IDs missing, truth declares %d lost packets", c.client, missing, c.declaredLost)
	}
	back := 0
	for i := 1; i < len(cIDs); i++ {
		if cIDs[i] < cIDs[i-1] {
			back++
		}
	}
	reordered := 0
	for _, r := range c.truth {
		if r.Reordered {
			reordered++
		}
	}
	if back != reordered {
		t.Errorf("%v: client IP IDs go back %d times, %d reordered requests", c.client, back, reordered)
	}
}

// checkTransaction compares c.truth[i] with the i-th exchange on c.
func checkTransaction(t *testing.T, c *xconn, i int, n *counts) {
	t.Helper()
	r, x := c.truth[i], c.reqs[i]
	half := r.RTT / 2
	id := r.Client.String() + " " + r.URL
	if got := r.Tconn + r.Trequest + r.Tserver + r.Ttransfer; got != r.End-r.Start ||
		r.Tconn < 0 || r.Trequest < 0 || r.Tserver < 0 || r.Ttransfer < 0 || r.End < r.Start {
		t.Errorf("%s: components %d %d %d %d, span %d", id, r.Tconn, r.Trequest, r.Tserver, r.Ttransfer, r.End-r.Start)
	}
	if r.Tserver != r.ServerTime+r.RTT || r.RespFirstCap != r.ReqLastCap+r.ServerTime ||
		r.Trequest != r.ReqLastCap-half-(r.Start+r.Tconn) {
		t.Errorf("%s: timing model broken: %+v", id, r)
	}
	if r.SpuriousRetrans != (r.End < r.RespLastCap+half) || !r.SpuriousRetrans && r.End != r.RespLastCap+half {
		t.Errorf("%s: End %d, last transmission %d + %d, spurious %v", id, r.End, r.RespLastCap, half, r.SpuriousRetrans)
	}
	// HTTP fields and sizes, from the reassembled streams.
	if x.req.Method != r.Method || x.req.RequestURI != r.URL || x.req.Host != r.Host || x.req.Referer() != r.Referer ||
		x.req.UserAgent() != r.UserAgent || x.resp.StatusCode != r.Status || x.resp.Header.Get("Content-Type") != r.ContentType {
		t.Errorf("%s: capture has %s %s %q %q, status %d %q; truth %+v", id, x.req.Method, x.req.RequestURI, x.req.Host,
			x.req.Referer(), x.resp.StatusCode, x.resp.Header.Get("Content-Type"), r)
	}
	if x.reqN != r.RequestBytes || x.respN != r.ResponseBytes || len(x.payload) != r.BodyBytes {
		t.Errorf("%s: capture has %d request bytes, %d response bytes, %d body bytes; truth %d %d %d",
			id, x.reqN, x.respN, len(x.payload), r.RequestBytes, r.ResponseBytes, r.BodyBytes)
	}
	checkHeaders(t, id, x.req, r)
	if x.req.Method == "GET" && x.reqN > mss {
		n.bigGets++
	}
	if r.Preconnected {
		n.preconnected++
	}
	checkRequestPackets(t, c, r, x, n)
	checkResponsePackets(t, c, r, x, n)
	if x.resp.Header.Get("Content-Encoding") == "gzip" {
		n.gzip++
		if len(x.resp.TransferEncoding) > 0 {
			n.chunked++
		}
	}
}

// checkHeaders: navigation and subresource headers as browsers send them.
func checkHeaders(t *testing.T, id string, req *http.Request, r TruthRecord) {
	t.Helper()
	accept := req.Header.Get("Accept")
	chromeLike := !strings.Contains(r.UserAgent, "Version/17") // Safari sends no Sec-Fetch-*
	wantDest := ""
	switch {
	case r.Container || r.Redirect:
		if !strings.HasPrefix(accept, "text/html,") {
			t.Errorf("%s: navigation Accept %q", id, accept)
		}
		wantDest = "document"
		if chromeLike && req.Header.Get("Sec-Fetch-Mode") != "navigate" {
			t.Errorf("%s: navigation without Sec-Fetch-Mode: navigate", id)
		}
	case r.URL == "/favicon.ico":
		if accept != "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8" || !r.AfterLoad {
			t.Errorf("%s: favicon Accept %q, after-load %v", id, accept, r.AfterLoad)
		}
		wantDest = "image"
	case r.URL == "/beacon":
		if accept != "*/*" || r.Method != "POST" || r.Status != 204 || r.BodyBytes != 0 || !r.AfterLoad {
			t.Errorf("%s: beacon %+v Accept %q", id, r, accept)
		}
		wantDest = "empty"
	case strings.HasSuffix(r.URL, ".css"):
		if accept != "text/css,*/*;q=0.1" {
			t.Errorf("%s: stylesheet Accept %q", id, accept)
		}
		wantDest = "style"
	case strings.HasSuffix(r.URL, ".js"):
		if accept != "*/*" {
			t.Errorf("%s: script Accept %q", id, accept)
		}
		wantDest = "script"
	default:
		if !strings.HasPrefix(accept, "image/") {
			t.Errorf("%s: image Accept %q", id, accept)
		}
		wantDest = "image"
	}
	if got := req.Header.Get("Sec-Fetch-Dest"); chromeLike && got != wantDest || !chromeLike && got != "" {
		t.Errorf("%s: Sec-Fetch-Dest %q, want %q", id, got, wantDest)
	}
	if r.Container && r.Method == "POST" && (req.ContentLength <= 0 || req.Header.Get("Content-Type") != "application/x-www-form-urlencoded") {
		t.Errorf("%s: form POST without its body", id)
	}
}

// checkRequestPackets: the request's first and completing packets, its
// losses (IP ID gaps), reordering, and a lost handshake ACK.
func checkRequestPackets(t *testing.T, c *xconn, r TruthRecord, x xreq, n *counts) {
	t.Helper()
	id := r.Client.String() + " " + r.URL
	half := r.RTT / 2
	from, to := x.reqOff, x.reqOff+x.reqN
	have := make([]bool, x.reqN)
	held, doneAt, firstAt := 0, int64(0), int64(0)
	var reqPkts []int // indices in c.pkts
	// The request's first copy, lost or not, was sent at Start+Tconn and
	// would have been captured half a round trip later; IDs taken from the
	// client packet before then to the request's last show lost copies.
	sentCap := r.Start + r.Tconn + half
	prev := -1
	for i, p := range c.pkts {
		if !c.toServer(p) {
			continue
		}
		off := c.relC(p.seq)
		if len(p.payload) == 0 || off < from || off >= to {
			if p.ts < sentCap {
				prev = i
			}
			continue
		}
		reqPkts = append(reqPkts, i)
		if off == from && firstAt == 0 {
			firstAt = p.ts
		}
		for k := off - from; k < off-from+len(p.payload); k++ {
			if !have[k] {
				have[k] = true
				held++
			}
		}
		if held == x.reqN && doneAt == 0 {
			doneAt = p.ts
		}
	}
	if firstAt != r.ReqFirstCap || doneAt != r.ReqLastCap {
		t.Errorf("%s: first byte captured at %d, request complete at %d; truth %d %d", id, firstAt, doneAt, r.ReqFirstCap, r.ReqLastCap)
	}
	// IP IDs from the packet before the request to the first one after it
	// (a lost spurious retransmission comes late; the client's FIN at
	// least follows): the gaps hold at least the lost copies.
	if prev >= 0 && len(reqPkts) > 0 {
		last := reqPkts[len(reqPkts)-1]
		for k := last + 1; k < len(c.pkts); k++ {
			if c.toServer(c.pkts[k]) {
				last = k
				break
			}
		}
		lo, hi := c.pkts[prev].ipid, c.pkts[reqPkts[0]].ipid
		clientBetween := 0
		for k := prev + 1; k <= last; k++ {
			if p := c.pkts[k]; c.toServer(p) {
				clientBetween++
				if p.ipid-lo > hi-lo {
					hi = p.ipid
				}
			}
		}
		if gap := int(hi-lo) - clientBetween; gap < r.UpstreamLost {
			t.Errorf("%s: %d copies lost but an IP ID gap of %d", id, r.UpstreamLost, gap)
		}
	}
	if r.UpstreamLost > 0 {
		n.upLost++
	}
	if r.Reordered {
		n.reordered++
		// A later segment came first; the late one carries the older
		// IP ID and timestamp, as sent.
		first := c.pkts[reqPkts[0]]
		var late xpkt
		for _, k := range reqPkts {
			if c.relC(c.pkts[k].seq) == from {
				late = c.pkts[k]
				break
			}
		}
		if c.relC(first.seq) == from || int16(late.ipid-first.ipid) >= 0 || int32(late.tsval-first.tsval) > 0 {
			t.Errorf("%s: reordered, but first captured seq %d (request at %d), IDs %d/%d, TSvals %d/%d",
				id, c.relC(first.seq), from, first.ipid, late.ipid, first.tsval, late.tsval)
		}
	}
	if r.HandshakeACKLost {
		n.hsLost++
		// Nothing from the client between its SYN and the request, and
		// one IP ID skipped.
		var syn, next xpkt
		for _, p := range c.pkts {
			switch {
			case !c.toServer(p):
			case p.syn:
				syn = p
			default:
				next = p
			}
			if len(next.payload) > 0 || next.ack != 0 {
				break
			}
		}
		if len(next.payload) == 0 || next.ipid-syn.ipid < 2 {
			t.Errorf("%s: handshake ACK lost, but the client's next packet is %+v", id, next)
		}
	}
}

// checkResponsePackets: spurious retransmissions and the client's answers.
func checkResponsePackets(t *testing.T, c *xconn, r TruthRecord, x xreq, n *counts) {
	t.Helper()
	id := r.Client.String() + " " + r.URL
	from, to := x.respOff, x.respOff+x.respN
	sent := 0 // highest response byte sent so far
	var ackCap int64
	spurious := 0
	for i, p := range c.pkts {
		if c.toServer(p) {
			if ackCap == 0 && c.relS(p.ack) >= to && p.ts >= r.RespFirstCap {
				ackCap = p.ts
			}
			continue
		}
		off := c.relS(p.seq)
		if len(p.payload) == 0 || off < from || off >= to {
			continue
		}
		end := off + len(p.payload)
		switch {
		case end > sent:
		case p.ts+r.RTT/2 > r.End:
			// A copy that reached the client after it had the whole
			// response: spurious.
			spurious++
			checkDSACK(t, c, i, end == to, id, n)
		case p.ts > r.RespLastCap:
			t.Errorf("%s: retransmission at %d after the last transmission %d", id, p.ts, r.RespLastCap)
		}
		sent = max(sent, end)
	}
	if ackCap != r.AckCap {
		t.Errorf("%s: first client packet acknowledging the response at %d, truth %d", id, ackCap, r.AckCap)
	}
	if (spurious > 0) != r.SpuriousRetrans {
		t.Errorf("%s: %d spurious retransmissions in the capture, truth says %v", id, spurious, r.SpuriousRetrans)
	}
	if r.SpuriousRetrans {
		n.spurious++
	}
}

// checkDSACK: server retransmission c.pkts[i] of bytes the client had is
// answered one round trip later by a duplicate ACK reporting it (D-SACK),
// or that ACK's IP ID is missing (declared lost). The ACK echoes the copy's
// TSval when the copy ends at the client's acknowledgment (RFC 7323 takes
// TS.Recent from it), an older one otherwise.
func checkDSACK(t *testing.T, c *xconn, i int, atEnd bool, id string, n *counts) {
	t.Helper()
	rt := c.pkts[i]
	at := rt.ts + c.truth[0].RTT
	var before, after *xpkt // the client's packets around at
	for k := range c.pkts {
		p := &c.pkts[k]
		if !c.toServer(*p) {
			continue
		}
		if p.ts < at {
			before = p
			continue
		}
		if p.ts > at && after == nil {
			after = p
		}
		if p.ts != at || len(p.sack) == 0 || p.sack[0].Left != rt.seq || p.sack[0].Right != rt.seq+uint32(len(rt.payload)) {
			continue
		}
		n.dsack++
		if int32(p.ack-p.sack[0].Right) < 0 {
			t.Errorf("%s: D-SACK block ends at %d, above its cumulative ACK %d", id, p.sack[0].Right, p.ack)
		}
		switch {
		case atEnd && p.tsecr != rt.tsval:
			t.Errorf("%s: D-SACK of a probe echoes %d, the probe's TSval is %d", id, p.tsecr, rt.tsval)
		case !atEnd && int32(p.tsecr-rt.tsval) >= 0:
			t.Errorf("%s: D-SACK of an old duplicate echoes %d, not below its TSval %d", id, p.tsecr, rt.tsval)
		case atEnd:
			n.echoProbe++
		default:
			n.echoOld++
		}
		return
	}
	// No answer: the client's next packet shows the lost one in its IP ID.
	if before == nil || after == nil || after.ipid-before.ipid < 2 {
		t.Errorf("%s: retransmission at %d neither answered by a D-SACK nor followed by a lost ACK", id, rt.ts)
	}
}

var refRE = regexp.MustCompile(`(?:href|src)="([^"]+)"|srcset="([^" ]+) |url\('([^']+)'\)`)

// checkPages: the HTML of each container names exactly the objects its
// pageview fetched; redirects, after-load fetches, pageview spans and
// keep-alive reuse.
func checkPages(t *testing.T, conns map[netip.AddrPort]*xconn, truth []TruthRecord, n *counts) {
	t.Helper()
	type key struct {
		client netip.AddrPort
		cap    int64
	}
	exch := map[key]xreq{}
	for _, c := range conns {
		for i, r := range c.truth {
			exch[key{r.Client, r.ReqFirstCap}] = c.reqs[i]
		}
	}
	pvConns := map[netip.AddrPort]map[uint64]bool{}
	forms := map[string]int{}
	for _, pv := range Pageviews(truth) {
		var container *TruthRecord
		fetched := map[string]bool{}
		for k := range pv.Members {
			m := &pv.Members[k]
			if pvConns[m.Client] == nil {
				pvConns[m.Client] = map[uint64]bool{}
			}
			pvConns[m.Client][pv.PageviewID] = true
			switch {
			case m.Container:
				container = m
				if m.Method == "POST" {
					n.posts++
				}
			case m.AfterLoad:
				n.afterLoad++
				if m.Start < pv.End+int64(renderMin) || m.URL == "/favicon.ico" && m.Start > pv.End+int64(renderMax) {
					t.Errorf("pageview %d: after-load %s at %d, load at %d", pv.PageviewID, m.URL, m.Start, pv.End)
				}
			case m.Redirect:
				n.redirects++
				loc := exch[key{m.Client, m.ReqFirstCap}].resp.Header.Get("Location")
				if loc != "http://"+pv.Host+pv.URL || m.Start != pv.Start || pv.Members[k+1].Client != m.Client {
					t.Errorf("pageview %d: redirect to %q at %d, container %s on %v at %d", pv.PageviewID, loc, m.Start,
						pv.URL, pv.Members[k+1].Client, pv.Start)
				}
			default:
				fetched[m.URL] = true
				if m.End > pv.End {
					t.Errorf("pageview %d: object %s ends after the page", pv.PageviewID, m.URL)
				}
			}
		}
		if container == nil {
			t.Fatalf("pageview %d has no container", pv.PageviewID)
		}
		if !pv.Members[0].Redirect && pv.Start != container.Start {
			t.Errorf("pageview %d: Start %d, container's %d", pv.PageviewID, pv.Start, container.Start)
		}
		x := exch[key{container.Client, container.ReqFirstCap}]
		html := x.payload
		if x.resp.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(html))
			if err != nil {
				t.Fatalf("pageview %d: %v", pv.PageviewID, err)
			}
			if html, err = io.ReadAll(zr); err != nil {
				t.Fatalf("pageview %d: %v", pv.PageviewID, err)
			}
		}
		if len(html) < 4000 || len(html) > 82000 || !bytes.HasPrefix(html, []byte("<!DOCTYPE html>")) {
			t.Errorf("pageview %d: HTML of %d bytes: %.40q", pv.PageviewID, len(html), html)
		}
		base, _ := url.Parse("http://" + pv.Host + pv.URL)
		named := map[string]bool{}
		for _, m := range refRE.FindAllSubmatch(html, -1) {
			ref := string(slices.Concat(m[1], m[2], m[3]))
			u, err := base.Parse(ref)
			if err != nil {
				t.Errorf("pageview %d: bad URL %q", pv.PageviewID, ref)
				continue
			}
			switch {
			case strings.HasPrefix(ref, "http://"):
				forms["absolute"]++
			case strings.HasPrefix(ref, "/"):
				forms["root"]++
			default:
				forms["relative"]++
			}
			if strings.HasPrefix(u.Path, "/site/") {
				continue // a link to another page, not a resource
			}
			named[u.Path] = true
		}
		if !reflect.DeepEqual(named, fetched) && !(len(named) == 0 && len(fetched) == 0) {
			t.Errorf("pageview %d: HTML names %v, the page fetched %v", pv.PageviewID, named, fetched)
		}
	}
	if forms["absolute"] == 0 || forms["root"] == 0 || forms["relative"] == 0 {
		t.Errorf("URL forms used: %v", forms)
	}
	for _, ids := range pvConns {
		if len(ids) > 1 {
			n.reused++
		}
	}
	// Only no-Referer clients reuse connections across pageviews; they
	// never send Referer, the others do for every object.
	noRef := map[netip.Addr]bool{}
	for c, ids := range pvConns {
		if len(ids) > 1 {
			noRef[c.Addr()] = true
		}
	}
	for _, r := range truth {
		switch {
		case noRef[r.Client.Addr()] && r.Referer != "":
			t.Errorf("%v: a client reusing connections sends Referer %q", r.Client, r.Referer)
		case !noRef[r.Client.Addr()] && !r.Container && !r.Redirect && r.Referer == "":
			t.Logf("%v %s: no Referer (a no-Referer client that never reused a connection?)", r.Client, r.URL)
		}
	}
}
