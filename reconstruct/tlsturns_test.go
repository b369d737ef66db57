package reconstruct_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/reconstruct/tlsdecrypt"
	"github.com/rtmon/rtmon/synth"
)

// recordContinueSession runs one POST with "Expect: 100-continue" over a
// real TLS session: the client sends the head, waits for the server's
// 100 Continue, sends the body and reads the final response (phase 1 the
// head and the interim, 2 the body and the response). The server answers
// the interim as Go's and nginx's do, with the 25-byte status line alone.
func recordContinueSession(t testing.TB, version uint16, suites []uint16, keyLog io.Writer) []tlsWrite {
	t.Helper()
	return recordPostSession(t, version, suites, keyLog, true, 5000)
}

// recordPostSession is recordContinueSession with or without the Expect
// header (without it the body follows the head at once, in phase 1) and
// a body of size bytes, written at once (several records past 16 KiB).
func recordPostSession(t testing.TB, version uint16, suites []uint16, keyLog io.Writer, expect bool, size int) []tlsWrite {
	t.Helper()
	cs, ss := net.Pipe()
	rec := &tlsRecorder{}
	srvCfg := &tls.Config{Certificates: []tls.Certificate{testCertificate(t)}, MinVersion: version, MaxVersion: version,
		CipherSuites: suites}
	cliCfg := &tls.Config{ServerName: "shop.example.test", InsecureSkipVerify: true, MinVersion: version,
		MaxVersion: version, CipherSuites: suites, KeyLogWriter: keyLog}
	srv := tls.Server(recordingConn{ss, rec, false}, srvCfg)
	done := make(chan error, 1)
	go func() {
		defer srv.Close()
		r := bufio.NewReader(srv)
		req, err := http.ReadRequest(r)
		if err != nil {
			done <- err
			return
		}
		if req.Header.Get("Expect") == "100-continue" {
			io.WriteString(srv, "HTTP/1.1 100 Continue\r\n\r\n")
		}
		io.Copy(io.Discard, req.Body)
		body := strings.Repeat("y", 3000)
		fmt.Fprintf(srv, "HTTP/1.1 201 Created\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		io.Copy(io.Discard, r) // to the client's close_notify: a pipe's writes wait for the reader
		done <- nil
	}()
	cli := tls.Client(recordingConn{cs, rec, true}, cliCfg)
	if err := cli.Handshake(); err != nil {
		t.Fatal(err)
	}
	upload := strings.Repeat("u", size)
	rec.setPhase(1)
	expectHeader := ""
	if expect {
		expectHeader = "Expect: 100-continue\r\n"
	}
	fmt.Fprintf(cli, "POST /upload HTTP/1.1\r\nHost: shop.example.test\r\n%sContent-Length: %d\r\n\r\n", expectHeader, len(upload))
	r := bufio.NewReader(cli)
	if expect {
		interim, err := http.ReadResponse(r, nil)
		if err != nil || interim.StatusCode != 100 {
			t.Fatalf("interim response: %v %v", interim, err)
		}
		rec.setPhase(2)
	}
	io.WriteString(cli, upload)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	rec.setPhase(-1)
	cli.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.writes
}

// A POST whose client waits for 100 Continue is one exchange: the
// request runs from its head to the end of its body, and the server's
// time from there to the final response, as in cleartext; without keys
// the interim is told by its record's length under each AEAD suite.
func TestKeylessHTTPSContinue(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version uint16
		suites  []uint16
	}{
		{"TLS 1.3", tls.VersionTLS13, nil},
		{"TLS 1.2 AES-GCM", tls.VersionTLS12, []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}},
		{"TLS 1.2 ChaCha20", tls.VersionTLS12, []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}},
	} {
		kl := tlsdecrypt.NewKeyLog(tlsdecrypt.KeyLogOptions{})
		writes := recordContinueSession(t, tc.version, tc.suites, kl)
		for _, keys := range []bool{false, true} {
			cfg := reconstruct.Config{}
			if keys {
				cfg.KeyLog = kl
			}
			var head, body, respFirst, respLast int64
			out := analyze(t, defaultOpts(), cfg, func(w *synth.Writer) {
				c := w.Conn(client, netip.AddrPortFrom(server.Addr(), 443), 7500, 9500)
				at := handshake(c, synth.T(0))
				prevClient := true
				for _, wr := range writes {
					if wr.fromClient {
						if !prevClient {
							at += 2 * D
						}
						c.Client(at, wr.b)
						switch wr.phase {
						case 1:
							head = at
						case 2:
							body = at
						}
						at += 50 * us
						prevClient = true
						continue
					}
					if prevClient {
						at += 20 * ms // the server's turn
					}
					times := c.ServerMSS(at, wr.b, 1448, 20*us)
					if wr.phase == 2 {
						if respFirst == 0 {
							respFirst = recordDoneAt(wr.b, 0, times)
						}
						respLast = times[len(times)-1]
					}
					at = times[len(times)-1] + 20*us
					c.ClientAck(at + 2*D)
					prevClient = false
				}
				c.ClientFIN(at + 3*D)
				c.ServerFIN(at + 3*D + 100*us)
				c.ClientAck(at + 5*D)
			})
			name := fmt.Sprintf("%s, keys %v", tc.name, keys)
			tx := one(t, name+": transaction", out.txs)
			if tx.Flags&reconstruct.FlagContinued == 0 || keys && (tx.Method != "POST" || tx.Status != 201) {
				t.Errorf("%s: %s %d flags %v, want POST 201 flagged continued", name, tx.Method, tx.Status, tx.Flags.Names())
			}
			got := []int64{tx.RequestFirst, tx.RequestLast, tx.ResponseFirst, tx.ResponseLast}
			if want := []int64{head, body, respFirst, respLast}; !slices.Equal(got, want) {
				t.Errorf("%s: request first/last, response first/last %v, want %v", name, durs(sub(got)), durs(sub(want)))
			}
		}
	}
}

