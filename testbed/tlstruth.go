package testbed

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The truth of HTTPS runs: the client's capture decrypted by another
// decoder than rtmon's. tshark, with the client's key log, reassembles
// TLS records and HTTP messages and reports each at the packet that
// completed it, which on the client's side is when the client had it.

// TLSWireTxn is one request and its response on the client's wire.
type TLSWireTxn struct {
	Port   uint16 // client port
	Stream uint32 // HTTP/2 stream id; 0 for HTTP/1.1
	Method string
	URL    string // path and query
	Status int
	// ReqFirst: the packet that completed the request's first message
	// (HTTP/1.1: the request head, the first TLS record of a request
	// spanning several, as one with a body does; HTTP/2: its HEADERS).
	// ReqLast (HTTP/1.1): the packet that completed the request, body
	// included. RespLast: the packet that completed the final response
	// (its END_STREAM; an interim 1xx is no response). Unix ns.
	ReqFirst, ReqLast, RespLast int64
	// Fresh: the first request of a connection, sent within
	// PreconnectIdle of the handshake's end at the client (its TLS
	// Finished, or under TLS 1.2 the server's, if later: the client
	// waits for it); Start is then the connection's first SYN, else
	// ReqFirst.
	Fresh      bool
	Start, End int64
	Complete   bool
	// ReqHeld: the client resent bytes at or before the request's after
	// sending it (the request itself, or earlier bytes it waited behind
	// at the server: TCP delivers in order).
	ReqHeld bool
	reqSeq  int64
}

// Total is the transaction's time at the client (0 when incomplete).
func (x *TLSWireTxn) Total() time.Duration {
	if !x.Complete {
		return 0
	}
	return time.Duration(x.End - x.Start)
}

// TLSWireConn is one connection of the client's capture.
type TLSWireConn struct {
	Port     uint16
	SYN      int64 // the client's first SYN
	SYNs     int   // the client's SYNs (resends included)
	Finished int64 // the client's TLS Finished
	// srvFinished: the server's TLS Finished reached the client.
	srvFinished int64
	Txns        []*TLSWireTxn
	streams     map[uint32]*TLSWireTxn
	resends     []resend // the client's retransmissions
}

type resend struct{ at, seq int64 }

// tlsTruthFields are tshark's fields, in the order parseTLSTruthRow reads
// them.
var tlsTruthFields = []string{"frame.number", "frame.time_epoch", "tcp.srcport", "tcp.dstport", "tcp.flags.syn",
	"tcp.flags.ack", "tls.handshake.type", "http.request.method", "http.request.uri", "http.response.code",
	"http.request_in", "http2.streamid", "http2.type", "http2.flags.end_stream", "http2.headers.method",
	"http2.headers.path", "http2.headers.status", "tcp.seq", "tcp.analysis.retransmission", "tls.segment"}

