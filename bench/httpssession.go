package bench

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
	mrand "math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// httpsHost is the server name of the generated HTTPS capture.
const httpsHost = "shop.example.test"

// Exchange is one request of a recorded session and the response it got.
type Exchange struct {
	URL    string
	Status int
	Size   int // response body bytes
}

// tlsWrite is one Write of one side of a session, as it went on the wire.
type tlsWrite struct {
	fromClient bool
	phase      int // 0: handshake; i > 0: request i and its response; -1: closing
	b          []byte
}

// Session is a real TLS session (crypto/tls on both ends of a net.Pipe)
// carrying Exchanges over one HTTP/1.1 keep-alive connection.
type Session struct {
	Version   uint16
	Exchanges []Exchange
	writes    []tlsWrite
}

// recorder keeps both sides' writes in the order they were made; the pipe
// is synchronous, so that order is the protocol's.
type recorder struct {
	mu     sync.Mutex
	phase  int
	writes []tlsWrite
}

func (r *recorder) setPhase(p int) {
	r.mu.Lock()
	r.phase = p
	r.mu.Unlock()
}

type recordingConn struct {
	net.Conn
	rec    *recorder
	client bool
}

func (c recordingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		// Only what went through: a write to a closed pipe sent nothing.
		c.rec.mu.Lock()
		c.rec.writes = append(c.rec.writes, tlsWrite{c.client, c.rec.phase, append([]byte(nil), b[:n]...)})
		c.rec.mu.Unlock()
	}
	return n, err
}

// selfSigned makes the server's certificate; one serves every session, as
// one site's does.
func selfSigned() (tls.Certificate, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certificate key: %w", err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{httpsHost},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}, nil
}

// planExchanges picks 2-12 requests with a site's mix of sizes: mostly
// small assets, some medium, a few large, and some 304s and 404s.
func planExchanges(rng *mrand.Rand, session int) []Exchange {
	kinds := []struct{ ext, dir string }{{"css", "css"}, {"js", "js"}, {"png", "img"}, {"woff2", "fonts"}, {"json", "api"}}
	n := 2 + rng.IntN(11)
	ex := make([]Exchange, n)
	for i := range ex {
		k := kinds[rng.IntN(len(kinds))]
		e := Exchange{URL: fmt.Sprintf("/%s/s%d-%d.%s", k.dir, session, i, k.ext), Status: 200}
		switch p := rng.Float64(); {
		case i == 0:
			e.URL, e.Size = fmt.Sprintf("/shop/page-%d.html", session), 8000+rng.IntN(40000)
		case p < 0.05:
			e.Status = 304
		case p < 0.08:
			e.Status, e.Size = 404, 150
		case p < 0.65:
			e.Size = 200 + rng.IntN(5000)
		case p < 0.92:
			e.Size = 5000 + rng.IntN(45000)
		default:
			e.Size = 50000 + rng.IntN(250000)
		}
		ex[i] = e
	}
	return ex
}

// recordSession runs one session: the client fetches ex in order on one
// connection and closes it. The client's secrets go to keyLog.
func recordSession(version uint16, cert tls.Certificate, ex []Exchange, keyLog io.Writer) (*Session, error) {
	cs, ss := net.Pipe()
	// A protocol mistake here would block both ends forever.
	deadline := time.Now().Add(30 * time.Second)
	_ = cs.SetDeadline(deadline)
	_ = ss.SetDeadline(deadline)
	rec := &recorder{}
	alpn := []string{"http/1.1"}
	srv := tls.Server(recordingConn{ss, rec, false}, &tls.Config{Certificates: []tls.Certificate{cert},
		MinVersion: version, MaxVersion: version, NextProtos: alpn})
	done := make(chan error, 1)
	go func() { done <- serveExchanges(srv, ss, ex) }()
	cli := tls.Client(recordingConn{cs, rec, true}, &tls.Config{ServerName: httpsHost, InsecureSkipVerify: true,
		MinVersion: version, MaxVersion: version, NextProtos: alpn, KeyLogWriter: keyLog})
	err := fetchExchanges(cli, rec, ex)
	rec.setPhase(-1)
	cli.Close()
	if serr := <-done; err == nil {
		err = serr
	}
	if err != nil {
		return nil, fmt.Errorf("recording a %s session: %w", tls.VersionName(version), err)
	}
	return &Session{Version: version, Exchanges: ex, writes: rec.writes}, nil
}

func fetchExchanges(cli *tls.Conn, rec *recorder, ex []Exchange) error {
	if err := cli.Handshake(); err != nil {
		return fmt.Errorf("client handshake: %w", err)
	}
	r := bufio.NewReader(cli)
	for i, e := range ex {
		rec.setPhase(i + 1)
		if _, err := fmt.Fprintf(cli, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: rtmon-bench\r\nAccept: */*\r\n\r\n", e.URL, httpsHost); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return fmt.Errorf("response %d: %w", i, err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("response %d body: %w", i, err)
		}
	}
	return nil
}

// serveExchanges answers each request with its planned response. At the
// client's close it drops the pipe without a close_notify of its own, so
// the recording does not depend on which end closes first.
func serveExchanges(srv *tls.Conn, raw net.Conn, ex []Exchange) error {
	defer raw.Close()
	r := bufio.NewReader(srv)
	w := bufio.NewWriterSize(srv, 64<<10)
	for i := 0; ; i++ {
		req, err := http.ReadRequest(r)
		if err != nil {
			if i == len(ex) {
				return nil // the client closed after its last request
			}
			return fmt.Errorf("server, request %d: %w", i, err)
		}
		if i >= len(ex) || req.URL.Path != ex[i].URL {
			return fmt.Errorf("server: unexpected request %d for %s", i, req.URL)
		}
		e := ex[i]
		fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nServer: nginx\r\nDate: Thu, 01 Jan 2026 00:00:00 GMT\r\n", e.Status, http.StatusText(e.Status))
		if e.Status != 304 {
			fmt.Fprintf(w, "Content-Type: %s\r\nContent-Length: %d\r\n", contentType(e.URL), e.Size)
		}
		w.WriteString("Cache-Control: max-age=3600\r\n\r\n")
		w.WriteString(strings.Repeat("x", e.Size))
		if err := w.Flush(); err != nil {
			return fmt.Errorf("server, response %d: %w", i, err)
		}
	}
}

func contentType(url string) string {
	switch url[strings.LastIndexByte(url, '.')+1:] {
	case "html":
		return "text/html"
	case "css":
		return "text/css"
	case "js":
		return "application/javascript"
	case "png":
		return "image/png"
	case "woff2":
		return "font/woff2"
	}
	return "application/json"
}