func sub(v []int64) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = x - synth.Base
	}
	return out
}

// A client that sends its next request before it has the whole answer
// to the previous one (pipelining) leaves record turns whose split
// cannot be known without keys: both exchanges are flagged. One that
// waits for the answer's end, as browsers and curl do, is not.
func TestKeylessHTTPSPipeliningFlagged(t *testing.T) {
	writes := recordTLSSession(t, tls.VersionTLS13, []string{"http/1.1"}, []string{"/a", "/b"}, 40000)
	for _, pipelined := range []bool{false, true} {
		out := analyze(t, defaultOpts(), reconstruct.Config{}, func(w *synth.Writer) {
			o := synth.DefaultConnOptions()
			o.ClientRTT = 2 * D // the client acknowledges what reached it
			c := w.ConnWith(client, netip.AddrPortFrom(server.Addr(), 443), 7600, 9600, o)
			at := handshake(c, synth.T(0))
			prevClient := true
			var firstOfTurn int64
			for _, wr := range writes {
				if wr.fromClient {
					switch {
					case wr.phase == 2 && pipelined:
						at = firstOfTurn + 2*D // as the answer's first bytes reached the client
					case !prevClient:
						at += 2 * D
					}
					c.Client(at, wr.b)
					at += 50 * us
					prevClient = true
					continue
				}
				if prevClient {
					at += 20 * ms
					firstOfTurn = at
				}
				times := c.ServerMSS(at, wr.b, 1448, 500*us)
				at = times[len(times)-1] + 20*us
				prevClient = false
			}
			c.ClientAck(at + 2*D)
			c.ClientFIN(at + 3*D)
			c.ServerFIN(at + 3*D + 100*us)
			c.ClientAck(at + 5*D)
		})
		if len(out.txs) != 2 {
			t.Fatalf("pipelined %v: %d transactions, want 2", pipelined, len(out.txs))
		}
		for _, tx := range out.txs {
			if got := tx.Flags&reconstruct.FlagTurnsAmbiguous != 0; got != pipelined {
				t.Errorf("pipelined %v: tx %d flags %v (%v)", pipelined, tx.Index, tx.Flags.Names(), time.Duration(tx.Total))
			}
		}
	}
}

// postWrites splits a recorded POST session: the handshake's writes, the
// request head, the body (all later client writes), the interim if the
// client asked for one, and the response.
func postWrites(writes []tlsWrite, expect bool) (hs []tlsWrite, head, body, interim, resp []byte) {
	for _, w := range writes {
		switch {
		case w.phase == 0:
			hs = append(hs, w)
		case w.phase < 0:
		case w.fromClient && head == nil:
			head = w.b
		case w.fromClient:
			body = append(body, w.b...)
		case expect && interim == nil:
			interim = w.b
		default:
			resp = append(resp, w.b...)
		}
	}
	return hs, head, body, interim, resp
}

// closeAfter ends c after the response's last byte at last: the client
// acknowledges it, then both sides close.
func closeAfter(c *synth.Conn, last int64) {
	c.ClientAck(last + 2*D)
	c.ClientFIN(last + 3*D)
	c.ServerFIN(last + 3*D + 100*us)
	c.ClientAck(last + 5*D)
}

// checkPost: one transaction, its request first/last and response
// first/last as want, flagged continued for an Expect POST only.
func checkPost(t *testing.T, txs []*reconstruct.Transaction, expect bool, want []int64) {
	t.Helper()
	tx := one(t, fmt.Sprintf("expect %v: transaction", expect), txs)
	got := []int64{tx.RequestFirst, tx.RequestLast, tx.ResponseFirst, tx.ResponseLast}
	if !slices.Equal(got, want) || (tx.Flags&reconstruct.FlagContinued != 0) != expect {
		t.Errorf("expect %v: request first/last, response first/last %v, want %v; flags %v", expect, durs(sub(got)), durs(sub(want)), tx.Flags.Names())
	}
}

