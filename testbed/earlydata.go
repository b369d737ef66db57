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
	"syscall"
	"time"
)

// TLS 1.3 early data (0-RTT) on the testbed: openssl s_client resumes a
// session and sends its request with the ClientHello (curl 7.88 has no
// early data), and tshark reads which TLS records crossed the wire.

// SClientOptions configure one openssl s_client connection to nginx.
type SClientOptions struct {
	// KeyLog receives the connection's TLS secrets (appended).
	KeyLog string
	// SessIn resumes the session saved in this file; SessOut saves the
	// session of every ticket the server sends (the last one stays).
	SessIn, SessOut string
	// EarlyData is a file sent as 0-RTT early data (needs SessIn).
	EarlyData string
	// Stdin is sent once the handshake is done.
	Stdin []byte
	// Timeout bounds the connection. Default 20 s.
	Timeout time.Duration
}

// SClientResult is what s_client printed and when it ran (Unix ns).
type SClientResult struct {
	Stdout, Stderr string
	Start, End     int64
}

// Reused says whether the session was resumed.
func (r *SClientResult) Reused() bool { return strings.Contains(r.Stdout, "\nReused, TLSv1.3") }

// EarlyStatus is s_client's verdict on early data ("accepted",
// "rejected", "not sent"; "" when it printed none).
func (r *SClientResult) EarlyStatus() string {
	_, rest, ok := strings.Cut(r.Stdout, "Early data was ")
	if !ok {
		return ""
	}
	s, _, _ := strings.Cut(rest, "\n")
	return s
}

// Status is the HTTP status of the response s_client printed (0 if none).
func (r *SClientResult) Status() int {
	_, rest, ok := strings.Cut(r.Stdout, "HTTP/1.1 ")
	if !ok || len(rest) < 3 {
		return 0
	}
	n, _ := strconv.Atoi(rest[:3])
	return n
}

