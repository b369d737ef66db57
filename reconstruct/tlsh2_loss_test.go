package reconstruct_test

import (
	"crypto/tls"
	"net/netip"
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/reconstruct/tlsdecrypt"
	"github.com/rtmon/rtmon/synth"
)

// A browser sends a page's objects at once on its HTTP/2 connection; the
// packet with the first request is lost before the capture point and
// resent one timeout later, so the others overtake it and wait at the
// server (TCP delivers in order) until the resend fills the hole. Each
// request was sent at its own time: the overtaking ones are timed from
// their own arrival, not from the hole's filling, and the lost one is
// flagged upstream_loss and timed from the first segment that overtook it
// (TCP sends new data in sequence order, so it left before that one).
// Seen on the testbed: HTTP/2 objects 80-370 ms short under 2% loss, the
// client resending after the server's SACKs, ~100 ms after the loss, not
// after a retransmission timeout.
func TestDecryptedHTTP2RequestLostUpstream(t *testing.T) {
	handler, _ := h2Site(false, 10)
	kl := tlsdecrypt.NewKeyLog(tlsdecrypt.KeyLogOptions{})
	objects := []h2Fetch{{path: "/style.css"}, {path: "/app.js"}, {path: "/img/0.png"}}
	writes := recordH2Waves(t, tls.VersionTLS13, kl, handler, []h2Fetch{{path: "/index.html"}}, objects)
	var sent, resent int64 // the objects' requests were sent from sent on
	script := func(w *synth.Writer) {
		h2Burst(w, 7500, writes, func(c *synth.Conn, reqs []tlsWrite, at int64) int64 {
			sent = at
			lostSeq := c.ClientNext()
			c.ClientLost()
			c.SkipClient(len(reqs[0].b))
			for k, wr := range reqs[1:] {
				c.Client(sent+int64(k+1)*50*us, wr.b)
			}
			resent = synth.TimerFires(sent, lostWaitAfterSamples(2*D, 2))
			c.ClientAt(resent, lostSeq, reqs[0].b)
			return resent
		})
	}
	out := analyze(t, defaultOpts(), reconstruct.Config{KeyLog: kl}, script)
	if resent == 0 {
		t.Fatal("the script lost no request")
	}
	flagged := 0
	for _, tx := range out.txs {
		if err := tx.Invariants(); err != nil {
			t.Error(err)
		}
		if tx.URL == "/index.html" {
			continue
		}
		// Sent from sent on (one 50 us step per write), at the capture
		// point D later; the lost one is timed by the next one's send.
		d := time.Duration(tx.Start - (sent - D))
		t.Logf("%s: start %v from its send, total %v, flags %v", tx.URL, d, time.Duration(tx.Total), tx.Flags)
		if tx.Flags&reconstruct.FlagUpstreamLoss != 0 {
			flagged++
		}
		if d < 0 || d > time.Millisecond {
			t.Errorf("%s: starts %v from its send, want within 1 ms (the resend came %v later)", tx.URL, d, time.Duration(resent-sent))
		}
	}
	if len(out.txs) != 4 || flagged != 1 {
		t.Errorf("%d transactions, %d flagged upstream_loss; want 4 and 1", len(out.txs), flagged)
	}
}

