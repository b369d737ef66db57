package reconstruct_test

import (
	"cmp"
	"crypto/rand"
	"crypto/tls"
	"net/http"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/reconstruct/tlsdecrypt"
	"github.com/rtmon/rtmon/synth"
)

// h2Handshake records a real TLS handshake offering the protocols in
// offered (the server takes h2) and returns its writes up to the first
// application data, with the version and suite the server chose.
func h2Handshake(t *testing.T, version uint16, offered []string) (writes []tlsWrite, suite uint16) {
	t.Helper()
	all := recordH2WavesOffering(t, version, offered, nil, http.NotFoundHandler(), []h2Fetch{{path: "/"}})
	for _, w := range all {
		if w.b[0] == 23 { // application data: the handshake is over
			break
		}
		if !w.fromClient && suite == 0 {
			// record 5, handshake 4, version 2, random 32, session id
			sid := int(w.b[5+4+2+32])
			at := 5 + 4 + 2 + 32 + 1 + sid
			suite = uint16(w.b[at])<<8 | uint16(w.b[at+1])
		}
		writes = append(writes, w)
	}
	return writes, suite
}

// sealed is an application-data record of n bytes of plaintext under the
// suite (its contents random: without keys only the length counts).
func sealed(t *testing.T, version, suite uint16, n int) []byte {
	t.Helper()
	l, ok := tlsdecrypt.SealedLen(version, suite, n)
	if !ok {
		t.Fatalf("suite %#04x at %#04x: overhead unknown", suite, version)
	}
	b := make([]byte, 5+l)
	b[0], b[1], b[2], b[3], b[4] = 23, 3, 3, byte(l>>8), byte(l)
	rand.Read(b[5:])
	return b
}

