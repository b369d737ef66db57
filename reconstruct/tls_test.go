package reconstruct_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/synth"
)

// A real TLS session (crypto/tls on both ends of an in-memory pipe), its
// bytes as each side wrote them, in order, for a scripted capture.
type tlsWrite struct {
	fromClient bool
	phase      int // 0: the handshake; i: request i and its response
	b          []byte
	wave       int // recordH2Waves: the wave of requests under way (from 1)
}

type tlsRecorder struct {
	mu     sync.Mutex
	phase  int
	wave   int
	writes []tlsWrite
}

func (r *tlsRecorder) setPhase(p int) {
	r.mu.Lock()
	r.phase = p
	r.mu.Unlock()
}

type recordingConn struct {
	net.Conn
	rec    *tlsRecorder
	client bool
}

func (c recordingConn) Write(b []byte) (int, error) {
	c.rec.mu.Lock()
	c.rec.writes = append(c.rec.writes, tlsWrite{c.client, c.rec.phase, append([]byte(nil), b...), c.rec.wave})
	c.rec.mu.Unlock()
	return c.Conn.Write(b)
}

func testCertificate(t testing.TB) tls.Certificate {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{"shop.example.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
}

// recordTLSSession runs a client that loads urls over one keep-alive
// HTTPS/1.1 connection (each answered with bodySize bytes) and closes it,
// and returns every write of both sides in order.
func recordTLSSession(t *testing.T, version uint16, alpn []string, urls []string, bodySize int) []tlsWrite {
	t.Helper()
	return recordTLSSessionKeys(t, version, alpn, urls, bodySize, nil)
}

// recordTLSSessionKeys is recordTLSSession with the client's secrets
// written to keyLog (a key log, as SSLKEYLOGFILE) if not nil.
func recordTLSSessionKeys(t testing.TB, version uint16, alpn []string, urls []string, bodySize int, keyLog io.Writer) []tlsWrite {
	t.Helper()
	return recordTLSSessionWith(t, version, alpn, urls, bodySize, func(cli, _ *tls.Config) { cli.KeyLogWriter = keyLog })
}

// recordTLSSessionWith is recordTLSSession with tweak applied to the
// client's and the server's configurations.
func recordTLSSessionWith(t testing.TB, version uint16, alpn []string, urls []string, bodySize int, tweak func(cli, srv *tls.Config)) []tlsWrite {
	t.Helper()
	cs, ss := net.Pipe()
	rec := &tlsRecorder{}
	cert := testCertificate(t)
	srvCfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: version, MaxVersion: version, NextProtos: alpn}
	cliCfg := &tls.Config{ServerName: "shop.example.test", InsecureSkipVerify: true,
		MinVersion: version, MaxVersion: version, NextProtos: alpn}
	tweak(cliCfg, srvCfg)
	srv := tls.Server(recordingConn{ss, rec, false}, srvCfg)
	done := make(chan error, 1)
	go func() {
		defer srv.Close()
		r := bufio.NewReader(srv)
		for {
			req, err := http.ReadRequest(r)
			if err != nil {
				done <- nil
				return
			}
			io.Copy(io.Discard, req.Body)
			body := strings.Repeat("x", bodySize)
			fmt.Fprintf(srv, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		}
	}()
	cli := tls.Client(recordingConn{cs, rec, true}, cliCfg)
	if err := cli.Handshake(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(cli)
	for i, u := range urls {
		rec.setPhase(i + 1)
		if _, err := fmt.Fprintf(cli, "GET %s HTTP/1.1\r\nHost: shop.example.test\r\nUser-Agent: test\r\n\r\n", u); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	rec.setPhase(-1)
	cli.Close()
	<-done
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.writes
}

// scriptTLS scripts a recorded session as the capture point beside the
// server saw it: the client is D away, the server answers a handshake
// flight in serverHS and a request in serverHTTP, and the client sends
// each flight as soon as the server's previous one reached it. It returns
// the capture times of the client's Finished (its last handshake write),
// of each request's last byte and of each response's first and last
// bytes.
type tlsTimes struct {
	est, finished                int64
	serverAfter                  int64 // the last server handshake byte after the client's Finished
	reqLast, respFirst, respLast []int64
	// respStart: each response's first byte (respFirst is its first
	// record's last, when the client can read it).
	respStart []int64
}

func scriptTLS(c *synth.Conn, writes []tlsWrite, serverHS, serverHTTP int64) tlsTimes {
	return scriptTLSHole(c, writes, serverHS, serverHTTP, 0)
}

// scriptTLSHole is scriptTLS with the first segment of response holePhase
// (0: none) never captured.
func scriptTLSHole(c *synth.Conn, writes []tlsWrite, serverHS, serverHTTP int64, holePhase int) tlsTimes {
	var tt tlsTimes
	tt.est = handshake(c, synth.T(0))
	at := tt.est
	prevClient := true
	for _, w := range writes {
		if w.fromClient {
			if !prevClient {
				at += 2 * D // the server's flight reached the client, which answers at once
			}
			c.Client(at, w.b)
			switch {
			case w.phase == 0:
				tt.finished = at
			case w.phase > 0:
				tt.reqLast = append(tt.reqLast, at)
			}
			at += 50 * us
		} else {
			if prevClient {
				if w.phase > 0 {
					at += serverHTTP
				} else {
					at += serverHS
				}
			}
			b := w.b
			skipped := 0
			if w.phase == holePhase && holePhase > 0 && (len(tt.respFirst) < w.phase) {
				n := min(1448, len(b))
				c.SkipServer(n)
				b = b[n:]
				skipped = n
			}
			times := []int64{at}
			if len(b) > 0 {
				times = c.ServerMSS(at, b, 1448, 20*us)
			}
			if w.phase == 0 && tt.finished > 0 {
				tt.serverAfter = times[len(times)-1]
			}
			if w.phase > 0 {
				if len(tt.respFirst) < w.phase {
					// The client has the response's first byte when its
					// first record is whole.
					tt.respFirst = append(tt.respFirst, recordDoneAt(w.b, skipped, times))
					tt.respStart = append(tt.respStart, at)
					tt.respLast = append(tt.respLast, 0)
				}
				tt.respLast[w.phase-1] = times[len(times)-1]
			}
			at = times[len(times)-1] + 20*us
			c.ClientAck(at + 2*D - 20*us)
		}
		prevClient = w.fromClient
	}
	return tt
}

// recordDoneAt is when the first TLS record of write b, sent as the
// segments at times (its first skipped bytes never captured), passed the
// capture point whole.
func recordDoneAt(b []byte, skipped int, times []int64) int64 {
	last := len(b) - 1
	if len(b) >= 5 {
		last = min(last, 5+int(b[3])<<8|int(b[4])-1)
	}
	i := max(last-skipped, 0) / 1448
	return times[min(i, len(times)-1)]
}

// Keyless HTTPS/1.1 against the truth of real TLS 1.2 and 1.3 sessions:
// Tconn is the TCP handshake, Ttls runs from connected to the client's
// Finished, and each request/response turn of application data is timed
// like cleartext; the host comes from SNI, the URL is unknown.
func TestKeylessHTTPS(t *testing.T) {
	const serverHS, serverHTTP = 300 * us, 30 * ms
	cases := []struct {
		name    string
		version uint16
		offered []string
	}{
		{"TLS 1.2", tls.VersionTLS12, []string{"http/1.1"}},
		{"TLS 1.3", tls.VersionTLS13, []string{"http/1.1"}},
		// A browser offers h2 too; TLS 1.3 hides that the server chose
		// HTTP/1.1, and the turns must still be timed.
		{"TLS 1.3 h2 offered", tls.VersionTLS13, []string{"h2", "http/1.1"}},
	}
	for _, tc := range cases {
		version := tc.version
		t.Run(tc.name, func(t *testing.T) {
			writes := recordTLSSessionWith(t, version, []string{"http/1.1"}, []string{"/", "/app.js"}, 20000,
				func(cli, _ *tls.Config) { cli.NextProtos = tc.offered })
			var tt tlsTimes
			out := analyze(t, defaultOpts(), reconstruct.Config{}, func(w *synth.Writer) {
				c := w.Conn(client, netip.AddrPortFrom(server.Addr(), 443), 7000, 9000)
				tt = scriptTLS(c, writes, serverHS, serverHTTP)
				c.ClientFIN(tt.respLast[len(tt.respLast)-1] + 3*D)
				c.ServerFIN(tt.respLast[len(tt.respLast)-1] + 3*D + 100*us)
				c.ClientAck(tt.respLast[len(tt.respLast)-1] + 5*D)
			})
			if len(tt.reqLast) != 2 {
				t.Fatalf("script: %d requests", len(tt.reqLast))
			}
			// The client is done with TLS when its Finished leaves, or in a
			// full TLS 1.2 handshake when the server's reaches it.
			ready := tt.finished
			if version == tls.VersionTLS12 {
				ready = max(ready, tt.serverAfter+2*D)
			}
			conn := one(t, "connection", out.conns)
			if conn.Flags&reconstruct.FlagTLS == 0 || conn.SNI != "shop.example.test" || conn.TLSVersion != version ||
				conn.Ttls != ready-tt.est {
				t.Errorf("connection: flags %v sni %q version %#x ttls %v (want %v)", conn.Flags, conn.SNI, conn.TLSVersion,
					time.Duration(conn.Ttls), time.Duration(ready-tt.est))
			}
			if len(out.txs) != 2 {
				t.Fatalf("%d transactions, want 2: %+v", len(out.txs), out.txs)
			}
			first := want{start: synth.T(0) - D, tconn: 2*D + 100*us, ttls: ready - tt.est,
				trequest: tt.reqLast[0] - ready, tserver: tt.respFirst[0] - tt.reqLast[0] + 2*D,
				ttransfer: tt.respLast[0] - tt.respFirst[0]}
			first.total = first.tconn + first.ttls + first.trequest + first.tserver + first.ttransfer
			checkTLSTx(t, out.txs[0], first)
			second := want{start: tt.reqLast[1] - D, tserver: tt.respFirst[1] - tt.reqLast[1] + 2*D,
				ttransfer: tt.respLast[1] - tt.respFirst[1]}
			second.total = second.tserver + second.ttransfer
			checkTLSTx(t, out.txs[1], second)
			for _, tx := range out.txs {
				if tx.Flags&reconstruct.FlagTLS == 0 || tx.Host != "shop.example.test" || tx.URL != "" {
					t.Errorf("tx %d: flags %v host %q url %q", tx.Index, tx.Flags, tx.Host, tx.URL)
				}
			}
			if out.stats.TLSConnections != 1 || out.stats.MemoryInUse != 0 || out.stats.HTTP2Connections != 0 || conn.Flags&reconstruct.FlagHTTP2 != 0 {
				t.Errorf("stats: %d TLS connections, %d HTTP/2, %d bytes counted after the end; flags %v", out.stats.TLSConnections,
					out.stats.HTTP2Connections, out.stats.MemoryInUse, conn.Flags)
			}
		})
	}
}

func checkTLSTx(t *testing.T, tx *reconstruct.Transaction, w want) {
	t.Helper()
	got := [6]int64{tx.Start, tx.Tconn, tx.Ttls, tx.Trequest, tx.Tserver, tx.Ttransfer}
	exp := [6]int64{w.start, w.tconn, w.ttls, w.trequest, w.tserver, w.ttransfer}
	if got != exp || tx.Total != w.total {
		t.Errorf("tx %d: start/tconn/ttls/trequest/tserver/ttransfer %v total %v, want %v total %v", tx.Index,
			durs(got[:]), time.Duration(tx.Total), durs(exp[:]), time.Duration(w.total))
	}
}

func durs(v []int64) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x)
	}
	return out
}