// The last of a burst of HTTP/2 requests is lost before the capture point
// while the ones before it are in flight. The server's ACK of those
// restarts the client's retransmission timer (Linux restarts it at each
// ACK of new data), so the resend comes one wait after that ACK reached
// the client, not after the request left: the request is timed from when
// the client could send it, its page's response having arrived (seen on
// the HTTPS testbed: a Chromium request timed 123 ms short).
func TestDecryptedHTTP2RequestLostBehindInFlight(t *testing.T) {
	handler, _ := h2Site(false, 10)
	kl := tlsdecrypt.NewKeyLog(tlsdecrypt.KeyLogOptions{})
	objects := []h2Fetch{{path: "/style.css"}, {path: "/app.js"}, {path: "/img/0.png"}}
	writes := recordH2Waves(t, tls.VersionTLS13, kl, handler, []h2Fetch{{path: "/index.html"}}, objects)
	var sent, lastSent, resent int64
	var lostURL string
	script := func(w *synth.Writer) {
		h2Burst(w, 7700, writes, func(c *synth.Conn, reqs []tlsWrite, at int64) int64 {
			sent = at
			for k, wr := range reqs[:len(reqs)-1] {
				c.Client(sent+int64(k)*50*us, wr.b)
			}
			lastSent = sent + int64(len(reqs)-1)*50*us
			lostSeq := c.ClientNext()
			c.ClientLost()
			c.SkipClient(len(reqs[len(reqs)-1].b))
			ack := lastSent + 1*ms // the server acknowledges the others
			c.ServerAckTo(ack, lostSeq)
			resent = synth.TimerFires(ack+2*D, lostWaitAfterSamples(2*D, 2))
			c.ClientAt(resent, lostSeq, reqs[len(reqs)-1].b)
			return resent
		})
	}
	out := analyze(t, defaultOpts(), reconstruct.Config{KeyLog: kl}, script)
	if resent == 0 {
		t.Fatal("the script lost no request")
	}
	flagged := 0
	for _, tx := range out.txs {
		if err := tx.Invariants(); err != nil {
			t.Error(err)
		}
		if tx.URL == "/index.html" {
			continue
		}
		d := time.Duration(tx.Start - (sent - D))
		if tx.Flags&reconstruct.FlagUpstreamLoss != 0 {
			flagged++
			lostURL = tx.URL
		}
		if d < -time.Millisecond || time.Duration(tx.Start-(lastSent-D)) > time.Millisecond {
			t.Errorf("%s: starts %v from the burst's first send, want within it, 1 ms either way (the resend came %v after the last), flags %v",
				tx.URL, d, time.Duration(resent-lastSent), tx.Flags)
		}
	}
	if len(out.txs) != 4 || flagged != 1 {
		t.Errorf("%d transactions, %d flagged upstream_loss (%s); want 4 and 1", len(out.txs), flagged, lostURL)
	}
}

