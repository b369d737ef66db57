package reconstruct_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
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
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, strings.Repeat("y", 3000)+r.URL.Path)
	})
	var wave []h2Fetch
	for i := range n {
		wave = append(wave, h2Fetch{path: fmt.Sprintf("/item/%d", i)})
	}
	return recordH2Waves(t, version, keyLog, handler, wave)
}

// h2Fetch is one GET of a recorded HTTP/2 session, with its request
// header fields (name, value pairs).
type h2Fetch struct {
	path   string
	header []string
	after  <-chan struct{} // if set, sent once it is closed (stream ids follow the sending order)
}

// recordH2Waves is recordH2Session with handler serving waves of GETs on
// one connection: the GETs of a wave run concurrently (multiplexed
// streams), each wave once the one before has been read whole, as a
// browser reads a page before its objects.
func recordH2Waves(t testing.TB, version uint16, keyLog io.Writer, handler http.Handler, waves ...[]h2Fetch) []tlsWrite {
	t.Helper()
	return recordH2WavesOffering(t, version, []string{"h2"}, keyLog, handler, waves...)
}

// recordH2WavesOffering is recordH2Waves with the client offering the
// protocols in offered (ALPN); the server takes h2.
func recordH2WavesOffering(t testing.TB, version uint16, offered []string, keyLog io.Writer, handler http.Handler, waves ...[]h2Fetch) []tlsWrite {
	t.Helper()
	cs, ss := net.Pipe()
	rec := &tlsRecorder{}
	srvTLS := tls.Server(recordingConn{ss, rec, false}, &tls.Config{Certificates: []tls.Certificate{testCertificate(t)},
		NextProtos: []string{"h2"}, MinVersion: version, MaxVersion: version})
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srvTLS.Handshake(); err != nil {
			return
		}
		(&http2.Server{}).ServeConn(srvTLS, &http2.ServeConnOpts{Handler: handler})
	}()
	cli := tls.Client(recordingConn{cs, rec, true}, &tls.Config{ServerName: "shop.example.test", InsecureSkipVerify: true,
		NextProtos: offered, KeyLogWriter: keyLog, MinVersion: version, MaxVersion: version})
	if err := cli.Handshake(); err != nil {
		t.Fatal(err)
	}
	cc, err := (&http2.Transport{}).NewClientConn(cli)
	if err != nil {
		t.Fatal(err)
	}
	for i, wave := range waves {
		rec.mu.Lock()
		rec.wave = i + 1
		rec.mu.Unlock()
		var wg sync.WaitGroup
		errs := make(chan error, len(wave))
		for _, f := range wave {
			wg.Go(func() {
				if f.after != nil {
					<-f.after
				}
				errs <- h2Get(cc, f)
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	cc.Close()
	cli.Close()
	<-served
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.writes
}

func h2Get(cc *http2.ClientConn, f h2Fetch) error {
	req, _ := http.NewRequest("GET", "https://shop.example.test"+f.path, nil)
	for i := 0; i+1 < len(f.header); i += 2 {
		req.Header.Set(f.header[i], f.header[i+1])
	}
	resp, err := cc.RoundTrip(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err
}

// A real HTTP/2 session over TLS with five concurrent requests, decrypted,
// gives five transactions flagged http2 with their paths and statuses;
// without the key log its turns are estimates.
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
	if len(keyless.txs) == 0 || keyless.conns[0].Flags&reconstruct.FlagHTTP2 == 0 {
		t.Fatalf("keyless: %d transactions, flags %v", len(keyless.txs), keyless.conns[0].Flags)
	}
	for _, tx := range keyless.txs {
		if tx.Flags&reconstruct.FlagTurnEstimate == 0 {
			t.Errorf("keyless turn %d: flags %v, want turn_estimate", tx.Index, tx.Flags)
		}
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

// h2Site serves a page over HTTP/2: /index.html (text/html, gzip-coded
// when gz; with paragraphs of 64 random hex digits, which gzip does not
// shrink much, over several DATA frames) names a stylesheet, a script and
// two images; the stylesheet names a background image.
func h2Site(gz bool, paragraphs int) (handler http.Handler, page []byte) {
	var text string
	for i := range paragraphs {
		text += fmt.Sprintf("<p>%x</p>\n", sha256.Sum256([]byte{byte(i), byte(i >> 8)}))
	}
	html := `<!doctype html><html><head><link rel="stylesheet" href="/style.css"><script src="/app.js"></script></head><body>` +
		text + `<img src="/img/0.png"><img src="/img/1.png"></body></html>`
	page = []byte(html)
	if gz {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(page)
		zw.Close()
		page = b.Bytes()
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch path := r.URL.Path; {
		case path == "/index.html":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			if gz {
				w.Header().Set("Content-Encoding", "gzip")
			}
			w.Write(page)
		case path == "/style.css":
			w.Header().Set("Content-Type", "text/css")
			fmt.Fprint(w, `body{background:url(/img/bg.png)}`)
		case path == "/app.js":
			w.Header().Set("Content-Type", "application/javascript")
			fmt.Fprint(w, `console.log(1)`)
		case path == "/old.html":
			http.Redirect(w, r, "/index.html", http.StatusFound)
		default:
			w.Header().Set("Content-Type", "image/png")
			w.Write(bytes.Repeat([]byte{0x89}, 2000))
		}
	})
	return h, page
}

// h2PageWaves is a browser loading h2Site's page: the page, then its
// objects at once, then what the stylesheet names, with Referers unless
// noReferer (a page whose policy is no-referrer), with Fetch Metadata.
func h2PageWaves(pageURL string, noReferer bool) [][]h2Fetch {
	ref := func(r string, kv ...string) []string {
		if noReferer {
			return kv
		}
		return append(kv, "Referer", r)
	}
	page := "https://shop.example.test" + pageURL
	css := "https://shop.example.test/style.css"
	img := "image/avif,image/webp,*/*"
	return [][]h2Fetch{
		{{path: pageURL, header: []string{"Accept", "text/html,application/xhtml+xml", "Sec-Fetch-Dest", "document"}}},
		{
			{path: "/style.css", header: ref(page, "Accept", "text/css,*/*;q=0.1", "Sec-Fetch-Dest", "style")},
			{path: "/app.js", header: ref(page, "Accept", "*/*", "Sec-Fetch-Dest", "script")},
			{path: "/img/0.png", header: ref(page, "Accept", img, "Sec-Fetch-Dest", "image")},
			{path: "/img/1.png", header: ref(page, "Accept", img, "Sec-Fetch-Dest", "image")},
		},
		{{path: "/img/bg.png", header: ref(css, "Accept", img, "Sec-Fetch-Dest", "image")}},
	}
}

// scriptH2 scripts one decrypted HTTP/2 connection from recorded writes.
func scriptH2(writes []tlsWrite) func(w *synth.Writer) {
	return func(w *synth.Writer) {
		c := w.Conn(client, netip.AddrPortFrom(server.Addr(), 443), 7500, 9500)
		scriptTLS(c, writes, 300*us, 30*ms)
		c.ClientFIN(synth.T(30))
		c.ServerFIN(synth.T(30) + 100*us)
		c.ClientAck(synth.T(30) + 2*D)
	}
}

// A page and its objects over decrypted HTTP/2 carry what the pageview
// stage reads, as over HTTP/1: Referer (redacted like the URL), Accept,
// Sec-Fetch-Dest, Content-Encoding, Location, and the bodies of the HTML
// and CSS responses as on the wire, which MaxBodyBytes and MaxBodyBudget
// bound (counting the cuts) and which leave the memory count with their
// transactions.
func TestDecryptedHTTP2PageFields(t *testing.T) {
	handler, page := h2Site(true, 1000)
	kl := tlsdecrypt.NewKeyLog(tlsdecrypt.KeyLogOptions{})
	waves := h2PageWaves("/index.html?sid=s3cret", false)
	waves = append(waves, []h2Fetch{{path: "/old.html"}})
	script := scriptH2(recordH2Waves(t, tls.VersionTLS13, kl, handler, waves...))
	out := analyze(t, defaultOpts(), reconstruct.Config{KeyLog: kl}, script)
	byPath := map[string]*reconstruct.Transaction{}
	for _, tx := range out.txs {
		byPath[tx.URL] = tx
	}
	if len(page) <= 2<<14 {
		t.Fatalf("page of %d bytes: under three DATA frames", len(page))
	}
	if len(out.txs) != 7 || len(byPath) != 7 {
		t.Fatalf("%d transactions: %v", len(out.txs), byPath)
	}
	pg := byPath["/index.html?sid=REDACTED"]
	if pg == nil || !bytes.Equal(pg.Body, page) || pg.BodyCut || pg.ContentEncoding != "gzip" ||
		pg.SecFetchDest != "document" || pg.Accept != "text/html,application/xhtml+xml" || pg.Referer != "" {
		t.Fatalf("page: %+v", pg)
	}
	const pageRef = "https://shop.example.test/index.html?sid=REDACTED"
	css := byPath["/style.css"]
	if css.Referer != pageRef || string(css.Body) != `body{background:url(/img/bg.png)}` || css.SecFetchDest != "style" ||
		css.ContentEncoding != "" {
		t.Errorf("stylesheet: referer %q body %q dest %q", css.Referer, css.Body, css.SecFetchDest)
	}
	for _, p := range []string{"/app.js", "/img/0.png", "/img/1.png"} {
		if tx := byPath[p]; tx.Referer != pageRef || tx.Body != nil || tx.BodyCut || tx.SecFetchDest == "" {
			t.Errorf("%s: referer %q body %d dest %q", p, tx.Referer, len(tx.Body), tx.SecFetchDest)
		}
	}
	if bg := byPath["/img/bg.png"]; bg.Referer != "https://shop.example.test/style.css" || bg.Accept != "image/avif,image/webp,*/*" {
		t.Errorf("background: referer %q accept %q", bg.Referer, bg.Accept)
	}
	if old := byPath["/old.html"]; old.Status != 302 || old.Location != "/index.html" || old.Body != nil {
		t.Errorf("redirect: status %d location %q body %q", old.Status, old.Location, old.Body)
	}
	if out.stats.BodiesCut != 0 || out.stats.MemoryInUse != 0 {
		t.Errorf("stats: %d bodies cut, memory %d", out.stats.BodiesCut, out.stats.MemoryInUse)
	}

	// Bounds: one body's, then all bodies' together.
	for _, cfg := range []reconstruct.Config{{MaxBodyBytes: 1000}, {MaxBodyBudget: 1000}} {
		cfg.KeyLog = kl
		out := analyze(t, defaultOpts(), cfg, script)
		var pg *reconstruct.Transaction
		for _, tx := range out.txs {
			if strings.HasPrefix(tx.URL, "/index.html") {
				pg = tx
			}
		}
		if pg == nil || len(pg.Body) != 1000 || !bytes.Equal(pg.Body, page[:1000]) || !pg.BodyCut ||
			out.stats.BodiesCut != 1 || out.stats.MemoryInUse != 0 {
			t.Errorf("%+v: body %d cut %v; %d cut, memory %d", cfg, len(pg.Body), pg.BodyCut, out.stats.BodiesCut,
				out.stats.MemoryInUse)
		}
	}
	// Without body capture, none is kept.
	out = analyze(t, defaultOpts(), reconstruct.Config{KeyLog: kl, MaxBodyBytes: -1}, script)
	for _, tx := range out.txs {
		if tx.Body != nil || tx.BodyCut {
			t.Errorf("%s: body %d kept with capture off", tx.URL, len(tx.Body))
		}
	}
}

// FuzzTrackerDecryptH2 is FuzzTrackerDecrypt seeded with decrypted
// HTTP/2 page loads, so that mutations of the TCP segments (losses,
// reordering, resets, truncation) end HTTP/2 streams whose page bodies
// are being kept in every way the tracker allows.
func FuzzTrackerDecryptH2(f *testing.F) {
	kl := tlsdecrypt.NewKeyLog(tlsdecrypt.KeyLogOptions{})
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		handler, _ := h2Site(version == tls.VersionTLS13, 20) // small: fast to run
		f.Add(fuzzSessionWhole(recordH2Waves(f, version, kl, handler, h2PageWaves("/index.html", false)...)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzTrack(t, data, kl)
	})
}

// fuzzSessionWhole is fuzzSession with every write sent whole before the
// other side answers: a write's last bytes that do not fill 8 go in a
// segment that resends the bytes before them (fuzzSession holds them
// back, which can leave the ClientHello unfinished when the ServerHello
// comes, and the connection keyless).
func fuzzSessionWhole(writes []tlsWrite) []byte {
	var out []byte
	seg := func(dir byte, seq, ack uint32, payload []byte) {
		out = append(out, 0x18, byte(len(payload)/8)<<3|dir)
		out = binary.BigEndian.AppendUint32(out, seq)
		out = binary.BigEndian.AppendUint32(out, ack)
		out = append(out, payload...)
	}
	seq := [2]uint32{1000, 5000}
	sent := [2][]byte{}
	out = append(out, 0x02, 0, 0, 0, 0x03, 0xe7, 0, 0, 0, 0)       // SYN, seq 999
	out = append(out, 0x12, 1, 0, 0, 0x13, 0x87, 0, 0, 0x03, 0xe8) // SYN/ACK, seq 4999
	out = append(out, 0x10, 0, 0, 0, 0x03, 0xe8, 0, 0, 0x13, 0x88) // ACK
	for _, w := range writes {
		dir := byte(1)
		if w.fromClient {
			dir = 0
		}
		b := w.b
		for len(b) > 0 {
			n := min(len(b)/8*8, 248)
			from := seq[dir]
			payload := b[:n]
			if n == 0 && len(sent[dir])+len(b) >= 8 {
				// The tail: resend what it needs to fill 8 bytes.
				back := 8 - len(b)
				payload = append(append([]byte(nil), sent[dir][len(sent[dir])-back:]...), b...)
				from -= uint32(back)
				n = len(b)
			} else if n == 0 {
				break // fewer than 8 bytes sent in all: rare enough to drop
			}
			seg(dir, from, seq[1-dir], payload)
			sent[dir] = append(sent[dir], b[:n]...)
			if len(sent[dir]) > 8 {
				sent[dir] = sent[dir][len(sent[dir])-8:]
			}
			seq[dir] += uint32(n)
			b = b[n:]
		}
	}
	return out
}