// OpenSSL (nginx, HAProxy) sends TLS 1.3 session tickets when the
// client's Finished comes: application-data records right behind the
// client's first request, before the response. They are not the
// response: Tserver runs to the response's first record.
func TestKeylessHTTPSTicketsAfterFinished(t *testing.T) {
	// A large response, and an empty one as small as a ticket: held with
	// the tickets, it is taken as the response when nothing else answers.
	// The tickets come 300 µs after the client's Finished, or 5 ms (a
	// loaded nginx: on the HTTPS testbed tickets 2.1 ms late were taken
	// for the response).
	for _, c := range []struct {
		size  int
		delay int64
	}{{20000, 300 * us}, {0, 300 * us}, {20000, 5 * ms}, {0, 5 * ms}} {
		size := c.size
		writes := recordTLSSession(t, tls.VersionTLS13, []string{"http/1.1"}, []string{"/"}, size)
		var withTickets []tlsWrite
		for i, w := range writes {
			withTickets = append(withTickets, w)
			if w.fromClient && w.phase == 1 && (i+1 == len(writes) || !writes[i+1].fromClient || writes[i+1].phase != 1) {
				for range 2 {
					ticket := make([]byte, 5+250)
					ticket[0], ticket[1], ticket[2], ticket[4] = 23, 3, 3, 250
					rand.Read(ticket[5:])
					withTickets = append(withTickets, tlsWrite{fromClient: false, phase: 0, b: ticket})
				}
			}
		}
		var tt tlsTimes
		c2 := c
		out := analyze(t, defaultOpts(), reconstruct.Config{}, func(w *synth.Writer) {
			c := w.Conn(client, netip.AddrPortFrom(server.Addr(), 443), 7100, 9100)
			tt = scriptTLS(c, withTickets, c2.delay, 30*ms)
			end := tt.respLast[0] + 3*D
			c.ServerFIN(end)
			c.ClientFIN(end + 2*D)
			c.ServerAck(end + 2*D + 100*us)
		})
		tx := one(t, "transaction", out.txs)
		if got, want := tx.Tserver, tt.respFirst[0]-tt.reqLast[0]+2*D; got != want {
			t.Errorf("body %d, tickets after %v: tserver %v, want %v (the tickets are no response)", size, time.Duration(c2.delay), time.Duration(got), time.Duration(want))
		}
		if got, want := tx.Ttransfer, tt.respLast[0]-tt.respFirst[0]; got != want {
			t.Errorf("body %d, tickets after %v: ttransfer %v, want %v", size, time.Duration(c2.delay), time.Duration(got), time.Duration(want))
		}
	}
}

