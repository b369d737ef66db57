package testbed

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/andybalholm/brotli"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// PageTruth is one page load as the client itself reported it: which
// requests made up the page (the client's word) and its own timings (its
// clock, for comparison only). Times are Unix nanoseconds of the client's
// clock. Wire holds the truth the tests compare against, from the client's
// own capture (AttachWireTruth).
type PageTruth struct {
	Source string `json:"source"` // "go", "go-fresh", "chromium" or "pipeline"
	Client string `json:"client"` // source address
	URL    string `json:"url"`    // the container's path and query (after redirects)
	// NavURL is what the client was asked to load (the first redirect hop
	// when there are redirects).
	NavURL string `json:"nav_url,omitempty"`
	// Start: the client began the first request's connection (or, on a
	// reused connection, its request). End: the last byte of the last
	// in-load object arrived. Client clock (Go client) or Navigation and
	// Resource Timing (Chromium).
	Start   int64 `json:"start"`
	End     int64 `json:"end"`
	TotalNS int64 `json:"total_ns"`
	// LoadEventNS (Chromium): navigation start -> load event start, which
	// also holds browser work no monitor sees (startup of the navigation,
	// parsing, decoding after the last byte). LoadEventAt: the same
	// instant, Unix ns (browser clock).
	LoadEventNS int64 `json:"load_event_ns,omitempty"`
	LoadEventAt int64 `json:"load_event_at,omitempty"`
	// Redirects are the hops before the container; Objects the in-load
	// embedded objects; AfterLoad what the client fetched for the page
	// after its load event (favicon, beacons).
	Redirects []ObjectTruth `json:"redirects,omitempty"`
	Container ObjectTruth   `json:"container"`
	Objects   []ObjectTruth `json:"objects"`
	AfterLoad []ObjectTruth `json:"after_load,omitempty"`
	// NoReferer: the page's objects were requested without Referer (a
	// no-referrer page, or a client that sends none).
	NoReferer bool   `json:"no_referer,omitempty"`
	Encoding  string `json:"encoding,omitempty"` // the container's Content-Encoding
	// Tab (Chromium) is the tab that loaded the page; NavIssued is when
	// the test asked for the navigation (test clock: only a window bound).
	Tab       int            `json:"tab,omitempty"`
	NavIssued int64          `json:"nav_issued,omitempty"`
	Err       string         `json:"error,omitempty"`
	Extra     map[string]any `json:"extra,omitempty"`
	Wire      *PageWire      `json:"wire,omitempty"`
}

// ObjectTruth is one request's timeline at the client (Unix ns, 0 when
// unknown). Reused: no new connection was opened for it.
type ObjectTruth struct {
	URL           string `json:"url"`
	Method        string `json:"method,omitempty"`
	Role          string `json:"role,omitempty"`
	Status        int    `json:"status,omitempty"`
	Bytes         int64  `json:"bytes"`
	Reused        bool   `json:"reused"`
	LocalPort     int    `json:"local_port,omitempty"`
	ConnectStart  int64  `json:"connect_start,omitempty"`
	ConnectEnd    int64  `json:"connect_end,omitempty"`
	RequestStart  int64  `json:"request_start"`
	ResponseFirst int64  `json:"response_first"`
	ResponseEnd   int64  `json:"response_end"`
}

// Begin is when the client started this object as rtmon's transaction does:
// the connection's start on a fresh connection, else the request.
func (o ObjectTruth) Begin() int64 {
	if !o.Reused && o.ConnectStart != 0 {
		return o.ConnectStart
	}
	return o.RequestStart
}

// NSDialer dials TCP from a chosen client address inside the client's
// namespace.
type NSDialer struct {
	NS    string
	Local netip.Addr
}

// Dialer returns an NSDialer for the testbed's client namespace.
func Dialer(tb *Testbed, local netip.Addr) *NSDialer {
	return &NSDialer{NS: tb.Client.NS, Local: local}
}