// ticket is a TLS 1.3 record of 298 bytes of application data, a session
// ticket's size.
func ticket() []byte {
	b := make([]byte, 5+298)
	b[0], b[1], b[2], b[3], b[4] = 23, 3, 3, 1, 42
	return b
}

// OpenSSL (nginx) sends two session tickets as the client's TLS 1.3
// Finished reaches it: one may pass before a request's head, one after.
// A body in several records then comes partly before they can have
// reached the client and partly after (its later records acknowledge
// them); and with Expect, the 100 Continue follows them. Neither the
// tickets nor the interim is the response: one transaction, from the
// head to the body's last record, answered by the final response (seen
// on the HTTPS testbed: a 100 KB POST made eight transactions).
func TestKeylessHTTPSBodyAfterTickets(t *testing.T) {
	for _, expect := range []bool{false, true} {
		hs, headW, body, interim, resp := postWrites(recordPostSession(t, tls.VersionTLS13, nil, nil, expect, 40000), expect)
		var head, bodyLast, respFirst, respLast int64
		out := analyze(t, defaultOpts(), reconstruct.Config{}, func(w *synth.Writer) {
			o := synth.DefaultConnOptions()
			o.ClientRTT = 2 * D // the client acknowledges what reached it
			c := w.ConnWith(client, netip.AddrPortFrom(server.Addr(), 443), 7700, 9700, o)
			tt := scriptTLS(c, hs, 300*us, 0)
			fin := tt.finished
			c.Server(fin+300*us, ticket())
			head = fin + 400*us
			c.Client(head, headW)
			c.Server(fin+600*us, ticket())
			at := head + 100*us // the body right behind the head
			if expect {
				c.Server(fin+800*us, interim)
				at = fin + 800*us + 2*D
			}
			half := min(len(body), 20000)
			c.Client(at, body[:half]) // what the window allowed
			bodyLast = at
			if half < len(body) {
				bodyLast = at + 2*D // the rest as the server's ACKs come back
				c.Client(bodyLast, body[half:])
			}
			times := c.ServerMSS(bodyLast+20*ms, resp, 1448, 20*us)
			respFirst, respLast = recordDoneAt(resp, 0, times), times[len(times)-1]
			closeAfter(c, respLast)
		})
		checkPost(t, out.txs, expect, []int64{head, bodyLast, respFirst, respLast})
	}
}

// A busy server may write its TLS 1.3 session tickets only with its first
// answer, long after the client's Finished: nginx sent them 53 ms late,
// right before a 100 Continue, and the tickets and the interim were taken
// for a response of their own (two transactions on the HTTPS testbed).
// Small records that come past the ticket window are held until what
// follows tells: an interim (they were tickets), or anything else (they
// were the response's first records, as for a POST without Expect whose
// response opens with a small record).
func TestKeylessHTTPSContinueAfterLateTickets(t *testing.T) {
	for _, expect := range []bool{true, false} {
		hs, headW, body, interim, resp := postWrites(recordPostSession(t, tls.VersionTLS13, nil, nil, expect, 5000), expect)
		var head, bodyLast, respFirst, respLast int64
		out := analyze(t, defaultOpts(), reconstruct.Config{}, func(w *synth.Writer) {
			o := synth.DefaultConnOptions()
			o.ClientRTT = 2 * D
			c := w.ConnWith(client, netip.AddrPortFrom(server.Addr(), 443), 7800, 9800, o)
			tt := scriptTLS(c, hs, 300*us, 0)
			fin := tt.finished
			head = fin + 400*us
			c.Client(head, headW)
			late := fin + 53*ms
			if expect {
				c.Server(late, ticket())
				c.Server(late+100*us, ticket())
				c.Server(late+300*us, interim)
				bodyLast = late + 300*us + 2*D
				c.Client(bodyLast, body)
				times := c.ServerMSS(bodyLast+20*ms, resp, 1448, 20*us)
				respFirst, respLast = recordDoneAt(resp, 0, times), times[len(times)-1]
			} else {
				// The body right behind the head; the response opens
				// with a small record of its own, past the window.
				bodyLast = head + 100*us
				if len(body) > 0 {
					c.Client(bodyLast, body)
				} else {
					bodyLast = head
				}
				c.Server(late, ticket())
				respFirst = late
				times := c.ServerMSS(late+200*us, resp, 1448, 20*us)
				respLast = times[len(times)-1]
			}
			closeAfter(c, respLast)
		})
		checkPost(t, out.txs, expect, []int64{head, bodyLast, respFirst, respLast})
	}
}