// A keyless HTTP/2 connection as a browser and a server use it, scripted
// record by record with the lengths real stacks give their frames: the
// client's preface and first HEADERS at once; the server's SETTINGS and
// SETTINGS ACK; the page's answer, and a second tab's page asked for
// before it reached the client; a round trip in, the client sends its
// WINDOW_UPDATEs and asks for two objects; the client's SETTINGS ACK
// (which tells TLS 1.3's hidden protocol) and a last WINDOW_UPDATE as it
// reads the end. Two seconds idle, a PING and its ACK, then a repeat GET
// whose HEADERS are 22 bytes under HPACK (a WINDOW_UPDATE with a
// SETTINGS ACK is as long) and its answer; the next GET, 26 bytes, a
// millisecond after that answer reached the client, as Go's client
// sends it, and its answer; a page and two objects, the second asked
// for while the first waited on a slow back end; a GOAWAY a minute
// later. Four turns, each from its first request to its answer's last
// record.
func TestKeylessHTTP2TurnsScripted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version uint16
		offered []string
	}{
		{"TLS 1.3 h2 and http/1.1 offered", tls.VersionTLS13, []string{"h2", "http/1.1"}},
		{"TLS 1.3 h2 only", tls.VersionTLS13, []string{"h2"}},
		{"TLS 1.2", tls.VersionTLS12, []string{"h2", "http/1.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs, suite := h2Handshake(t, tc.version, tc.offered)
			rec := func(n int) []byte { return sealed(t, tc.version, suite, n) }
			var req1, ans1First, ans1Last, req2, ans2First, ans2Last, req3, ans3First, ans3Last, req4, ans4First, ans4Last int64
			out := analyze(t, defaultOpts(), reconstruct.Config{}, func(w *synth.Writer) {
				c := w.Conn(client, netip.AddrPortFrom(server.Addr(), 443), 7700, 9700)
				c.Opts.ClientRTT = 2 * D // its ACKs cover what reached it
				tt := scriptTLS(c, hs, 300*us, 30*ms)
				at := max(tt.finished, tt.serverAfter+2*D) + 100*us
				c.Client(at, rec(24+9+4*6+13)) // preface, SETTINGS, WINDOW_UPDATE
				req1 = at + 20*us
				c.Client(req1, rec(310)) // HEADERS of the page
				c.Server(at+300*us, rec(9+3*6+13))
				c.Server(at+350*us, rec(9)) // SETTINGS ACK
				ans1First = at + 20*ms
				c.ServerMSS(ans1First, append(rec(4000), rec(10000)...), 1448, 20*us) // the first window
				// A second tab's page, asked for before the first answer
				// reached the client (under TLS 1.3 still read as HTTP/1.1:
				// a turn of its own until the SETTINGS ACK comes).
				c.Client(ans1First+1*ms, rec(120))
				c.Client(at+300*us+2*D, rec(9)) // its SETTINGS ACK
				// A round trip into the page: the server sends the rest as
				// the client's ACK opens its window, and the client, which
				// read the first part, sends a WINDOW_UPDATE and asks for
				// two objects, before the rest reached it.
				c.ClientAck(ans1First + 2*D)
				c.ServerMSS(ans1First+2*D+100*us, append(rec(16000), rec(5000)...), 1448, 20*us)
				c.Client(ans1First+2*D+500*us, rec(13))
				c.Client(ans1First+2*D+2*ms, rec(64))
				c.Client(ans1First+2*D+2*ms+20*us, rec(58))
				more := c.ServerMSS(ans1First+2*D+15*ms, append(rec(9000), rec(300)...), 1448, 20*us)
				ans1Last = more[len(more)-1] + 20*us
				c.Server(ans1Last, rec(9)) // an empty DATA frame ends a stream
				c.ClientAck(ans1Last + 2*D)
				c.Client(ans1Last+2*D+1*ms, rec(26)) // WINDOW_UPDATEs as it reads the end
				idle := ans1Last + 2*time.Second.Nanoseconds()
				c.Client(idle, rec(17)) // PING
				c.Server(idle+100*us, rec(17))
				req2 = idle + time.Second.Nanoseconds()
				c.Client(req2, rec(22))
				ans2First = req2 + 12*ms
				last := c.ServerMSS(ans2First, rec(2500), 1448, 20*us)
				ans2Last = last[len(last)-1]
				// The next GET as soon as that answer is read, 26 bytes
				// (as long as two WINDOW_UPDATEs).
				req3 = ans2Last + 2*D + 1*ms
				c.Client(req3, rec(26))
				ans3First = req3 + 5*ms
				c.Server(ans3First, rec(1200))
				ans3Last = ans3First
				c.ClientAck(ans3Last + 2*D)
				// Half a second later a page whose first answer comes at
				// once; an object asked for before that answer reached the
				// client; and, once the client had it, another object
				// while the first one's slow back end had sent nothing:
				// the turn waits for both.
				req4 = ans3Last + 500*ms
				c.Client(req4, rec(60))
				ans4First = req4 + 5*ms
				c.Server(ans4First, rec(3000))
				c.Client(ans4First+1*ms, rec(55))
				c.ClientAck(ans4First + 2*D)
				c.Client(ans4First+2*D+5*ms, rec(50))
				slow := c.ServerMSS(ans4First+2*D+100*ms, append(rec(4000), rec(2000)...), 1448, 20*us)
				ans4Last = slow[len(slow)-1]
				c.ClientAck(ans4Last + 2*D)
				goaway := ans4Last + 60*time.Second.Nanoseconds()
				c.Server(goaway, rec(17))
				c.ClientFIN(goaway + 2*D)
				c.ServerFIN(goaway + 2*D + 100*us)
				c.ClientAck(goaway + 4*D)
			})
			if len(out.txs) != 4 {
				for _, tx := range out.txs {
					t.Logf("turn %d: %d..%d, %d..%d, flags %v", tx.Index, tx.RequestFirst, tx.RequestLast, tx.ResponseFirst, tx.ResponseLast, tx.Flags)
				}
				t.Fatalf("%d turns, want 4", len(out.txs))
			}
			for i, want := range [][3]int64{{req1, ans1First, ans1Last}, {req2, ans2First, ans2Last}, {req3, ans3First, ans3Last}, {req4, ans4First, ans4Last}} {
				tx := out.txs[i]
				est := reconstruct.FlagTLS | reconstruct.FlagHTTP2 | reconstruct.FlagTurnEstimate
				if tx.Index != i || tx.Flags&est != est || tx.Flags&(reconstruct.FlagNoResponse|reconstruct.FlagIncomplete) != 0 {
					t.Errorf("turn %d: index %d, flags %v", i, tx.Index, tx.Flags)
				}
				if err := tx.Invariants(); err != nil {
					t.Errorf("turn %d: %v", i, err)
				}
				// The answer begins for the client when its first record
				// is whole: with 1448-byte segments, its third.
				if tx.RequestFirst != want[0] || tx.ResponseFirst < want[1] || tx.ResponseFirst > want[1]+3*20*us ||
					tx.ResponseLast != want[2] {
					t.Errorf("turn %d: request %d, answer %d..%d; want %d, %d..%d", i, tx.RequestFirst,
						tx.ResponseFirst, tx.ResponseLast, want[0], want[1], want[2])
				}
			}
		})
	}
}

