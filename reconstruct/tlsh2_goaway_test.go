package reconstruct_test

import (
	"bytes"
	"io"
	"net/http"
	"net/netip"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/reconstruct/tlsdecrypt"
	"github.com/rtmon/rtmon/synth"
)

// A server that closes an idle HTTP/2 connection (nginx after
// keepalive_timeout) sends GOAWAY and its FIN while the client's next
// request is on the way: the request reaches the server after the close,
// is refused, and the client sends it again on a new connection. The
// refused request is one the client made and never had answered on this
// connection; its record must be kept, incomplete, not lost with the
// closing connection.
func TestDecryptedHTTP2RequestAfterServerGoAway(t *testing.T) {
	kl := tlsdecrypt.NewKeyLog(tlsdecrypt.KeyLogOptions{})
	writes := recordH2RequestAfterGoAway(t, kl)
	for _, reset := range []bool{false, true} {
		out := analyze(t, defaultOpts(), reconstruct.Config{KeyLog: kl}, func(w *synth.Writer) {
			c := w.Conn(client, netip.AddrPortFrom(server.Addr(), 443), 7700, 9700)
			at := handshake(c, synth.T(0))
			var late [][]byte // the client's writes after the answer: the request the close crosses
			var goAway []byte
			prevClient := true
			for _, wr := range writes {
				switch {
				case wr.fromClient && wr.phase >= 2:
					late = append(late, wr.b)
				case wr.phase >= 2:
					goAway = append(goAway, wr.b...)
				case wr.fromClient:
					if !prevClient {
						at += 2 * D
					}
					c.Client(at, wr.b)
					at += 50 * us
					prevClient = true
				default:
					if prevClient {
						at += 300 * us
					}
					times := c.ServerMSS(at, wr.b, 1448, 20*us)
					at = times[len(times)-1] + 20*us
					prevClient = false
				}
			}
			// The GOAWAY went with the server's FIN; the request left
			// the client before either reached it.
			at += 300 * us
			c.Server(at, goAway)
			c.ServerFIN(at + 20*us)
			at += D
			for _, b := range late {
				c.Client(at, b)
				at += 20 * us
			}
			if reset {
				c.ServerRST(at + 50*us) // the closed socket's answer to data
				return
			}
			c.ClientAck(at + D)
			c.ClientFIN(at + D + 10*us)
			c.ServerAck(at + 2*D)
		})
		var got []string
		var refused *reconstruct.Transaction
		for _, x := range out.txs {
			got = append(got, x.URL)
			if x.URL == "/next" {
				refused = x
			}
			if x.URL == "/first" && (x.Status != 200 || x.Flags&reconstruct.FlagIncomplete != 0) {
				t.Errorf("reset %v: /first status %d flags %v, want 200 and complete", reset, x.Status, x.Flags)
			}
		}
		if refused == nil {
			t.Fatalf("reset %v: no /next transaction, only %q", reset, got)
		}
		if refused.Flags&reconstruct.FlagIncomplete == 0 || refused.Status != 0 {
			t.Errorf("reset %v: /next status %d flags %v, want no status and incomplete", reset, refused.Status, refused.Flags)
		}
	}
}

// recordH2RequestAfterGoAway records Go's HTTP/2 client asking for
// /first, answered (phase 1), then for /next, which the server refuses
// with a GOAWAY and closes: the client's writes from /next on and the
// server's GOAWAY are phase 2.
func recordH2RequestAfterGoAway(t *testing.T, keyLog io.Writer) []tlsWrite {
	t.Helper()
	answered := make(chan struct{})
	return recordH2Framed(t, keyLog, func(fr *http2.Framer, rec *tlsRecorder, h *http2.HeadersFrame) bool {
		if h.StreamID != 1 {
			fr.WriteGoAway(1, http2.ErrCodeNo, nil)
			return true
		}
		var block bytes.Buffer
		hpack.NewEncoder(&block).WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
		rec.setPhase(1)
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndHeaders: true})
		fr.WriteData(1, true, []byte("first answer"))
		rec.setPhase(2)
		close(answered)
		return false
	}, func(cc *http2.ClientConn) {
		req, _ := http.NewRequest("GET", "https://shop.example.test/first", nil)
		resp, err := cc.RoundTrip(req)
		if err != nil {
			t.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		<-answered
		req, _ = http.NewRequest("GET", "https://shop.example.test/next", nil)
		if resp, err := cc.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	})
}
