package testbed

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"sort"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// This file is the client-side wire analyzer: the ground truth of every
// scenario. It reads the capture taken on the client's own veth (both
// directions, kernel timestamps) and reconstructs each TCP connection and
// its HTTP/1.x exchanges on its own, without rtmon's reconstruct package:
// the byte streams are reassembled by sequence number and cut into messages
// by net/http's ReadRequest/ReadResponse, counting the bytes each consumed.
//
// At the client, a packet the client sends is seen when it leaves (a copy
// lost further on is still seen, so "first transmission" is exact), and a
// packet from the server is seen when it arrives (a copy lost on the way is
// never seen, so "arrival" is exact). The clock is the kernel's capture
// timestamp, so how busy the machine is does not enter the truth.

// WireTruthConn is one TCP connection as the client's wire shows it.
type WireTruthConn struct {
	Client     netip.Addr `json:"client"`
	ClientPort uint16     `json:"client_port"`
	Server     netip.Addr `json:"server"`
	ServerPort uint16     `json:"server_port"`
	// Seq counts earlier connections with the same four-tuple (port
	// reuse): 0 for the first.
	Seq int `json:"seq,omitempty"`
	// SYNs are the send times of the client's SYNs with the connection's
	// ISN, SYNACKs the arrival times of SYN/ACKs.
	SYNs    []int64 `json:"syns"`
	SYNACKs []int64 `json:"synacks,omitempty"`
	// HandshakeACK is when the client sent the first segment acknowledging
	// the SYN/ACK (its handshake ACK, or data if that ACK never left).
	HandshakeACK int64            `json:"handshake_ack,omitempty"`
	Txns         []*WireTruthTxn  `json:"txns"`
	Err          string           `json:"error,omitempty"`
	up, down     *streamAssembler // client -> server, server -> client
	closed       bool
}

// WireTruthTxn is one HTTP request/response on a connection, timed at the
// client. Index is its 0-based position on the connection, as rtmon's.
type WireTruthTxn struct {
	Index     int    `json:"index"`
	Method    string `json:"method"`
	URL       string `json:"url"`
	Status    int    `json:"status"`
	Referer   string `json:"referer,omitempty"`
	UserAgent string `json:"user_agent,omitempty"`
	// ReqFirst and ReqLast: first transmission of the request's first and
	// last byte. RespFirst: first arrival of the response's first byte.
	// RespLast: in-order arrival of its last byte (every byte up to it
	// had arrived). Unix ns, 0 when unknown.
	ReqFirst  int64 `json:"req_first"`
	ReqLast   int64 `json:"req_last"`
	RespFirst int64 `json:"resp_first"`
	RespLast  int64 `json:"resp_last"`
	// Fresh: the first request of its connection, sent within
	// PreconnectIdle of the handshake ACK; Start then is the first SYN.
	Fresh bool  `json:"fresh"`
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	Total int64 `json:"total_ns"`
	// ReqRetrans: some request byte was sent more than once.
	// RespDup: some response byte arrived more than once (a retransmission
	// the client did not need: its ACK was lost or late).
	// RespDupLast: when the last such duplicate arrived (Unix ns).
	ReqRetrans  bool  `json:"req_retrans,omitempty"`
	RespDup     bool  `json:"resp_dup,omitempty"`
	RespDupLast int64 `json:"resp_dup_last,omitempty"`
	RespBytes   int64 `json:"resp_bytes"` // headers and body on the wire
	// Complete: the whole response arrived.
	Complete bool `json:"complete"`

	reqStart, reqEnd   int64 // offsets in the client's stream
	respStart, respEnd int64 // offsets in the server's stream
}

// PreconnectIdle is the longest gap between the handshake ACK and a
// connection's first request byte for which the connect counts in that
// request's time (as rtmon's reconstruct/timing.go).
const PreconnectIdle = 25 * time.Millisecond

// ClientWire is everything the client capture holds.
type ClientWire struct {
	Conns   []*WireTruthConn `json:"conns"`
	Packets int              `json:"packets"`
	// ForeignIPs are addresses outside the documentation ranges (must be
	// none).
	ForeignIPs []string `json:"foreign_ips,omitempty"`
}

// Txns lists every transaction with its connection.
func (w *ClientWire) Txns() []WireRef {
	var out []WireRef
	for _, c := range w.Conns {
		for _, x := range c.Txns {
			out = append(out, WireRef{c, x})
		}
	}
	return out
}