// A server answering a small page at once, as the server's capture
// point sees it: the client's Finished, its preface and first HEADERS
// come in one flight, and the server's whole answer (a HEADERS record
// and a DATA record) within 3 ms of the Finished, inside the window where
// small records are held as tickets. nginx (OpenSSL) sends two tickets on
// the Finished and then its SETTINGS, which may pass before the client's
// preface does; a Go server sent its tickets in its flight, so its
// SETTINGS is the first record held. The client's SETTINGS ACK, a round
// trip later, tells TLS 1.3's hidden protocol: the records held after the
// server's SETTINGS were the answer, not tickets. The client then asks,
// 38 ms after it had the whole page, for its stylesheet: a turn of its
// own, not the page's.
func TestKeylessHTTP2AnswerAmongTickets(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tickets int
		// clientFirst: the client's preface passes before the server's
		// tickets and SETTINGS; between: after the first ticket.
		clientFirst, between bool
		// coalesced: the server's SETTINGS and the answer's HEADERS in
		// one record.
		coalesced bool
	}{
		{"nginx, the server's SETTINGS first", 2, false, false, false},
		{"nginx, the client's preface first", 2, true, false, false},
		{"nginx, the client's preface between the tickets, SETTINGS and HEADERS in one record", 2, false, true, true},
		{"Go, the client's preface first", 0, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs, suite := h2Handshake(t, tls.VersionTLS13, []string{"h2", "http/1.1"})
			rec := func(n int) []byte { return sealed(t, tls.VersionTLS13, suite, n) }
			var req1, ans1First, ans1Last, req2, ans2 int64
			out := analyze(t, defaultOpts(), reconstruct.Config{}, func(w *synth.Writer) {
				c := w.Conn(client, netip.AddrPortFrom(server.Addr(), 443), 7710, 9710)
				c.Opts.ClientRTT = 2 * D
				tt := scriptTLS(c, hs, 300*us, 30*ms)
				f := max(tt.finished, tt.serverAfter) + 100*us
				// The client's preface and HEADERS are two writes, half
				// a millisecond apart on the testbed's bridge, together when
				// they come first.
				clientAt := f + 2*ms
				req1 = f + 2500*us
				switch {
				case tc.clientFirst:
					clientAt, req1 = f+100*us, f+150*us
				case tc.between:
					clientAt, req1 = f+400*us, f+450*us
				}
				// The records up to the answer, in the order of their times.
				type write struct {
					at         int64
					fromServer bool
					n          int
				}
				writes := []write{{clientAt, false, 24 + 9 + 4*6 + 13}, {req1, false, 478}}
				at := f + 300*us
				for range tc.tickets {
					writes = append(writes, write{at, true, 265})
					at += 600 * us
				}
				settings := at
				ans1First, ans1Last = max(at, req1)+800*us, max(at, req1)+900*us
				if tc.coalesced {
					// SETTINGS, WINDOW_UPDATE, SETTINGS ACK, HEADERS
					ans1First = settings
					writes = append(writes, write{settings, true, 9 + 3*6 + 13 + 9 + 137})
				} else {
					// SETTINGS, WINDOW_UPDATE; the answer's HEADERS, as short
					// as a preface when the SETTINGS passed first (a 304's)
					headers := 137
					if !tc.clientFirst && !tc.between {
						headers = 64
					}
					writes = append(writes, write{settings, true, 9 + 3*6 + 13}, write{ans1First, true, headers})
				}
				writes = append(writes, write{ans1Last, true, 420})
				slices.SortStableFunc(writes, func(a, b write) int { return cmp.Compare(a.at, b.at) })
				for _, w := range writes {
					if w.fromServer {
						c.Server(w.at, rec(w.n))
					} else {
						c.Client(w.at, rec(w.n))
					}
				}
				c.ClientAck(settings + 2*D)
				c.Client(settings+2*D+500*us, rec(9)) // SETTINGS ACK
				c.ClientAck(ans1Last + 2*D)
				req2 = ans1Last + 2*D + 38*ms
				c.Client(req2, rec(110))
				ans2 = req2 + 300*us
				c.Server(ans2, rec(1200))
				c.ClientAck(ans2 + 2*D)
				end := ans2 + 5*time.Second.Nanoseconds()
				c.ClientFIN(end)
				c.ServerFIN(end + 100*us)
				c.ClientAck(end + 2*D)
			})
			if len(out.txs) != 2 {
				for _, tx := range out.txs {
					t.Logf("turn %d: %d..%d, %d..%d, flags %v", tx.Index, tx.RequestFirst, tx.RequestLast, tx.ResponseFirst, tx.ResponseLast, tx.Flags)
				}
				t.Fatalf("%d turns, want 2", len(out.txs))
			}
			for i, want := range [][3]int64{{req1, ans1First, ans1Last}, {req2, ans2, ans2}} {
				tx := out.txs[i]
				if err := tx.Invariants(); err != nil {
					t.Errorf("turn %d: %v", i, err)
				}
				if tx.Flags&reconstruct.FlagTurnEstimate == 0 || tx.Flags&(reconstruct.FlagNoResponse|reconstruct.FlagIncomplete) != 0 {
					t.Errorf("turn %d: flags %v", i, tx.Flags)
				}
				if tx.RequestFirst != want[0] || tx.ResponseFirst != want[1] || tx.ResponseLast != want[2] {
					t.Errorf("turn %d: request %d, answer %d..%d; want %d, %d..%d", i, tx.RequestFirst,
						tx.ResponseFirst, tx.ResponseLast, want[0], want[1], want[2])
				}
			}
		})
	}
}

