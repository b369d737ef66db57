package reconstruct_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http2"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/reconstruct/tlsdecrypt"
	"github.com/rtmon/rtmon/synth"
)

// recordH2Session runs Go's HTTP/2 client and server over TLS (ALPN h2)
// of the version given with n concurrent GETs of /item/i, the client's secrets written to
// keyLog, and returns every write of both sides in order.
func recordH2Session(t *testing.T, version uint16, n int, keyLog io.Writer) []tlsWrite {
	t.Helper()
	cs, ss := net.Pipe()
	rec := &tlsRecorder{}
	srvTLS := tls.Server(recordingConn{ss, rec, false}, &tls.Config{Certificates: []tls.Certificate{testCertificate(t)},
		NextProtos: []string{"h2"}, MinVersion: version, MaxVersion: version})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, strings.Repeat("y", 3000)+r.URL.Path)
	})
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srvTLS.Handshake(); err != nil {
			return
		}
		(&http2.Server{}).ServeConn(srvTLS, &http2.ServeConnOpts{Handler: handler})
	}()
	cli := tls.Client(recordingConn{cs, rec, true}, &tls.Config{ServerName: "shop.example.test", InsecureSkipVerify: true,
		NextProtos: []string{"h2"}, KeyLogWriter: keyLog, MinVersion: version, MaxVersion: version})
	if err := cli.Handshake(); err != nil {
		t.Fatal(err)
	}
	cc, err := (&http2.Transport{}).NewClientConn(cli)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", fmt.Sprintf("https://shop.example.test/item/%d", i), nil)
			resp, err := cc.RoundTrip(req)
			if err != nil {
				errs <- err
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cc.Close()
	cli.Close()
	<-served
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.writes
}

// A real HTTP/2 session over TLS with five concurrent requests, decrypted,
// gives five transactions flagged http2 with their paths and statuses;
// without the key log the connection still gives none.
func TestDecryptedHTTP2Streams(t *testing.T) {
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(version), func(t *testing.T) { testDecryptedHTTP2(t, version) })
	}
}

func testDecryptedHTTP2(t *testing.T, version uint16) {
	kl := tlsdecrypt.NewKeyLog(tlsdecrypt.KeyLogOptions{})
	writes := recordH2Session(t, version, 5, kl)
	script := func(w *synth.Writer) {
		c := w.Conn(client, netip.AddrPortFrom(server.Addr(), 443), 7500, 9500)
		scriptTLS(c, writes, 300*us, 30*ms)
		c.ClientFIN(synth.T(30))
		c.ServerFIN(synth.T(30) + 100*us)
		c.ClientAck(synth.T(30) + 2*D)
	}
	keyless := analyze(t, defaultOpts(), reconstruct.Config{}, script)
	if len(keyless.txs) != 0 || keyless.conns[0].Flags&reconstruct.FlagHTTP2 == 0 {
		t.Fatalf("keyless: %d transactions, flags %v", len(keyless.txs), keyless.conns[0].Flags)
	}
	out := analyze(t, defaultOpts(), reconstruct.Config{KeyLog: kl}, script)
	if len(out.txs) != 5 {
		t.Fatalf("%d transactions, want 5", len(out.txs))
	}
	var paths []string
	for _, tx := range out.txs {
		paths = append(paths, tx.URL)
		want := reconstruct.FlagTLS | reconstruct.FlagHTTP2
		if tx.Method != "GET" || tx.Status != 200 || tx.Host != "shop.example.test" || tx.Flags&want != want ||
			tx.Flags&(reconstruct.FlagIncomplete|reconstruct.FlagNoResponse|reconstruct.FlagNoRequest) != 0 ||
			tx.BodyBytes != int64(3000+len(tx.URL)) || tx.ContentType != "text/plain" {
			t.Errorf("tx %d: %s %q host %q status %d body %d type %q flags %v", tx.Index, tx.Method, tx.URL, tx.Host,
				tx.Status, tx.BodyBytes, tx.ContentType, tx.Flags)
		}
		if err := tx.Invariants(); err != nil {
			t.Errorf("tx %d: %v", tx.Index, err)
		}
		if tx.RequestFirst <= 0 || tx.RequestFirst > tx.ResponseFirst || tx.ResponseFirst > tx.ResponseLast || tx.ResponseAcked == 0 {
			t.Errorf("tx %d: request first %d, response first %d last %d acked %d", tx.Index, tx.RequestFirst,
				tx.ResponseFirst, tx.ResponseLast, tx.ResponseAcked)
		}
	}
	sort.Strings(paths)
	if got := strings.Join(paths, " "); got != "/item/0 /item/1 /item/2 /item/3 /item/4" {
		t.Errorf("paths %s", got)
	}
	st := out.stats
	if st.TLSDecrypted != 1 || st.TLSKeyless != 0 || st.HTTP2Connections != 1 || st.MemoryInUse != 0 {
		t.Errorf("stats: decrypted %d keyless %d http2 %d memory %d", st.TLSDecrypted, st.TLSKeyless, st.HTTP2Connections, st.MemoryInUse)
	}
}
