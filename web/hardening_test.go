package web

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A UI without credentials answers only to loopback names and its allowed
// hosts: a page whose name was rebound to 127.0.0.1 gets 421. With a token
// the Host does not matter: such a page has no token to send.
func TestHostCheckRefusesRebinding(t *testing.T) {
	st := knownCapture(t)
	_, open := newTestServer(t, Config{Store: st, AllowedHosts: []string{"RTMON.lan."}})
	_, withToken := newTestServer(t, Config{Store: st, Listen: "0.0.0.0:0", Token: "s3cret"})
	for _, c := range []struct {
		ts    *httptest.Server
		host  string
		token bool
		want  int
	}{
		{open, "evil.example", false, http.StatusMisdirectedRequest},
		{open, "evil.example:8080", false, http.StatusMisdirectedRequest},
		{open, "127.0.0.1.evil.example", false, http.StatusMisdirectedRequest},
		{open, "localhost:8080", false, http.StatusOK},
		{open, "127.0.0.1", false, http.StatusOK},
		{open, "[::1]:8080", false, http.StatusOK},
		{open, "rtmon.lan:8080", false, http.StatusOK},
		{withToken, "evil.example", true, http.StatusOK},
		{withToken, "evil.example", false, http.StatusUnauthorized},
	} {
		if got := metaStatus(t, c.ts, c.host, "", c.token); got != c.want {
			t.Errorf("Host %s (token %v): %d, want %d", c.host, c.token, got, c.want)
		}
	}
}

// metaStatus is the status of GET /api/meta with the given Host, Origin
// (none when empty) and the test token.
func metaStatus(t *testing.T, ts *httptest.Server, host, origin string, token bool) int {
	t.Helper()
	req, _ := http.NewRequest("GET", ts.URL+"/api/meta", nil)
	req.Host = host
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if token {
		req.Header.Set("Authorization", "Bearer s3cret")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	return resp.StatusCode
}

// --public-url's host is served without credentials, and a request a page
// of another origin made a browser send (its Origin) is refused, with or
// without a token; the UI's own origin, loopback names and the public
// URL's pass. A bad public URL is refused at start.
func TestOriginCheckAndPublicURL(t *testing.T) {
	st := knownCapture(t)
	_, open := newTestServer(t, Config{Store: st, PublicURL: "https://rtmon.example.com/"})
	_, withToken := newTestServer(t, Config{Store: st, Listen: "0.0.0.0:0", Token: "s3cret"})
	for _, c := range []struct {
		ts           *httptest.Server
		host, origin string
		want         int
	}{
		{open, "rtmon.example.com", "", http.StatusOK},
		{open, "rtmon.example.com", "https://rtmon.example.com", http.StatusOK},
		{open, "127.0.0.1:8080", "http://127.0.0.1:8080", http.StatusOK},
		{open, "localhost:8080", "http://localhost:3000", http.StatusOK},
		{open, "127.0.0.1:8080", "https://evil.example", http.StatusForbidden},
		{open, "127.0.0.1:8080", "null", http.StatusForbidden},
		{open, "other.example.com", "", http.StatusMisdirectedRequest},
		{withToken, "sensor.lan:8080", "http://sensor.lan:8080", http.StatusOK},
		{withToken, "sensor.lan:8080", "https://evil.example", http.StatusForbidden},
	} {
		if got := metaStatus(t, c.ts, c.host, c.origin, c.ts == withToken); got != c.want {
			t.Errorf("Host %s, Origin %q: %d, want %d", c.host, c.origin, got, c.want)
		}
	}
	if _, err := NewServer(Config{Store: st, PublicURL: "ftp://x"}); err == nil || !strings.Contains(err.Error(), "public URL") {
		t.Errorf("public URL ftp://x: err %v, want it refused", err)
	}
}

// The token login redirects to the same path on this site, never to the
// host a path of "//host" or "/\host" names.
func TestTokenLoginRedirectStaysOnSite(t *testing.T) {
	st := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: st, Listen: "0.0.0.0:0", Token: "s3cret"})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"//evil.example/%2e%2e?token=s3cret", "/%5Cevil.example?token=s3cret",
		"///evil.example?x=1&token=s3cret", "/search?kind=pageviews&token=s3cret"} {
		req, err := http.NewRequest("GET", ts.URL+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.URL.Opaque = path[:strings.Index(path, "?")] // sent as written
		req.URL.RawQuery = path[strings.Index(path, "?")+1:]
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		loc := resp.Header.Get("Location")
		u, err := url.Parse(loc)
		if resp.StatusCode != http.StatusSeeOther || err != nil || u.Host != "" || u.Scheme != "" ||
			strings.HasPrefix(loc, "//") || strings.HasPrefix(loc, "/\\") || strings.Contains(loc, "token") {
			t.Errorf("%s: %d, Location %q: want a path on this site without the token", path, resp.StatusCode, loc)
		}
	}
	for in, want := range map[string]string{
		"//evil.example/a?token=x&b=1": "/evil.example/a?b=1",
		"/\\evil.example":              "/%5Cevil.example", // escaped: a path on this site
		"/search?token=x":              "/search",
	} {
		u, _ := url.ParseRequestURI(in) // as the server reads a request target
		if got := sameSiteTarget(u); got != want {
			t.Errorf("sameSiteTarget(%q) = %q, want %q", in, got, want)
		}
	}
}