// WireRef is a transaction with its connection.
type WireRef struct {
	Conn *WireTruthConn
	Txn  *WireTruthTxn
}

// StartInstants are the client capture times of the packets that define
// the transaction's Start and how a server-side monitor sees it: on a
// fresh connection the first SYN, the handshake ACK (Tconn) and the
// request's first byte (whether it came at once), else the request's
// first byte.
func (r WireRef) StartInstants() []int64 {
	c, x := r.Conn, r.Txn
	if x.Fresh {
		// The request too: a request the link held back behind the
		// handshake ACK looks preconnected at the server (seen: 185 ms
		// under a stalled bridge), which no real path does.
		return []int64{c.SYNs[0], c.HandshakeACK, x.ReqFirst}
	}
	return []int64{x.ReqFirst}
}

// EndInstants: the packet that completed the response in order.
func (r WireRef) EndInstants() []int64 { return []int64{r.Txn.RespLast} }

type fourTuple struct {
	client, server         netip.Addr
	clientPort, serverPort uint16
}

// ReadClientWire analyzes a client-side capture. Server ports are told
// from client ports by address: the server is in ServerRange.
func ReadClientWire(path string) (*ClientWire, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open client capture: %w", err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("client capture %s: %w", path, err)
	}
	w := &ClientWire{}
	cur := map[fourTuple]*WireTruthConn{}
	seq := map[fourTuple]int{}
	foreign := map[string]bool{}
	p := newTCPDecoder()
	tcp := &p.tcp
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		w.Packets++
		if err := p.decode(data); err != nil {
			return nil, fmt.Errorf("packet %d: %w", w.Packets, err)
		}
		hasTCP := false
		for _, l := range p.decoded {
			hasTCP = hasTCP || l == layers.LayerTypeTCP
		}
		if !hasTCP {
			continue
		}
		src, dst := p.addrs()
		for _, a := range []netip.Addr{src, dst} {
			if !ClientRange.Contains(a) && !ServerRange.Contains(a) && !foreign[a.String()] {
				foreign[a.String()] = true
				w.ForeignIPs = append(w.ForeignIPs, a.String())
			}
		}
		up := ClientRange.Contains(src)
		var k fourTuple
		if up {
			k = fourTuple{src, dst, uint16(tcp.SrcPort), uint16(tcp.DstPort)}
		} else {
			k = fourTuple{dst, src, uint16(tcp.DstPort), uint16(tcp.SrcPort)}
		}
		at := ci.Timestamp.UnixNano()
		c := cur[k]
		if up && tcp.SYN && !tcp.ACK && (c == nil || c.up.isn != tcp.Seq) {
			// A new connection (or the port's reuse with a new ISN).
			c = &WireTruthConn{Client: k.client, ClientPort: k.clientPort, Server: k.server, ServerPort: k.serverPort,
				Seq: seq[k], up: newAssembler(tcp.Seq + 1), down: nil}
			c.up.isn = tcp.Seq
			seq[k]++
			cur[k] = c
			w.Conns = append(w.Conns, c)
		}
		if c == nil {
			continue // no SYN seen: not a connection of the scenario
		}
		pl := tcp.Payload
		switch {
		case up && tcp.SYN:
			c.SYNs = append(c.SYNs, at)
		case up:
			if c.HandshakeACK == 0 && c.down != nil && tcp.ACK && tcp.Ack == c.down.next0 {
				c.HandshakeACK = at
			}
			if len(pl) > 0 {
				c.up.sent(tcp.Seq, pl, at)
			}
		case tcp.SYN && tcp.ACK:
			c.SYNACKs = append(c.SYNACKs, at)
			if c.down == nil {
				c.down = newAssembler(tcp.Seq + 1)
			}
		default:
			if c.down != nil && len(pl) > 0 {
				c.down.arrived(tcp.Seq, pl, at)
			}
		}
	}
	sort.Strings(w.ForeignIPs)
	for _, c := range w.Conns {
		c.parse()
	}
	return w, nil
}

// streamAssembler reassembles one direction's bytes and keeps, per byte
// range, when it was first seen and (arrivals) when it was complete in
// order.
type streamAssembler struct {
	isn   uint32
	next0 uint32 // sequence number of offset 0
	data  []byte
	// have: disjoint sorted ranges received, each with its first time.
	have []timedRange
	// inOrder: consecutive ranges [prev end, end) and the time the
	// contiguous prefix reached end.
	inOrder []timedRange
	prefix  int64 // contiguous bytes from 0
	// dup: ranges seen more than once (retransmitted or duplicated).
	dup []timedRange
}

