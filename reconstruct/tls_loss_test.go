package reconstruct_test

import (
	"crypto/rand"
	"crypto/tls"
	"net/netip"
	"testing"
	"time"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/synth"
)

// A TLS 1.3 session ticket lost between the capture point and the client
// holds back the response the server sent after it: TCP hands the client
// nothing past the hole, so the response is whole at the client only when
// the ticket's resend arrives (seen on the HTTPS testbed: a Go client's
// and Chromium's first responses 190 and 80 ms short). Keyless timing
// must end the response at the resend; with the ticket delivered, at the
// response's own last byte.
func TestKeylessHTTPSLostTicketHoldsResponse(t *testing.T) {
	writes := recordTLSSession(t, tls.VersionTLS13, []string{"http/1.1"}, []string{"/"}, 3000)
	const rto = 200 * ms
	var tserver [2]int64
	for i, lost := range []bool{false, true} {
		var reqLast, respLast, resend int64
		out := analyze(t, defaultOpts(), reconstruct.Config{}, func(w *synth.Writer) {
			c := w.Conn(client, netip.AddrPortFrom(server.Addr(), 443), 7300, 9300)
			at := handshake(c, synth.T(0))
			prevClient := true
			var ticketAt int64
			var ticketRel uint32
			ticket := fakeTicket()
			for _, w := range writes {
				switch {
				case w.phase < 0:
					continue // the closing alerts: the FINs end it
				case w.fromClient:
					if !prevClient {
						at += 2 * D
					}
					c.Client(at, w.b)
					if w.phase == 1 {
						reqLast = at
					}
					at += 50 * us
				case w.phase == 1:
					if prevClient {
						// Two OpenSSL-style tickets, then the response.
						at += 300 * us
						ticketAt, ticketRel = at, c.ServerNext()
						c.Server(at, ticket)
						c.Server(at+20*us, fakeTicket())
						at += 30 * ms
					}
					times := c.ServerMSS(at, w.b, 1448, 20*us)
					respLast = times[len(times)-1]
					at = respLast + 20*us
				default:
					if prevClient {
						at += 300 * us
					}
					times := c.ServerMSS(at, w.b, 1448, 20*us)
					at = times[len(times)-1] + 20*us
					c.ClientAck(at + 2*D - 20*us)
				}
				prevClient = w.fromClient
			}
			if lost {
				// The client has all but the first ticket (SACK), until
				// the server's timer resends it.
				end := ticketRel + uint32(len(ticket))
				c.ClientAckToSACK(respLast+2*D, ticketRel, capture.SACKBlock{Left: end, Right: c.ServerNext()})
				resend = ticketAt + rto
				c.ServerAt(resend, ticketRel, ticket)
				c.ClientAck(resend + 2*D)
			} else {
				c.ClientAck(respLast + 2*D)
			}
			end := max(respLast, resend) + 3*D
			c.ClientFIN(end)
			c.ServerFIN(end + 100*us)
			c.ClientAck(end + 2*D + 100*us)
		})
		tx := one(t, "transaction", out.txs)
		wantEnd := respLast + D
		if lost {
			wantEnd = resend + D
		}
		if tx.End != wantEnd {
			t.Errorf("ticket lost %v: end %v after the request, want %v (flags %v)", lost,
				time.Duration(tx.End-reqLast), time.Duration(wantEnd-reqLast), tx.Flags)
		}
		tserver[i] = tx.Tserver
	}
	if tserver[0] != tserver[1] || tserver[0] < 30*ms+2*D {
		t.Errorf("tserver %v without the loss, %v with it: the loss moves only the end", time.Duration(tserver[0]), time.Duration(tserver[1]))
	}
}

// fakeTicket is an application-data record the size of an OpenSSL
// session ticket.
func fakeTicket() []byte {
	b := make([]byte, 5+250)
	b[0], b[1], b[2], b[4] = 23, 3, 3, 250
	rand.Read(b[5:])
	return b
}