// The login cookie is not the token or a fixed function of it, expires, is
// bound to the token, and is Secure over TLS.
func TestSessionCookie(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	v := sessionCookie("s3cret", now)
	if strings.Contains(v, "s3cret") || v == sessionCookie("s3cret", now) {
		t.Errorf("cookie %q: want no token and a random value per login", v)
	}
	for _, c := range []struct {
		what  string
		value string
		token string
		at    time.Time
		ok    bool
	}{
		{"fresh", v, "s3cret", now, true},
		{"six days old", v, "s3cret", now.Add(6 * 24 * time.Hour), true},
		{"eight days old", v, "s3cret", now.Add(8 * 24 * time.Hour), false},
		{"issued in the future", v, "s3cret", now.Add(-time.Hour), false},
		{"other token", v, "other", now, false},
		{"tampered", v[:len(v)-2] + "AA", "s3cret", now, false},
		{"garbage", "!!", "s3cret", now, false},
	} {
		if got := validSessionCookie(c.value, c.token, c.at); got != c.ok {
			t.Errorf("%s: valid %v, want %v", c.what, got, c.ok)
		}
	}
	st := knownCapture(t)
	s, err := NewServer(Config{Store: st, Listen: "0.0.0.0:0", Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewTLSServer(s.Handler())
	t.Cleanup(ts.Close)
	client := ts.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Get(ts.URL + "/?token=s3cret")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if cks := resp.Cookies(); len(cks) != 1 || !cks[0].Secure || !cks[0].HttpOnly || cks[0].MaxAge != int(sessionMaxAge/time.Second) {
		t.Errorf("cookies over TLS: %+v: want one Secure, HttpOnly cookie with a week's Max-Age", cks)
	}
}

// Numbers in query parameters that would overflow are refused.
func TestOverflowingParametersRefused(t *testing.T) {
	st := knownCapture(t)
	_, ts := newTestServer(t, Config{Store: st})
	for _, q := range []string{"page=9223372036854775807", "page=100000000&limit=1000", "min=1e308", "min=-1", "min=NaN",
		"last=999999999999d", "last=-5d", "last=9999999999h"} {
		resp := get(t, ts.URL+"/api/search?"+q)
		body := readAll(t, resp)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", q, resp.StatusCode, body)
		}
	}
	if resp := get(t, ts.URL+"/api/search?page=2&min=1.5&last=36500d"); resp.StatusCode != http.StatusOK {
		t.Errorf("sane parameters: %d %s", resp.StatusCode, readAll(t, resp))
	}
}

// A browser that stops reading the live stream is disconnected once a
// write has waited LiveWriteTimeout, and holds nothing after.
func TestLiveStreamDropsAReaderThatStopped(t *testing.T) {
	st := knownCapture(t)
	feed := NewLiveFeed()
	_, ts := newTestServer(t, Config{Store: st, Live: feed, LiveWriteTimeout: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /api/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil { // the status line, then nothing more is read
		t.Fatal(err)
	}
	big := LiveEvent{Classes: []LiveClass{{Class: strings.Repeat("c", 1<<18)}}}
	subscribed := false
	// The stream ends once the socket buffers are full and a write waited
	// 200 ms; how soon depends on the machine, not what is asserted.
	for i := 0; ; i++ {
		feed.mu.Lock()
		n := len(feed.subs)
		feed.mu.Unlock()
		subscribed = subscribed || n > 0
		if subscribed && n == 0 {
			break
		}
		if i > 6000 {
			t.Fatalf("after %d events the reader that stopped is still subscribed", i)
		}
		feed.Publish(big)
		time.Sleep(10 * time.Millisecond)
	}
}

// With a certificate the UI is HTTPS only; half a TLS configuration or a
// bad certificate is an error at start.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	st := knownCapture(t)
	if _, err := NewServer(Config{Store: st, TLSCert: certFile}); err == nil {
		t.Error("a certificate without a key was accepted")
	}
	if _, err := NewServer(Config{Store: st, TLSCert: keyFile, TLSKey: certFile}); err == nil {
		t.Error("swapped certificate and key were accepted")
	}
	s, err := NewServer(Config{Store: st, Listen: "127.0.0.1:0", TLSCert: certFile, TLSKey: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if !strings.HasPrefix(s.URL(), "https://") {
		t.Fatalf("URL %s", s.URL())
	}
	pool := x509.NewCertPool()
	pool.AddCert(must(x509.ParseCertificate(der)))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(s.URL() + "api/meta")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if resp.StatusCode != http.StatusOK || resp.TLS == nil {
		t.Errorf("over HTTPS: %d (TLS %v)", resp.StatusCode, resp.TLS != nil)
	}
	plain, err := http.Get("http://" + strings.TrimPrefix(s.URL(), "https://") + "api/meta")
	if err == nil {
		body := readAll(t, plain)
		if plain.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP served the UI: %s", body)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