// A browser asks for a page's objects on its keyless HTTP/2 connection
// as the page arrives; the packet with the second request is lost before
// the capture point and resent a timeout later, when the client had every
// answer sent so far. The turn began with the first object's request and
// ends with the last answer: the resend is another stream of it, as
// things were when the client sent it, not a turn of its own (seen on
// the testbed under 2% loss: a page's objects split in two turns, 200-560
// ms short). The capture sees that the client had sent it when a later
// request overtakes it, or when a pure ACK's sequence number passes it;
// a request sent after the client had every answer but the lost one's,
// overtaking it then, is of the same turn too.
func TestKeylessHTTP2RequestLostUpstream(t *testing.T) {
	for _, tc := range []struct {
		name string
		// early: a request right behind the lost one; late: one sent
		// once the client had the first object's answer.
		early, late bool
	}{
		{"a later request overtakes it", true, false},
		{"only ACKs follow it", false, false},
		{"ACKs, then a request sent once the answer was in", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ans1Last, req2, ans2Last int64
			out, req1 := keylessH2Run(t, 7720, func(c *synth.Conn, rec func(int) []byte, at int64) {
				page := c.ServerMSS(at+20*ms, rec(3000), 1448, 20*us)
				ans1Last = page[len(page)-1]
				c.ClientAck(ans1Last + 2*D)
				// The objects, as the page is parsed.
				req2 = ans1Last + 2*D + 1*ms
				c.Client(req2, rec(60))
				lostSeq, lost := c.ClientNext(), rec(58)
				c.ClientLost()
				c.SkipClient(len(lost))
				if tc.early {
					c.Client(req2+100*us, rec(57))
				}
				// The first object's answer, a window of it at once (the
				// server, lacking the lost request, acknowledges up to
				// it); the client acknowledges the first segments as
				// they come, then all.
				first := c.ServerMSSAcking(req2+2*ms, lostSeq, append(rec(16000), rec(4000)...), 1448, 20*us)
				c.ClientAck(first[2] + 2*D)
				c.ClientAck(first[len(first)-1] + 2*D)
				if tc.late {
					c.Client(first[len(first)-1]+2*D+5*ms, rec(59))
				}
				resent := first[len(first)-1] + 2*D + 200*ms
				c.ClientAt(resent, lostSeq, lost)
				last := c.ServerMSS(resent+1*ms, rec(5000), 1448, 20*us)
				if tc.early || tc.late {
					last = c.ServerMSS(last[len(last)-1]+20*us, rec(900), 1448, 20*us)
				}
				ans2Last = last[len(last)-1]
				keylessH2Close(c, ans2Last)
			})
			checkTurns(t, out.txs, [][2]int64{{req1, ans1Last}, {req2, ans2Last}})
		})
	}
}