type timedRange struct {
	start, end int64
	at         int64
}

func newAssembler(next0 uint32) *streamAssembler {
	return &streamAssembler{next0: next0}
}

// maxStream bounds one direction of one connection (memory guard).
const maxStream = 256 << 20

func (s *streamAssembler) offset(seq uint32) int64 { return int64(int32(seq - s.next0)) }

// add records payload at seq seen at `at`; it returns false for payload
// outside the stream's bounds.
func (s *streamAssembler) add(seq uint32, pl []byte, at int64) bool {
	off := s.offset(seq)
	if off < 0 {
		// Starts before offset 0: only a SYN's sequence number is there.
		cut := -off
		if cut >= int64(len(pl)) {
			return false
		}
		pl, off = pl[cut:], 0
	}
	end := off + int64(len(pl))
	if end > maxStream {
		return false
	}
	if int64(len(s.data)) < end {
		s.data = append(s.data, make([]byte, end-int64(len(s.data)))...)
	}
	// New parts get pl's bytes and this time; parts already held are
	// duplicates.
	var fresh []timedRange
	pos := off
	i := sort.Search(len(s.have), func(i int) bool { return s.have[i].end > off })
	for ; pos < end && i < len(s.have) && s.have[i].start < end; i++ {
		h := s.have[i]
		if h.start > pos {
			fresh = append(fresh, timedRange{pos, h.start, at})
		}
		if h.end > pos {
			s.dup = append(s.dup, timedRange{max(pos, h.start), min(end, h.end), at})
			pos = h.end
		}
	}
	if pos < end {
		fresh = append(fresh, timedRange{pos, end, at})
	}
	for _, r := range fresh {
		copy(s.data[r.start:r.end], pl[r.start-off:r.end-off])
		j := sort.Search(len(s.have), func(j int) bool { return s.have[j].start > r.start })
		s.have = append(s.have, timedRange{})
		copy(s.have[j+1:], s.have[j:])
		s.have[j] = r
	}
	// Advance the contiguous prefix.
	old := s.prefix
	j := sort.Search(len(s.have), func(j int) bool { return s.have[j].end > s.prefix })
	for ; j < len(s.have) && s.have[j].start <= s.prefix; j++ {
		s.prefix = max(s.prefix, s.have[j].end)
	}
	if s.prefix > old {
		s.inOrder = append(s.inOrder, timedRange{old, s.prefix, at})
	}
	return true
}

// sent: a segment the client transmitted.
func (s *streamAssembler) sent(seq uint32, pl []byte, at int64) { s.add(seq, pl, at) }

// arrived: a segment that reached the client.
func (s *streamAssembler) arrived(seq uint32, pl []byte, at int64) { s.add(seq, pl, at) }

// firstSeen is when byte off was first seen (0: never).
func (s *streamAssembler) firstSeen(off int64) int64 {
	i := sort.Search(len(s.have), func(i int) bool { return s.have[i].end > off })
	if i < len(s.have) && s.have[i].start <= off {
		return s.have[i].at
	}
	return 0
}

// complete is when every byte up to and including off had been seen.
func (s *streamAssembler) complete(off int64) int64 {
	i := sort.Search(len(s.inOrder), func(i int) bool { return s.inOrder[i].end > off })
	if i < len(s.inOrder) {
		return s.inOrder[i].at
	}
	return 0
}