// The last of a burst of HTTP/2 requests is lost before the capture
// point, and the client's next packet is a pure ACK whose sequence number
// passes it: the client had sent it before that ACK and, sending nothing
// else in between, after the request before it. The resend tells when in
// that window: a tail loss probe armed as it left (2 srtt with the others
// in flight), or a retransmission timeout restarted as the server's ACK
// of the others reached the client, puts it with the request before it,
// the burst it was sent in; a probe from a request sent later in that
// silence puts it at its own send. Seen on the HTTPS testbed: a Go
// client's HEADERS for four objects timed from the WINDOW_UPDATEs that
// overtook them 158 ms later, and its favicon, lost beside its beacon,
// from its resend 534 ms later.
func TestDecryptedHTTP2RequestLostLastOfBurst(t *testing.T) {
	handler, _ := h2Site(false, 10)
	kl := tlsdecrypt.NewKeyLog(tlsdecrypt.KeyLogOptions{})
	objects := []h2Fetch{{path: "/style.css"}, {path: "/app.js"}, {path: "/img/0.png"}}
	writes := recordH2Waves(t, tls.VersionTLS13, kl, handler, []h2Fetch{{path: "/index.html"}}, objects)
	tlp := 2*(2*D) + 2*ms // the client's probe: 2 srtt and TCP_TIMEOUT_MIN
	for i, tc := range []struct {
		name string
		// late: how long after the request before it the lost one left;
		// rto: resent one timeout after the server's ACK of the others
		// reached the client, else on its probe.
		late int64
		rto  bool
	}{
		{"resent on its tail loss probe", 0, false},
		{"resent one timeout after the server's ACK of the others", 0, true},
		{"sent 60 ms later, resent on its probe", 60 * ms, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lostSent, resent int64
			var lostURL string
			script := func(w *synth.Writer) {
				h2Burst(w, uint16(7800+i*100), writes, func(c *synth.Conn, reqs []tlsWrite, at int64) int64 {
					for k, wr := range reqs[:len(reqs)-1] {
						c.Client(at+int64(k)*50*us, wr.b)
					}
					lostSent = at + int64(len(reqs)-2)*50*us + 50*us + tc.late
					lostSeq := c.ClientNext()
					c.ClientLost()
					c.SkipClient(len(reqs[len(reqs)-1].b))
					ack := at + int64(len(reqs)-2)*50*us + 1*ms // the server acknowledges the others
					c.ServerAckTo(ack, lostSeq)
					c.ClientAck(lostSent + 2*D + 5*ms) // answers came in: its ACK passes the lost request
					resent = synth.TimerFires(lostSent, tlp)
					if tc.rto {
						resent = synth.TimerFires(ack+2*D, lostWaitAfterSamples(2*D, 2))
					}
					c.ClientAt(resent, lostSeq, reqs[len(reqs)-1].b)
					return resent
				})
			}
			out := analyze(t, defaultOpts(), reconstruct.Config{KeyLog: kl}, script)
			flagged := 0
			for _, tx := range out.txs {
				if err := tx.Invariants(); err != nil {
					t.Error(err)
				}
				if tx.Flags&reconstruct.FlagUpstreamLoss == 0 {
					continue
				}
				flagged++
				lostURL = tx.URL
				// Within 1 ms in a burst; a probe's own send within the
				// timer wheel's granule (4 ms), which the resend rounds to.
				tol := time.Millisecond
				if tc.late > 0 {
					tol = 5 * time.Millisecond
				}
				if d := time.Duration(tx.Start - (lostSent - D)); d < -tol || d > tol {
					t.Errorf("%s: starts %v from its send, want within %v (resent %v after it)", tx.URL, d, tol, time.Duration(resent-lostSent))
				}
			}
			if len(out.txs) != 4 || flagged != 1 {
				t.Errorf("%d transactions, %d flagged upstream_loss (%s); want 4 and 1", len(out.txs), flagged, lostURL)
			}
		})
	}
}

// h2Burst scripts a recorded HTTP/2 page load on a Linux-like connection
// (IP IDs per connection): the page's wave as recorded, then the
// objects' requests, which a browser sends at once as the page arrives
// (the recording's pipe interleaved them with the server's writes), by
// burst, then the rest of the recording. burst gets the requests and the
// time the page's response reached the client, and returns when the
// client sent its last packet.
func h2Burst(w *synth.Writer, port uint16, writes []tlsWrite, burst func(c *synth.Conn, reqs []tlsWrite, sent int64) int64) {
	o := synth.DefaultConnOptions()
	o.IPID = synth.IPIDPerConn
	c := w.ConnWith(client, netip.AddrPortFrom(server.Addr(), 443), uint32(port), uint32(port)+2000, o)
	at := handshake(c, synth.T(0))
	prevClient := true
	step := func(wr tlsWrite) {
		if wr.fromClient {
			if !prevClient {
				at += 2 * D // the server's flight reached the client, which answers at once
			}
			c.Client(at, wr.b)
			at += 50 * us
		} else {
			if prevClient {
				at += 2 * ms
			}
			times := c.ServerMSS(at, wr.b, 1448, 20*us)
			at = times[len(times)-1] + 20*us
			c.ClientAck(at + 2*D - 20*us)
		}
		prevClient = wr.fromClient
	}
	var reqs, rest []tlsWrite
	for _, wr := range writes {
		switch {
		case wr.wave < 2:
			step(wr)
		case wr.fromClient && len(wr.b) >= 40: // HEADERS, not an ACK of SETTINGS
			reqs = append(reqs, wr)
		default:
			rest = append(rest, wr)
		}
	}
	at, prevClient = burst(c, reqs, at+2*D)+50*us, true
	for _, wr := range rest {
		step(wr)
	}
	c.ClientFIN(at + 10*ms)
	c.ServerFIN(at + 10*ms + 100*us)
	c.ClientAck(at + 10*ms + 2*D)
}
