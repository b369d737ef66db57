package tlswire

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"sort"
	"sync"
	"testing"
	"time"
)

// write is one Write call a side of a recorded connection made.
type write struct {
	fromClient bool
	b          []byte
}

// wireLog records every Write of both sides in the order they began, which
// respects causality: a side writes what depends on bytes it has read only
// after the peer's write of them began.
type wireLog struct {
	mu     sync.Mutex
	writes []write
}

func (l *wireLog) add(fromClient bool, b []byte) {
	l.mu.Lock()
	l.writes = append(l.writes, write{fromClient, append([]byte(nil), b...)})
	l.mu.Unlock()
}

// dir is every byte one side wrote.
func (l *wireLog) dir(fromClient bool) []byte {
	var out []byte
	for _, w := range l.writes {
		if w.fromClient == fromClient {
			out = append(out, w.b...)
		}
	}
	return out
}

// pipeHalf is one direction of an in-memory connection with an unbounded
// buffer, so that neither side's writes wait for the other's reads.
type pipeHalf struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    []byte
	closed bool
}

func newPipeHalf() *pipeHalf {
	h := &pipeHalf{}
	h.cond = sync.NewCond(&h.mu)
	return h
}

func (h *pipeHalf) close() {
	h.mu.Lock()
	h.closed = true
	h.cond.Broadcast()
	h.mu.Unlock()
}

type pipeEnd struct {
	r, w       *pipeHalf
	log        *wireLog
	fromClient bool
}

func (e *pipeEnd) Read(p []byte) (int, error) {
	e.r.mu.Lock()
	defer e.r.mu.Unlock()
	for len(e.r.buf) == 0 && !e.r.closed {
		e.r.cond.Wait()
	}
	if len(e.r.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, e.r.buf)
	e.r.buf = e.r.buf[n:]
	return n, nil
}

func (e *pipeEnd) Write(p []byte) (int, error) {
	e.w.mu.Lock()
	defer e.w.mu.Unlock()
	if e.w.closed {
		return 0, net.ErrClosed
	}
	e.log.add(e.fromClient, p)
	e.w.buf = append(e.w.buf, p...)
	e.w.cond.Broadcast()
	return len(p), nil
}

func (e *pipeEnd) Close() error {
	e.w.close()
	e.r.close()
	return nil
}

func (e *pipeEnd) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (e *pipeEnd) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (e *pipeEnd) SetDeadline(time.Time) error      { return nil }
func (e *pipeEnd) SetReadDeadline(time.Time) error  { return nil }
func (e *pipeEnd) SetWriteDeadline(time.Time) error { return nil }
func newPipe(log *wireLog) (client, server net.Conn) {
	c2s, s2c := newPipeHalf(), newPipeHalf()
	return &pipeEnd{r: s2c, w: c2s, log: log, fromClient: true},
		&pipeEnd{r: c2s, w: s2c, log: log, fromClient: false}
}

const testHost = "example.test"

var (
	certOnce sync.Once
	testCert tls.Certificate
	testPool *x509.CertPool
)

// selfSigned makes (once per test binary) an ECDSA P-256 certificate for
// testHost and a pool that trusts it.
func selfSigned(t testing.TB) (tls.Certificate, *x509.CertPool) {
	certOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber:          big.NewInt(1),
			Subject:               pkix.Name{CommonName: testHost},
			DNSNames:              []string{testHost},
			NotBefore:             time.Now().Add(-time.Hour),
			NotAfter:              time.Now().Add(24 * time.Hour),
			KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
			ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			panic(err)
		}
		leaf, err := x509.ParseCertificate(der)
		if err != nil {
			panic(err)
		}
		testCert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
		testPool = x509.NewCertPool()
		testPool.AddCert(leaf)
	})
	return testCert, testPool
}

// Sizes the recorded exchange writes after the handshake.
const (
	reqSmall  = 100
	reqLarge  = 5000
	respBytes = 300
)

// session is one recorded connection.
type session struct {
	log   *wireLog
	state tls.ConnectionState // the client's view
	err   error               // the client's handshake error
}