// SClient runs `openssl s_client` in the client namespace against ng
// (TLS 1.3, its certificate name as SNI, verified) until the server
// closes the connection (-ign_eof: the end of stdin does not end it).
func (tb *Testbed) SClient(ctx context.Context, ng *Nginx, o SClientOptions) (*SClientResult, error) {
	if o.Timeout == 0 {
		o.Timeout = 20 * time.Second
	}
	openssl, err := toolPath("openssl")
	if err != nil {
		return nil, err
	}
	ip, err := toolPath("ip")
	if err != nil {
		return nil, err
	}
	args := []string{"netns", "exec", tb.Client.NS, openssl, "s_client", "-connect", fmt.Sprintf("%s:%d", ng.Host.Addr, ng.Port),
		"-servername", ng.TLS.Name, "-tls1_3", "-CAfile", ng.CAFile, "-verify_return_error", "-ign_eof", "-keylogfile", o.KeyLog}
	for _, a := range [][2]string{{"-sess_in", o.SessIn}, {"-sess_out", o.SessOut}, {"-early_data", o.EarlyData}} {
		if a[1] != "" {
			args = append(args, a[0], a[1])
		}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, ip, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(o.Stdin), &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	r := &SClientResult{Start: time.Now().UnixNano()}
	err = cmd.Run()
	r.End = time.Now().UnixNano()
	r.Stdout, r.Stderr = stdout.String(), stderr.String()
	if err != nil {
		return r, fmt.Errorf("openssl s_client: %w: %s", err, strings.TrimSpace(r.Stderr))
	}
	return r, nil
}

// TLSRecordPacket is one packet of a TLS capture as tshark decrypted it:
// the records it completed (reassembled ones at their last segment).
type TLSRecordPacket struct {
	At         int64 // Unix ns
	Port       uint16
	FromClient bool
	TCPLen     int
	// Per record: the (inner, when decrypted) content type and length.
	Types, Lengths []int
	// Handshake message types and extension types in the packet.
	Handshakes, Extensions []int
	URL                    string // an HTTP request completed here
	Status                 int    // an HTTP response completed here
}

// tlsRecordFields are tshark's fields in the order ReadTLSRecords reads
// them.
var tlsRecordFields = []string{"frame.time_epoch", "tcp.srcport", "tcp.dstport", "tcp.len", "tls.record.content_type",
	"tls.record.length", "tls.handshake.type", "tls.handshake.extension.type", "http.request.uri", "http.response.code"}

// ReadTLSRecords lists pcap's packets to or from serverPort that carry
// payload, by client port, with the TLS records they complete decrypted
// with keyLog.
func ReadTLSRecords(ctx context.Context, pcap, keyLog string, serverPort int) (map[uint16][]TLSRecordPacket, error) {
	out, err := tsharkTLSFields(ctx, pcap, keyLog, fmt.Sprintf("tcp.port == %d && (tls || tcp.len > 0)", serverPort), tlsRecordFields)
	if err != nil {
		return nil, err
	}
	conns := map[uint16][]TLSRecordPacket{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		f := strings.Split(sc.Text(), "|")
		if len(f) != len(tlsRecordFields) {
			return nil, fmt.Errorf("tshark %s line %d: %d fields, want %d", pcap, n, len(f), len(tlsRecordFields))
		}
		p, err := tlsRecordRow(f, uint16(serverPort))
		if err != nil {
			return nil, fmt.Errorf("tshark %s line %d: %w", pcap, n, err)
		}
		conns[p.Port] = append(conns[p.Port], p)
	}
	return conns, nil
}

func tlsRecordRow(f []string, serverPort uint16) (TLSRecordPacket, error) {
	var p TLSRecordPacket
	var err error
	if p.At, err = epochNS(f[0]); err != nil {
		return p, err
	}
	src, err1 := strconv.Atoi(f[1])
	dst, err2 := strconv.Atoi(f[2])
	p.TCPLen, _ = strconv.Atoi(f[3])
	if err1 != nil || err2 != nil {
		return p, fmt.Errorf("ports %q %q", f[1], f[2])
	}
	p.FromClient, p.Port = uint16(dst) == serverPort, uint16(src)
	if !p.FromClient {
		p.Port = uint16(dst)
	}
	p.Types, p.Lengths = ints(f[4]), ints(f[5])
	p.Handshakes, p.Extensions = ints(f[6]), ints(f[7])
	p.URL = f[8]
	p.Status, _ = strconv.Atoi(strings.Split(f[9], ";")[0])
	return p, nil
}

// ints parses tshark's ";"-aggregated (or ","-listed) numbers.
func ints(s string) []int {
	var out []int
	for _, v := range strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ',' }) {
		if n, err := strconv.Atoi(v); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// TLS content and handshake types as tshark reports them.
const (
	tlsCCS         = 20
	tlsAlert       = 21
	tlsHandshake   = 22
	tlsAppData     = 23
	hsEndOfEarly   = 5
	hsEncExt       = 8
	hsFinished     = 20
	extEarlyData   = 42
	tlsServerHello = 2
)

// EarlyDataConn is what one connection's records say of early data.
type EarlyDataConn struct {
	// Offered: the ClientHello's early_data extension. Accepted: the
	// server's EncryptedExtensions echoes it. EndOfEarly: the client
	// sent EndOfEarlyData.
	Offered, Accepted, EndOfEarly bool
	// EarlyRecords are the client's application-data records before its
	// Finished (the 0-RTT ones), by length.
	EarlyRecords []int
	// Request is the first request's URL, when it went before the
	// client's Finished (as tshark decrypted it).
	Request string
	// ServerFlight: the server's records from ServerHello to its
	// Finished, as "type:length" (decrypted: the inner type).
	ServerFlight []string
	// ClientFinished: when the packet with the client's Finished passed
	// (Unix ns).
	ClientFinished int64
	// HalfRTT: the server's TCP payload bytes past its handshake flight
	// (records with their 5-byte headers) that passed before the
	// client's Finished: on the server's side, what it sent before the
	// Finished reached it (0.5-RTT data; tickets are sent after it).
	HalfRTT                  int
	serverBytes, flightBytes int
	flightDone               bool
}

// ReadEarlyData sums up a connection's TLS record packets.
func ReadEarlyData(ps []TLSRecordPacket) EarlyDataConn {
	var e EarlyDataConn
	for _, p := range ps {
		if p.FromClient {
			e.readClient(p)
			continue
		}
		if e.ClientFinished == 0 {
			e.serverBytes += p.TCPLen
		}
		if slices.Contains(p.Handshakes, hsEncExt) && slices.Contains(p.Extensions, extEarlyData) {
			e.Accepted = true
		}
		inFlight := len(e.ServerFlight) > 0 || slices.Contains(p.Handshakes, tlsServerHello)
		for i, typ := range p.Types {
			if inFlight && !e.flightDone && i < len(p.Lengths) {
				e.ServerFlight = append(e.ServerFlight, fmt.Sprintf("%s:%d", tlsTypeName(typ), p.Lengths[i]))
				e.flightBytes += p.Lengths[i] + 5
			}
		}
		if inFlight && slices.Contains(p.Handshakes, hsFinished) {
			e.flightDone = true
		}
	}
	e.HalfRTT = max(0, e.serverBytes-e.flightBytes)
	return e
}

func (e *EarlyDataConn) readClient(p TLSRecordPacket) {
	if slices.Contains(p.Handshakes, 1) && slices.Contains(p.Extensions, extEarlyData) {
		e.Offered = true
	}
	if slices.Contains(p.Handshakes, hsEndOfEarly) {
		e.EndOfEarly = true
	}
	if e.ClientFinished == 0 {
		if e.Request == "" && p.URL != "" {
			e.Request = p.URL
		}
		for i, typ := range p.Types {
			if typ == tlsAppData && i < len(p.Lengths) {
				e.EarlyRecords = append(e.EarlyRecords, p.Lengths[i])
			}
		}
	}
	if slices.Contains(p.Handshakes, hsFinished) && e.ClientFinished == 0 {
		e.ClientFinished = p.At
	}
}

func tlsTypeName(typ int) string {
	switch typ {
	case tlsCCS:
		return "ccs"
	case tlsAlert:
		return "alert"
	case tlsHandshake:
		return "hs"
	case tlsAppData:
		return "app"
	}
	return strconv.Itoa(typ)
}

// String sums the connection up for a log.
func (e EarlyDataConn) String() string {
	return fmt.Sprintf("offered %v accepted %v end_of_early_data %v; early request %q in %d record(s) %v; server flight %v; %d bytes past the flight before the client's Finished",
		e.Offered, e.Accepted, e.EndOfEarly, e.Request, len(e.EarlyRecords), e.EarlyRecords, e.ServerFlight, e.HalfRTT)
}