// A long answer on a keyless HTTP/2 connection whose window opens slowly
// (after a loss, one segment every few milliseconds): the client read
// every whole record the server had sent, and sends a WINDOW_UPDATE
// while the next record is under way. It is no request, and the turn
// does not end there: the server had sent bytes the client lacked.
func TestKeylessHTTP2WindowUpdateMidRecord(t *testing.T) {
	var ans1Last int64
	out, req1 := keylessH2Run(t, 7730, func(c *synth.Conn, rec func(int) []byte, at int64) {
		one := c.ServerMSS(at+20*ms, rec(16000), 1448, 20*us)
		c.ClientAck(one[len(one)-1] + 2*D)
		// The next record, a segment every 5 ms; its first segment is
		// on the way when the client sends its WINDOW_UPDATE.
		two := rec(16000)
		twoAt := one[len(one)-1] + 2*D + 100*us
		c.Server(twoAt, two[:1448])
		c.Client(twoAt+1*ms, rec(13)) // WINDOW_UPDATE, the first record read
		rest := c.ServerMSS(twoAt+5*ms, two[1448:], 1448, 5*ms)
		ans1Last = rest[len(rest)-1]
		keylessH2Close(c, ans1Last)
	})
	checkTurns(t, out.txs, [][2]int64{{req1, ans1Last}})
}

// keylessH2Run analyzes one keyless HTTP/2 connection whose client's
// initial sequence number is isn (the server's 2000 above it):
// keylessH2Open begins it, script goes on from at (the records sealed by
// rec). It returns the records and the first request's time.
func keylessH2Run(t *testing.T, isn uint32, script func(c *synth.Conn, rec func(int) []byte, at int64)) (*collected, int64) {
	t.Helper()
	hs, suite := h2Handshake(t, tls.VersionTLS12, []string{"h2", "http/1.1"})
	rec := func(n int) []byte { return sealed(t, tls.VersionTLS12, suite, n) }
	var req1 int64
	out := analyze(t, defaultOpts(), reconstruct.Config{}, func(w *synth.Writer) {
		c := w.Conn(client, netip.AddrPortFrom(server.Addr(), 443), isn, isn+2000)
		var at int64
		at, req1 = keylessH2Open(c, hs, rec)
		script(c, rec, at)
	})
	return out, req1
}

// keylessH2Open scripts a TLS 1.2 handshake (hs) that chose h2, the
// client's preface and a page's HEADERS (at req1, from at), the server's
// SETTINGS and SETTINGS ACK, and the client's SETTINGS ACK a round trip
// later; the client's ACKs cover what can have reached it.
func keylessH2Open(c *synth.Conn, hs []tlsWrite, rec func(int) []byte) (at, req1 int64) {
	c.Opts.ClientRTT = 2 * D
	tt := scriptTLS(c, hs, 300*us, 30*ms)
	at = max(tt.finished, tt.serverAfter+2*D) + 100*us
	c.Client(at, rec(24+9+4*6+13))
	req1 = at + 20*us
	c.Client(req1, rec(310))
	c.Server(at+300*us, rec(9+3*6+13))
	c.Server(at+350*us, rec(9))
	c.Client(at+300*us+2*D, rec(9)) // SETTINGS ACK
	return at, req1
}