// A busy server sends its TLS 1.3 tickets long after the client's
// Finished (32 ms on a loaded testbed, past ticketWindow), and a client
// that resumed its session may send its request only after them: records
// before any request answer nothing and make no transaction, whether or
// not the client offered h2 (TLS 1.3 then hides the server's choice).
func TestKeylessHTTPSLateTicketsBeforeRequest(t *testing.T) {
	for _, alpn := range [][]string{{"http/1.1"}, {"h2", "http/1.1"}} {
		writes := recordTLSSessionWith(t, tls.VersionTLS13, alpn, []string{"/"}, 3000, func(_, srv *tls.Config) {
			srv.NextProtos = []string{"http/1.1"}
		})
		var withTickets []tlsWrite
		for i, w := range writes {
			withTickets = append(withTickets, w)
			if w.fromClient && w.phase == 0 && i+1 < len(writes) && writes[i+1].fromClient && writes[i+1].phase == 1 {
				ticket := make([]byte, 5+282) // Chromium's resumption ticket on the testbed
				ticket[0], ticket[1], ticket[2], ticket[3], ticket[4] = 23, 3, 3, 282>>8, 282&0xff
				rand.Read(ticket[5:])
				withTickets = append(withTickets, tlsWrite{fromClient: false, phase: 0, b: ticket})
			}
		}
		if len(withTickets) != len(writes)+1 {
			t.Fatalf("ALPN %v: no place for the ticket between the Finished and the request", alpn)
		}
		var tt tlsTimes
		out := analyze(t, defaultOpts(), reconstruct.Config{}, func(w *synth.Writer) {
			c := w.Conn(client, netip.AddrPortFrom(server.Addr(), 443), 7300, 9300)
			tt = scriptTLS(c, withTickets, 32*ms, 30*ms)
			end := tt.respLast[0] + 3*D
			c.ServerFIN(end)
			c.ClientFIN(end + 2*D)
			c.ServerAck(end + 2*D + 100*us)
		})
		tx := one(t, "transaction", out.txs)
		if tx.Flags&reconstruct.FlagNoRequest != 0 || tx.RequestFirst == 0 {
			t.Errorf("ALPN %v: transaction flags %v, request at %d: the ticket was taken for a response", alpn, tx.Flags, tx.RequestFirst)
		}
		if got, want := tx.Tserver, tt.respFirst[0]-tt.reqLast[0]+2*D; got != want {
			t.Errorf("ALPN %v: tserver %v, want %v", alpn, time.Duration(got), time.Duration(want))
		}
	}
}