// runSession runs a TLS handshake between the configs over an in-memory
// pipe; on success the client writes reqSmall and reqLarge bytes in two
// writes, the server answers respBytes, and the client closes.
func runSession(t testing.TB, cc, sc *tls.Config) session {
	t.Helper()
	log := &wireLog{}
	cconn, sconn := newPipe(log)
	client, server := tls.Client(cconn, cc), tls.Server(sconn, sc)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer server.Close()
		if server.Handshake() != nil {
			return
		}
		if _, err := io.ReadFull(server, make([]byte, reqSmall+reqLarge)); err != nil {
			return
		}
		if _, err := server.Write(make([]byte, respBytes)); err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, server) // until the client's close_notify
	}()
	s := session{log: log}
	if s.err = client.Handshake(); s.err == nil {
		s.state = client.ConnectionState()
		_, err1 := client.Write(make([]byte, reqSmall))
		_, err2 := client.Write(make([]byte, reqLarge))
		_, err3 := io.ReadFull(client, make([]byte, respBytes))
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatalf("exchange: %v", err)
		}
	}
	client.Close()
	<-done
	return s
}

// feedStep is one Feed call of a replay.
type feedStep struct {
	fromClient bool
	off        int64 // direction offset of the chunk's first byte
	n          int
	at         int64
}

// replay feeds a recorded connection through a Conn, cutting each run of
// consecutive same-direction writes into chunks of 1..maxChunk bytes
// (maxChunk 0: each run whole), with at increasing by one per Feed.
type replayResult struct {
	conn           Conn
	client, server []Event // copies of every event, in order
	steps          []feedStep
}

func replay(log *wireLog, rng *mrand.Rand, maxChunk int) *replayResult {
	r := &replayResult{}
	var offs [2]int64
	var at int64
	ws := log.writes
	for i := 0; i < len(ws); {
		j := i
		var run []byte
		for ; j < len(ws) && ws[j].fromClient == ws[i].fromClient; j++ {
			run = append(run, ws[j].b...)
		}
		fromClient := ws[i].fromClient
		d := 0
		if fromClient {
			d = 1
		}
		for len(run) > 0 {
			n := len(run)
			if maxChunk > 0 {
				n = min(n, 1+rng.IntN(maxChunk))
			}
			at += 10
			r.steps = append(r.steps, feedStep{fromClient, offs[d], n, at})
			offs[d] += int64(n)
			if fromClient {
				r.client = append(r.client, r.conn.FeedClient(run[:n], n, at)...)
			} else {
				r.server = append(r.server, r.conn.FeedServer(run[:n], n, at)...)
			}
			run = run[n:]
		}
		i = j
	}
	return r
}

// atOf is the at of the replay step that carried the direction's byte at
// offset off.
func (r *replayResult) atOf(fromClient bool, off int64) int64 {
	var steps []feedStep
	for _, s := range r.steps {
		if s.fromClient == fromClient {
			steps = append(steps, s)
		}
	}
	i := sort.Search(len(steps), func(i int) bool { return steps[i].off+int64(steps[i].n) > off })
	if i == len(steps) {
		return -1
	}
	return steps[i].at
}

func kinds(evs []Event, k Kind) []Event {
	var out []Event
	for _, e := range evs {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

func records(evs []Event) []Record {
	var out []Record
	for _, e := range kinds(evs, KindRecord) {
		out = append(out, e.Record)
	}
	return out
}

// trueRecords frames b by its headers, which must be well formed.
func trueRecords(t testing.TB, b []byte) []Record {
	t.Helper()
	var out []Record
	for off := 0; off < len(b); {
		if len(b)-off < recordHeaderLen {
			t.Fatalf("trailing %d bytes", len(b)-off)
		}
		n := int(b[off+3])<<8 | int(b[off+4])
		out = append(out, Record{Type: ContentType(b[off]), Version: uint16(b[off+1])<<8 | uint16(b[off+2]),
			Len: n, Offset: int64(off)})
		off += recordHeaderLen + n
	}
	return out
}

// rec builds a record.
func rec(typ ContentType, body []byte) []byte {
	return append([]byte{byte(typ), 3, 3, byte(len(body) >> 8), byte(len(body))}, body...)
}

// checkInvariants asserts the framing accounting and memory bounds of s
// after total bytes (fed or gapped).
func checkInvariants(t testing.TB, s *Stream, total int64) {
	t.Helper()
	st := s.Stats()
	if s.Offset() != total {
		t.Fatalf("offset %d, fed %d", s.Offset(), total)
	}
	if st.RecordBytes+st.Skipped != s.mark || s.mark > s.off {
		t.Fatalf("accounting: framed %d + skipped %d != mark %d (offset %d)", st.RecordBytes, st.Skipped, s.mark, s.off)
	}
	if pending := s.off - s.mark; pending > 2*(recordHeaderLen+MaxRecordLen) {
		t.Fatalf("%d bytes undecided", pending)
	}
	if s.Buffered() > MaxHelloLen || len(s.hs.buf) > MaxHelloLen {
		t.Fatalf("hello buffer %d (len %d) over %d", s.Buffered(), len(s.hs.buf), MaxHelloLen)
	}
}