// keylessH2Close acknowledges the server's last record (sent at last)
// and closes the connection five seconds later.
func keylessH2Close(c *synth.Conn, last int64) {
	c.ClientAck(last + 2*D)
	end := last + 5*time.Second.Nanoseconds()
	c.ClientFIN(end)
	c.ServerFIN(end + 100*us)
	c.ClientAck(end + 2*D)
}

// checkTurns checks that txs are the turns want gives, in order, by
// their first request record and their answer's last record.
func checkTurns(t *testing.T, txs []*reconstruct.Transaction, want [][2]int64) {
	t.Helper()
	if len(txs) != len(want) {
		for _, tx := range txs {
			t.Logf("turn %d: %d..%d, %d..%d, flags %v", tx.Index, tx.RequestFirst, tx.RequestLast, tx.ResponseFirst, tx.ResponseLast, tx.Flags)
		}
		t.Fatalf("%d turns, want %d", len(txs), len(want))
	}
	for i, w := range want {
		tx := txs[i]
		if err := tx.Invariants(); err != nil {
			t.Errorf("turn %d: %v", i, err)
		}
		if tx.RequestFirst != w[0] || tx.ResponseLast != w[1] {
			t.Errorf("turn %d: request %d, answer's end %d; want %d, %d", i, tx.RequestFirst, tx.ResponseLast, w[0], w[1])
		}
	}
}

// A navigation through a redirect on a keyless HTTP/2 connection: the
// 302's answer reaches the client, which asks for the page at once,
// while the previous page's beacon is still being answered; the page's
// request is lost before the capture point. The client's next packet is
// a pure ACK of the beacon's answer, which came after the lost request
// left (a client sends a pure ACK only for data that came after its last
// segment): the request was sent while the turn was busy, and is
// another stream of it, though that ACK covers every answer (seen on the
// testbed: the redirect, the beacon and the page in one busy period, the
// page timed as a turn of its own, 490 ms short).
func TestKeylessHTTP2RequestLostBehindRedirect(t *testing.T) {
	var ans1Last, req2, ans2Last int64
	out, req1 := keylessH2Run(t, 7740, func(c *synth.Conn, rec func(int) []byte, at int64) {
		page := c.ServerMSS(at+20*ms, rec(3000), 1448, 20*us)
		ans1Last = page[len(page)-1]
		c.ClientAck(ans1Last + 2*D)
		// A second, the link to the next page: its redirect.
		req2 = ans1Last + 2*D + time.Second.Nanoseconds()
		c.Client(req2, rec(61))
		redirect := req2 + 200*us
		c.Server(redirect, rec(269))
		// The page's beacon, sent before the 302 reached the client, and
		// its answer.
		c.Client(req2+10*ms, rec(62))
		c.Client(req2+10*ms+100*us, rec(32))
		beacon := req2 + 10*ms + 500*us
		c.Server(beacon, rec(62))
		c.Server(beacon+50*us, rec(30)) // RST_STREAM
		// The 302 reached the client, which asked for the page at once:
		// lost. Then its ACK of the beacon's answer.
		lostSeq, lost := c.ClientNext(), rec(65)
		c.ClientLost()
		c.SkipClient(len(lost))
		c.ClientAck(beacon + 50*us + 2*D)
		resent := beacon + 2*D + 300*ms
		c.ClientAt(resent, lostSeq, lost)
		last := c.ServerMSS(resent+10*ms, rec(3000), 1448, 20*us)
		ans2Last = last[len(last)-1]
		keylessH2Close(c, ans2Last)
	})
	checkTurns(t, out.txs, [][2]int64{{req1, ans1Last}, {req2, ans2Last}})
}