// A hole over a record header (bytes the capture never got) breaks the
// record framing: the connection's turns are then read from the bytes, as
// with a short snap length, and the transaction with the hole says so.
func TestKeylessHTTPSHoleOverRecordHeader(t *testing.T) {
	writes := recordTLSSession(t, tls.VersionTLS13, []string{"http/1.1"}, []string{"/", "/b"}, 20000)
	var tt tlsTimes
	out := analyze(t, defaultOpts(), reconstruct.Config{}, func(w *synth.Writer) {
		c := w.Conn(client, netip.AddrPortFrom(server.Addr(), 443), 7300, 9300)
		tt = scriptTLSHole(c, writes, 300*us, 30*ms, 1)
		c.ServerFIN(tt.respLast[1] + 3*D)
	})
	if len(out.txs) != 2 || out.stats.TLSFramingLost != 1 {
		t.Fatalf("%d transactions, framing lost %d times", len(out.txs), out.stats.TLSFramingLost)
	}
	if out.txs[0].Flags&reconstruct.FlagHole == 0 {
		t.Errorf("first transaction flags %v, want hole", out.txs[0].Flags)
	}
	tx := out.txs[1]
	// Without framing no record is known whole: bytes are timed as they come.
	if got, want := tx.Tserver, tt.respStart[1]-tt.reqLast[1]+2*D; got != want || tx.Flags&reconstruct.FlagTLS == 0 {
		t.Errorf("second transaction: tserver %v, want %v; flags %v", time.Duration(got), time.Duration(want), tx.Flags)
	}
}
