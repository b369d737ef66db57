package reconstruct_test

import (
	"crypto/tls"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/reconstruct/tlsdecrypt"
	"github.com/rtmon/rtmon/synth"
)

// HTTP/2 streams complete in any order: two tabs' pages on one fresh
// connection, the first one's from a slow back end. The connection's
// setup (Tconn, Ttls) belongs to the client's first stream, the request
// that opened the connection, not to the stream that completed first (on
// the HTTPS testbed the second tab's static page was given the first's
// 350 ms of connect and handshake).
func TestDecryptedHTTP2SetupGoesWithFirstStream(t *testing.T) {
	kl := tlsdecrypt.NewKeyLog(tlsdecrypt.KeyLogOptions{})
	const first = "/a.html" // stream 1: /b.html is sent once it reached the server
	reached := make(chan struct{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == first {
			close(reached)
			time.Sleep(100 * time.Millisecond) // its response goes out after the other's
		}
		w.Header().Set("Content-Type", "text/html")
		w.Write(make([]byte, 2000))
	})
	writes := recordH2Waves(t, tls.VersionTLS13, kl, handler, []h2Fetch{{path: first}, {path: "/b.html", after: reached}})
	// After the TLS 1.3 handshake (the first three writes: ClientHello,
	// the server's flight, the client's Finished), every write follows
	// the one before by 50 µs, as on a fast path, so that the first
	// request goes out at once and the connection is no spare one.
	out := analyze(t, defaultOpts(), reconstruct.Config{KeyLog: kl}, func(w *synth.Writer) {
		c := w.Conn(client, netip.AddrPortFrom(server.Addr(), 443), 7800, 9800)
		at := scriptTLS(c, writes[:3], 300*us, 0).finished
		for _, wr := range writes[3:] {
			at += 50 * us
			if wr.fromClient {
				c.Client(at, wr.b)
			} else {
				times := c.ServerMSS(at, wr.b, 1448, 20*us)
				at = times[len(times)-1]
			}
		}
		c.ClientAck(at + 2*D)
		c.ClientFIN(at + 3*D)
		c.ServerFIN(at + 3*D + 100*us)
		c.ClientAck(at + 5*D)
	})
	if len(out.txs) != 2 {
		t.Fatalf("%d transactions, want 2", len(out.txs))
	}
	for _, tx := range out.txs {
		opened := tx.URL == first
		if opened != (tx.Tconn > 0 && tx.Ttls > 0) || !opened && (tx.Tconn != 0 || tx.Ttls != 0) {
			t.Errorf("%s (index %d, the first stream %v): tconn %v ttls %v flags %v", tx.URL, tx.Index, opened,
				time.Duration(tx.Tconn), time.Duration(tx.Ttls), tx.Flags.Names())
		}
		if opened && tx.Index != 1 {
			t.Errorf("%s: index %d, want 1 (it completed second)", tx.URL, tx.Index)
		}
	}
}