// sendTimes lists when byte off was seen, first copy first.
func (s *streamAssembler) sendTimes(off int64) []int64 {
	first := s.firstSeen(off)
	if first == 0 {
		return nil
	}
	out := []int64{first}
	for _, d := range s.dup {
		if d.start <= off && off < d.end {
			out = append(out, d.at)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// FirstRequestCopyLost reports whether the first transmission of the
// request's first or last byte (as this client-side view saw it leave)
// never reached the point where srv was captured: the first copy srv saw
// left the client after the first transmission. Both captures share the
// host's clock; a copy that arrived is the latest one sent before it was
// seen, since resends are at least an RTO apart and the link's one-way
// delay is shorter than that. A byte that reached srv as many times as it
// left was not lost, however late its first copy came (a stalled link).
func (c *WireTruthConn) FirstRequestCopyLost(x *WireTruthTxn, srv *WireTruthConn, sx *WireTruthTxn) bool {
	if c.up == nil || srv.up == nil || x.reqEnd <= x.reqStart || sx.reqEnd <= sx.reqStart {
		return false
	}
	lost := func(off, srvOff int64) bool {
		sent := c.up.sendTimes(off)
		arrived := srv.up.firstSeen(srvOff)
		if len(sent) < 2 || arrived == 0 {
			return false
		}
		if len(srv.up.sendTimes(srvOff)) >= len(sent) {
			// Every copy got through: a link that stalled past the
			// client's timeout delivered the first copy after the
			// resend left, but it was not lost.
			return false
		}
		i := sort.Search(len(sent), func(i int) bool { return sent[i] > arrived })
		return i > 1
	}
	return lost(x.reqStart, sx.reqStart) || lost(x.reqEnd-1, sx.reqEnd-1)
}

// dupIn reports whether a byte in [a, b) was seen more than once.
// lastDupIn is when the last duplicate of a byte in [a, b) arrived, 0
// when none did.
func (s *streamAssembler) lastDupIn(a, b int64) int64 {
	var last int64
	for _, d := range s.dup {
		if d.start < b && d.end > a {
			last = max(last, d.at)
		}
	}
	return last
}

// parse cuts both contiguous streams into requests and responses.
func (c *WireTruthConn) parse() {
	if c.up == nil {
		return
	}
	upCR := bytes.NewReader(c.up.data[:c.up.prefix])
	upBR := bufio.NewReaderSize(upCR, 64<<10)
	// pos: the stream offset the bufio.Reader has reached.
	pos := func(r *bytes.Reader, br *bufio.Reader) int64 { return r.Size() - int64(r.Len()) - int64(br.Buffered()) }
	var reqs []*http.Request
	for {
		a := pos(upCR, upBR)
		if a >= c.up.prefix {
			break
		}
		req, err := http.ReadRequest(upBR)
		if err != nil {
			c.Err = fmt.Sprintf("request at offset %d: %v", a, err)
			break
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			c.Err = fmt.Sprintf("request body at offset %d: %v", a, err)
			break
		}
		b := pos(upCR, upBR)
		x := &WireTruthTxn{Index: len(c.Txns), Method: req.Method, URL: req.URL.RequestURI(),
			Referer: req.Header.Get("Referer"), UserAgent: req.Header.Get("User-Agent"), reqStart: a, reqEnd: b}
		x.ReqFirst = c.up.firstSeen(a)
		x.ReqLast = c.up.firstSeen(b - 1)
		x.ReqRetrans = c.up.lastDupIn(a, b) != 0
		c.Txns = append(c.Txns, x)
		reqs = append(reqs, req)
	}
	if c.down == nil {
		return
	}
	downCR := bytes.NewReader(c.down.data[:c.down.prefix])
	downBR := bufio.NewReaderSize(downCR, 64<<10)
	for i, x := range c.Txns {
		a := pos(downCR, downBR)
		if a >= c.down.prefix {
			break
		}
		var resp *http.Response
		var err error
		for {
			resp, err = http.ReadResponse(downBR, reqs[i])
			// Interim responses (100 Continue) precede the final one.
			if err != nil || resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
				break
			}
		}
		if err != nil {
			if c.Err == "" {
				c.Err = fmt.Sprintf("response %d at offset %d: %v", i, a, err)
			}
			break
		}
		_, err = io.Copy(io.Discard, resp.Body)
		b := pos(downCR, downBR)
		x.Status = resp.StatusCode
		x.respStart, x.respEnd = a, b
		x.RespBytes = b - a
		x.RespFirst = c.down.firstSeen(a)
		x.RespDupLast = c.down.lastDupIn(a, b)
		x.RespDup = x.RespDupLast != 0
		if err != nil {
			if c.Err == "" {
				c.Err = fmt.Sprintf("response %d body: %v", i, err)
			}
			break
		}
		x.RespLast = c.down.complete(b - 1)
		x.Complete = true
	}
	for _, x := range c.Txns {
		x.Start = x.ReqFirst
		if x.Index == 0 && len(c.SYNs) > 0 && c.HandshakeACK > 0 && x.ReqFirst-c.HandshakeACK <= int64(PreconnectIdle) {
			x.Fresh = true
			x.Start = c.SYNs[0]
		}
		if x.Complete {
			x.End = x.RespLast
			x.Total = x.End - x.Start
		}
	}
}