// DialContext dials on a thread inside the namespace. ctx carries any
// httptrace hooks through to net.Dialer.
func (d *NSDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNS(d.NS, func() (err error) {
		nd := net.Dialer{LocalAddr: &net.TCPAddr{IP: d.Local.AsSlice()}, Timeout: 20 * time.Second}
		c, err = nd.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// GoClient fetches pages like a browser: the container (following
// redirects), then every object its HTML references (stylesheets, preloads,
// scripts, images with their srcset's 1x candidate, inline style url()s)
// over at most 6 keep-alive connections, timing each step with its own
// clock. Browser-like options add what real clients do beyond the page
// itself.
type GoClient struct {
	tb    *Testbed
	Local netip.Addr
	Base  string // "http://203.0.113.2"
	// OneRequestPerConnection turns keep-alive off (HTTP/1.0 style, as the
	// browsers of the RLM experiments): which object grabs the container's
	// idle connection is then no scheduling lottery.
	OneRequestPerConnection bool
	// RequestTimeout bounds each request (0: 30 s). A browser waits
	// minutes; an overloaded server's half-open connections take the
	// client's doubling resends, which can run past 30 s.
	RequestTimeout time.Duration
	// NoReferer: no Referer on objects, favicon and beacon (privacy
	// settings, some apps and proxies).
	NoReferer bool
	// AfterLoad: after the last object and RenderDelay, fetch /favicon.ico
	// and post a beacon (/beacon?u=<container path>), as browsers and page
	// scripts do after the load event.
	AfterLoad   bool
	RenderDelay time.Duration // default 30 ms
	// AcceptBrotli adds br to Accept-Encoding (gzip is always offered; the
	// container is decompressed to be parsed).
	AcceptBrotli bool
	// KeepConnections keeps one transport across Loads, so a page's
	// container and objects reuse the previous page's idle keep-alive
	// connections (within the server's keep-alive timeout). Close ends
	// them. Without it every Load has its own transport, closed at its end.
	KeepConnections bool
	// TLS, if set, makes the client speak HTTPS (Base is then https://).
	TLS *GoClientTLS

	tr *http.Transport
}

// GoClientTLS is a GoClient's HTTPS: the server's address (Base's host
// name is not resolved), where the client writes its TLS secrets (NSS key
// log format, as SSLKEYLOGFILE), and whether it takes HTTP/2. It offers h2
// and HTTP/1.1 either way, as browsers do; over HTTP/1.1 the server must
// not choose h2.
type GoClientTLS struct {
	Addr   netip.AddrPort
	KeyLog io.Writer
	HTTP2  bool
	// RootCAs, if set, verify the server's certificate (for Base's host);
	// without them the client takes any certificate.
	RootCAs *x509.CertPool
}

// NewGoClient makes a client using source address local.
func (tb *Testbed) NewGoClient(local netip.Addr, base string) *GoClient {
	return &GoClient{tb: tb, Local: local, Base: base}
}

// GoClientUA is the Go client's User-Agent.
const GoClientUA = "rtmon-testbed-goclient/1"

// Close ends the idle connections of a KeepConnections client.
func (g *GoClient) Close() {
	if g.tr != nil {
		g.tr.CloseIdleConnections()
		g.tr = nil
	}
}

func (g *GoClient) transport() *http.Transport {
	if g.tr != nil {
		return g.tr
	}
	tr := &http.Transport{
		DialContext:         Dialer(g.tb, g.Local).DialContext,
		MaxConnsPerHost:     6,
		MaxIdleConnsPerHost: 6,
		IdleConnTimeout:     time.Minute,
		DisableKeepAlives:   g.OneRequestPerConnection,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	if t := g.TLS; t != nil {
		dial := tr.DialContext
		tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dial(ctx, network, t.Addr.String())
		}
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: t.RootCAs == nil, RootCAs: t.RootCAs,
			KeyLogWriter: t.KeyLog, NextProtos: []string{"h2", "http/1.1"}}
		if t.HTTP2 {
			tr.ForceAttemptHTTP2, tr.TLSNextProto = true, nil
		}
	}
	if g.KeepConnections {
		g.tr = tr
	}
	return tr
}

// maxRedirects bounds a redirect chain.
const maxRedirects = 5

// Load fetches one page. Without KeepConnections every pageview gets its
// own transport, closed at the end, so pageviews are independent.
func (g *GoClient) Load(ctx context.Context, path string) (PageTruth, error) {
	tr := g.transport()
	if !g.KeepConnections {
		defer tr.CloseIdleConnections()
	}
	timeout := g.RequestTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	hc := &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	pt := PageTruth{Source: "go", Client: g.Local.String(), URL: path, NavURL: path, NoReferer: g.NoReferer,
		NavIssued: time.Now().UnixNano()}
	if g.OneRequestPerConnection {
		pt.Source = "go-fresh"
	}
	body, hdr, err := g.navigate(ctx, hc, &pt, path)
	if err != nil {
		return pt, err
	}
	cur := pt.URL
	html, err := decodeBody(body, hdr.Get("Content-Encoding"))
	if err != nil {
		pt.Err = err.Error()
		return pt, fmt.Errorf("container %s: %w", cur, err)
	}
	pt.Encoding = hdr.Get("Content-Encoding")
	pageURL, _ := url.Parse(g.Base + cur)
	referer := pageURL.String()
	if g.NoReferer {
		referer = ""
	}
	if err := g.loadObjects(ctx, hc, &pt, path, embeddedObjects(html, pageURL), referer); err != nil {
		return pt, err
	}
	if !g.AfterLoad {
		return pt, nil
	}
	delay := g.RenderDelay
	if delay == 0 {
		delay = 30 * time.Millisecond
	}
	if err := sleepCtx(ctx, delay); err != nil {
		return pt, err
	}
	err = g.loadAfterLoad(ctx, hc, &pt, path, referer)
	return pt, err
}

// navigate follows the redirect hops from path to the container, which it
// returns with its header; pt gets the hops, the container and its URL.
func (g *GoClient) navigate(ctx context.Context, hc *http.Client, pt *PageTruth, path string) ([]byte, http.Header, error) {
	enc := "gzip"
	if g.AcceptBrotli {
		enc = "gzip, br"
	}
	cur := path
	var cont ObjectTruth
	var body []byte
	var hdr http.Header
	for hop := 0; ; hop++ {
		var err error
		cont, body, hdr, err = fetchOne(ctx, hc, http.MethodGet, g.Base+cur, "", enc)
		if err != nil || !isRedirect(cont.Status) {
			if err == nil && cont.Status != http.StatusOK {
				err = fmt.Errorf("get %s: status %d", g.Base+cur, cont.Status)
			}
			pt.Container = cont
			if err != nil {
				pt.Err = err.Error()
				return nil, nil, err
			}
			break
		}
		if hop >= maxRedirects {
			err := fmt.Errorf("get %s: more than %d redirects", path, maxRedirects)
			pt.Err = err.Error()
			return nil, nil, err
		}
		cont.Role = RoleRedirect
		pt.Redirects = append(pt.Redirects, cont)
		loc, err := url.Parse(hdr.Get("Location"))
		if err != nil {
			return nil, nil, fmt.Errorf("redirect from %s: %w", cur, err)
		}
		base, _ := url.Parse(g.Base + cur)
		cur = base.ResolveReference(loc).RequestURI()
	}
	pt.Container.Role = RoleContainer
	pt.URL = cur
	return body, hdr, nil
}

// loadObjects fetches the page's embedded objects at once and sets pt's
// objects and span.
func (g *GoClient) loadObjects(ctx context.Context, hc *http.Client, pt *PageTruth, path string, paths []string, referer string) error {
	objs, errs := inParallel(len(paths), func(i int) (ObjectTruth, error) {
		o, _, err := fetch(ctx, hc, g.Base+paths[i], referer)
		o.Role = RoleObject
		return o, err
	})
	pt.Objects = objs
	pt.Start = pt.Container.Begin()
	if len(pt.Redirects) > 0 {
		pt.Start = pt.Redirects[0].Begin()
	}
	pt.End = pt.Container.ResponseEnd
	for i, o := range objs {
		if errs[i] != nil {
			pt.Err = errs[i].Error()
			return fmt.Errorf("page %s: %w", path, errs[i])
		}
		pt.End = max(pt.End, o.ResponseEnd)
	}
	pt.TotalNS = pt.End - pt.Start
	return nil
}

// loadAfterLoad fetches the favicon and posts the beacon at once, as
// after the load event, and sets pt's after-load objects.
func (g *GoClient) loadAfterLoad(ctx context.Context, hc *http.Client, pt *PageTruth, path, referer string) error {
	reqs := [2]struct{ method, url string }{
		{http.MethodGet, g.Base + FaviconPath},
		{http.MethodPost, g.Base + "/beacon?u=" + url.QueryEscape(pt.URL)},
	}
	after, errs := inParallel(len(reqs), func(i int) (ObjectTruth, error) {
		o, _, _, err := fetchOne(ctx, hc, reqs[i].method, reqs[i].url, referer, "")
		return o, err
	})
	for i := range after {
		after[i].Role = RoleAfterLoad
		if errs[i] == nil && after[i].Status >= 300 {
			errs[i] = fmt.Errorf("%s %s: status %d", after[i].Method, after[i].URL, after[i].Status)
		}
		if errs[i] != nil {
			pt.Err = errs[i].Error()
			return fmt.Errorf("page %s after load: %w", path, errs[i])
		}
	}
	pt.AfterLoad = after
	return nil
}

// Request roles within a page.
const (
	RoleRedirect  = "redirect"
	RoleContainer = "container"
	RoleObject    = "object"
	RoleAfterLoad = "after_load"
)

func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// decodeBody undoes a Content-Encoding (gzip or br).
func decodeBody(b []byte, enc string) ([]byte, error) {
	switch strings.ToLower(strings.TrimSpace(enc)) {
	case "", "identity":
		return b, nil
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return io.ReadAll(zr)
	case "br":
		return io.ReadAll(brotli.NewReader(bytes.NewReader(b)))
	}
	return nil, fmt.Errorf("unknown content encoding %q", enc)
}

// embeddedObjects lists what a browser would fetch for the page, in
// document order without duplicates, as same-origin request URIs: link
// stylesheets and preloads, script src, img src (or its srcset's 1x
// candidate), url()s in style attributes.
func embeddedObjects(doc []byte, page *url.URL) []string {
	var out []string
	seen := map[string]bool{}
	add := func(ref string) {
		ref = strings.TrimSpace(ref)
		if ref == "" || strings.HasPrefix(ref, "data:") {
			return
		}
		u, err := page.Parse(ref)
		if err != nil || u.Host != page.Host || (u.Scheme != "http" && u.Scheme != "https") {
			return
		}
		p := u.RequestURI()
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	z := html.NewTokenizer(bytes.NewReader(doc))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return out
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		tok := z.Token()
		attr := map[string]string{}
		for _, a := range tok.Attr {
			attr[strings.ToLower(a.Key)] = a.Val
		}
		switch tok.DataAtom {
		case atom.Link:
			for _, rel := range strings.Fields(strings.ToLower(attr["rel"])) {
				if rel == "stylesheet" || rel == "preload" {
					add(attr["href"])
					break
				}
			}
		case atom.Script:
			add(attr["src"])
		case atom.Img:
			if c := srcset1x(attr["srcset"]); c != "" {
				add(c)
			} else {
				add(attr["src"])
			}
		}
		if st, ok := attr["style"]; ok {
			for _, m := range cssURLRE.FindAllStringSubmatch(st, -1) {
				add(m[1])
			}
		}
	}
}

var cssURLRE = regexp.MustCompile(`url\(\s*['"]?([^'")\s]+)['"]?\s*\)`)

// srcset1x is the candidate a display of device pixel ratio 1 uses: the
// one with descriptor 1x (or none), else the first.
func srcset1x(srcset string) string {
	first := ""
	for _, cand := range strings.Split(srcset, ",") {
		f := strings.Fields(cand)
		if len(f) == 0 {
			continue
		}
		if first == "" {
			first = f[0]
		}
		if len(f) == 1 || f[1] == "1x" {
			return f[0]
		}
	}
	return first
}

// pathOf is the path and query of an absolute URL.
func pathOf(u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return u
	}
	return pu.RequestURI()
}

// fetch GETs one URL and reads the whole body, recording the timeline; a
// status other than 200 is an error.
func fetch(ctx context.Context, hc *http.Client, url, referer string) (ObjectTruth, []byte, error) {
	o, body, _, err := fetchOne(ctx, hc, http.MethodGet, url, referer, "")
	if err == nil && o.Status != http.StatusOK {
		return o, body, fmt.Errorf("get %s: status %s", url, strconv.Itoa(o.Status))
	}
	return o, body, err
}

// fetchOne makes one request (a POST carries a small body) and reads the
// whole response, recording the timeline with the client's clock.
func fetchOne(ctx context.Context, hc *http.Client, method, url, referer, acceptEncoding string) (ObjectTruth, []byte, http.Header, error) {
	o := ObjectTruth{URL: pathOf(url), Method: method}
	now := func() int64 { return time.Now().UnixNano() }
	var mu sync.Mutex
	trace := &httptrace.ClientTrace{
		ConnectStart: func(string, string) { mu.Lock(); o.ConnectStart = now(); mu.Unlock() },
		ConnectDone:  func(string, string, error) { mu.Lock(); o.ConnectEnd = now(); mu.Unlock() },
		GotConn: func(ci httptrace.GotConnInfo) {
			mu.Lock()
			defer mu.Unlock()
			o.Reused = ci.Reused
			if a, ok := ci.Conn.LocalAddr().(*net.TCPAddr); ok {
				o.LocalPort = a.Port
			}
			// The request is written right after the connection is handed over.
			o.RequestStart = now()
		},
		GotFirstResponseByte: func() { mu.Lock(); o.ResponseFirst = now(); mu.Unlock() },
	}
	var rb io.Reader
	if method == http.MethodPost {
		rb = strings.NewReader("loaded")
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), method, url, rb)
	if err != nil {
		return o, nil, nil, fmt.Errorf("request %s: %w", url, err)
	}
	req.Header.Set("User-Agent", GoClientUA)
	if referer != "" {
		req.Header.Set("Referer", referer)
	}
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	if rb != nil {
		req.Header.Set("Content-Type", "text/plain;charset=UTF-8")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return o, nil, nil, fmt.Errorf("%s %s: %w", strings.ToLower(method), url, err)
	}
	body, err := io.ReadAll(resp.Body)
	end := now()
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	o.ResponseEnd = end
	o.Status = resp.StatusCode
	o.Bytes = int64(len(body))
	if err != nil {
		return o, nil, resp.Header, fmt.Errorf("read %s: %w", url, err)
	}
	return o, body, resp.Header, nil
}