// ReadTLSWire decrypts the client-side capture pcap with keyLog (tshark)
// and returns its connections to serverPort by client port. tshark
// reports an HTTP/1.1 request with a body where the body ends; the
// client's packets with payload are read too, to time its head.
func ReadTLSWire(ctx context.Context, pcap, keyLog string, serverPort int) (map[uint16]*TLSWireConn, error) {
	// Out-of-order reassembly: without it a lost and resent segment ends
	// the stream's reassembly, and every later message goes unreported.
	out, err := tsharkTLSFields(ctx, pcap, keyLog, fmt.Sprintf("tcp.port == %d && (http || http2 || tls.handshake.type == 20 || tcp.flags.syn == 1 || tcp.analysis.retransmission || tcp.dstport == %[1]d && tcp.len > 0)", serverPort), tlsTruthFields)
	if err != nil {
		return nil, err
	}
	w := &tlsTruth{port: uint16(serverPort), conns: map[uint16]*TLSWireConn{}, byFrame: map[int]*TLSWireTxn{}, frameAt: map[int]int64{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		if err := w.row(strings.Split(sc.Text(), "|")); err != nil {
			return nil, fmt.Errorf("tshark %s line %d: %w", pcap, n, err)
		}
	}
	for _, c := range w.conns {
		c.settle()
	}
	return w.conns, nil
}

type tlsTruth struct {
	port    uint16
	conns   map[uint16]*TLSWireConn
	byFrame map[int]*TLSWireTxn // HTTP/1.1 requests by frame number
	frameAt map[int]int64       // the client's packets' times by frame number
}

// row reads one packet's fields.
func (w *tlsTruth) row(f []string) error {
	if len(f) != len(tlsTruthFields) {
		return fmt.Errorf("%d fields, want %d", len(f), len(tlsTruthFields))
	}
	at, err := epochNS(f[1])
	if err != nil {
		return err
	}
	src, err1 := strconv.Atoi(f[2])
	dst, err2 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil {
		return fmt.Errorf("ports %q %q", f[2], f[3])
	}
	fromClient := uint16(dst) == w.port
	cport := uint16(src)
	if !fromClient {
		cport = uint16(dst)
	}
	c := w.conns[cport]
	if c == nil {
		c = &TLSWireConn{Port: cport, streams: map[uint32]*TLSWireTxn{}}
		w.conns[cport] = c
	}
	if fromClient && f[4] == "1" && f[5] == "0" {
		if c.SYN == 0 {
			c.SYN = at
		}
		c.SYNs++
	}
	if fromClient && c.Finished == 0 && slices.Contains(strings.Split(f[6], ";"), "20") {
		c.Finished = at
	}
	if !fromClient && c.srvFinished == 0 && slices.Contains(strings.Split(f[6], ";"), "20") {
		c.srvFinished = at
	}
	seq, _ := strconv.ParseInt(f[17], 10, 64) // relative sequence number
	if fromClient && f[18] != "" {
		c.resends = append(c.resends, resend{at, seq})
	}
	if err := w.http1(c, fromClient, at, seq, f); err != nil {
		return err
	}
	return c.http2(fromClient, at, seq, f)
}

func (w *tlsTruth) http1(c *TLSWireConn, fromClient bool, at, seq int64, f []string) error {
	frame, err := strconv.Atoi(f[0])
	if err != nil {
		return fmt.Errorf("frame number %q", f[0])
	}
	if fromClient {
		w.frameAt[frame] = at
	}
	switch {
	case fromClient && f[8] != "":
		x := &TLSWireTxn{Port: c.Port, Method: f[7], URL: f[8], ReqFirst: at, ReqLast: at, reqSeq: seq}
		// A request in several TLS records (a body after its head):
		// the first record's packet holds the head.
		if first, _, _ := strings.Cut(f[19], ";"); first != "" {
			if n, err := strconv.Atoi(first); err == nil && w.frameAt[n] > 0 {
				x.ReqFirst = w.frameAt[n]
			}
		}
		c.Txns = append(c.Txns, x)
		w.byFrame[frame] = x
	case !fromClient && f[9] != "":
		// Several responses completed by one packet are listed together.
		// An interim 1xx is none: the 100 Continue to a request head
		// whose body had not yet come has no request_in.
		codes, reqs := strings.Split(f[9], ";"), split(f[10])
		if len(codes) > len(reqs) {
			codes = slices.DeleteFunc(codes, func(s string) bool { return strings.HasPrefix(s, "1") })
		}
		if len(codes) > len(reqs) {
			return fmt.Errorf("responses %q to requests in frames %q", f[9], f[10])
		}
		for i, r := range reqs {
			n, err := strconv.Atoi(r)
			x := w.byFrame[n]
			if err != nil || x == nil || i >= len(codes) {
				return fmt.Errorf("response to frame %q: no such request", r)
			}
			if strings.HasPrefix(codes[i], "1") {
				continue
			}
			x.Status, _ = strconv.Atoi(codes[i])
			x.RespLast, x.Complete = at, true
		}
	}
	return nil
}

// http2 reads a packet's HTTP/2 frames: ids and types are listed per
// frame, END_STREAM only for DATA and HEADERS, methods and paths only for
// the client's HEADERS, statuses only for the server's.
func (c *TLSWireConn) http2(fromClient bool, at, seq int64, f []string) error {
	if f[11] == "" {
		return nil
	}
	ids, types := strings.Split(f[11], ";"), strings.Split(f[12], ";")
	ends, methods, paths, statuses := split(f[13]), split(f[14]), split(f[15]), split(f[16])
	if len(ids) != len(types) {
		return fmt.Errorf("http2: %d stream ids, %d types", len(ids), len(types))
	}
	for i := range ids {
		id64, err1 := strconv.ParseUint(ids[i], 10, 32)
		typ, err2 := strconv.Atoi(types[i])
		if err1 != nil || err2 != nil {
			return fmt.Errorf("http2 frame %q type %q", ids[i], types[i])
		}
		id := uint32(id64)
		if typ != 0 && typ != 1 {
			continue
		}
		end := len(ends) > 0 && ends[0] == "1"
		ends = shift(ends)
		x := c.streams[id]
		switch {
		case typ == 1 && fromClient && x == nil:
			if len(paths) == 0 {
				return fmt.Errorf("http2 stream %d: HEADERS without :path", id)
			}
			x = &TLSWireTxn{Port: c.Port, Stream: id, URL: paths[0], ReqFirst: at, reqSeq: seq}
			if len(methods) > 0 {
				x.Method = methods[0]
			}
			methods, paths = shift(methods), shift(paths)
			c.streams[id] = x
			c.Txns = append(c.Txns, x)
		case typ == 1 && !fromClient && x != nil && len(statuses) > 0:
			if s, err := strconv.Atoi(statuses[0]); err == nil && s >= 200 {
				x.Status = s
			}
			statuses = shift(statuses)
		}
		if end && !fromClient && x != nil {
			x.RespLast, x.Complete = at, true
		}
	}
	return nil
}

// settle orders the connection's transactions by request and sets their
// spans.
func (c *TLSWireConn) settle() {
	slices.SortStableFunc(c.Txns, func(a, b *TLSWireTxn) int { return int(a.ReqFirst - b.ReqFirst) })
	for i, x := range c.Txns {
		x.Start, x.End = x.ReqFirst, x.RespLast
		for _, r := range c.resends {
			x.ReqHeld = x.ReqHeld || r.at > x.ReqFirst && r.seq <= x.reqSeq && x.Complete && r.at < x.End
		}
		if i == 0 && c.SYN > 0 && c.Finished > 0 && x.ReqFirst-max(c.Finished, c.srvFinished) <= int64(PreconnectIdle) {
			x.Fresh, x.Start = true, c.SYN
		}
	}
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ";")
}

func shift(s []string) []string {
	if len(s) == 0 {
		return s
	}
	return s[1:]
}

// epochNS parses tshark's frame.time_epoch ("1796413769.311073000").
func epochNS(s string) (int64, error) {
	sec, frac, _ := strings.Cut(s, ".")
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("time %q: %w", s, err)
	}
	frac = (frac + "000000000")[:9]
	ns, err := strconv.ParseInt(frac, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("time %q: %w", s, err)
	}
	return n*1e9 + ns, nil
}

// tsharkTLSFields runs tshark over pcap, decrypting with keyLog and
// reassembling out-of-order segments, and returns the fields of the
// packets filter selects, one line each ('|' between fields, ';' between
// a field's values).
func tsharkTLSFields(ctx context.Context, pcap, keyLog, filter string, fields []string) ([]byte, error) {
	args := []string{"-r", pcap, "-n", "-o", "tls.keylog_file:" + keyLog, "-o", "tcp.reassemble_out_of_order:TRUE",
		"-Y", filter, "-T", "fields", "-E", "separator=|", "-E", "aggregator=;"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "tshark", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("tshark %s: %w: %s", pcap, err, stderr.String())
	}
	return out, nil
}
