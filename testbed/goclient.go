package testbed

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// PageTruth is one page load as the client itself measured it. Times are
// Unix nanoseconds of the client's clock.
type PageTruth struct {
	Source string `json:"source"` // "go" or "chromium"
	Client string `json:"client"` // source address
	URL    string `json:"url"`    // the container's path and query
	// Start: the client began the container's connection (or, on a reused
	// connection, its request). End: the last byte of the last object
	// arrived. These are the instants a server-side monitor can estimate.
	Start   int64 `json:"start"`
	End     int64 `json:"end"`
	TotalNS int64 `json:"total_ns"`
	// LoadEventNS (Chromium): navigation start -> load event start, which
	// also holds browser work no monitor sees (startup of the navigation,
	// parsing, decoding after the last byte).
	LoadEventNS int64          `json:"load_event_ns,omitempty"`
	Container   ObjectTruth    `json:"container"`
	Objects     []ObjectTruth  `json:"objects"`
	Err         string         `json:"error,omitempty"`
	Extra       map[string]any `json:"extra,omitempty"`
}

// ObjectTruth is one request's timeline at the client (Unix ns, 0 when
// unknown). Reused: no new connection was opened for it.
type ObjectTruth struct {
	URL           string `json:"url"`
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

// GoClient fetches pages like a browser: the container, then every object
// it references, over at most 6 persistent connections, timing each step
// with its own clock.
type GoClient struct {
	tb    *Testbed
	Local netip.Addr
	Base  string // "http://203.0.113.2"
	// OneRequestPerConnection turns keep-alive off (HTTP/1.0 style, as the
	// browsers of the RLM experiments): which object grabs the container's
	// idle connection is then no scheduling lottery.
	OneRequestPerConnection bool
}

// NewGoClient makes a client using source address local.
func (tb *Testbed) NewGoClient(local netip.Addr, base string) *GoClient {
	return &GoClient{tb: tb, Local: local, Base: base}
}

var embedRE = regexp.MustCompile(`(?:src|href)="(/[^"]*)"`)

// Load fetches one page on fresh connections (each pageview gets its own
// transport, closed at the end, so pageviews are independent).
func (g *GoClient) Load(ctx context.Context, path string) (PageTruth, error) {
	tr := &http.Transport{
		DialContext:         Dialer(g.tb, g.Local).DialContext,
		MaxConnsPerHost:     6,
		MaxIdleConnsPerHost: 6,
		DisableKeepAlives:   g.OneRequestPerConnection,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	pt := PageTruth{Source: "go", Client: g.Local.String(), URL: path}
	if g.OneRequestPerConnection {
		pt.Source = "go-fresh"
	}
	cont, body, err := fetch(ctx, hc, g.Base+path, "")
	pt.Container = cont
	if err != nil {
		pt.Err = err.Error()
		return pt, err
	}
	var paths []string
	for _, m := range embedRE.FindAllSubmatch(body, -1) {
		paths = append(paths, string(m[1]))
	}
	objs := make([]ObjectTruth, len(paths))
	errs := make([]error, len(paths))
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			objs[i], _, errs[i] = fetch(ctx, hc, g.Base+p, g.Base+path)
		}()
	}
	wg.Wait()
	pt.Objects = objs
	pt.Start = cont.Begin()
	pt.End = cont.ResponseEnd
	for i, o := range objs {
		if errs[i] != nil {
			pt.Err = errs[i].Error()
			return pt, fmt.Errorf("page %s: %w", path, errs[i])
		}
		pt.End = max(pt.End, o.ResponseEnd)
	}
	pt.TotalNS = pt.End - pt.Start
	return pt, nil
}

// pathOf is the path and query of an absolute URL.
func pathOf(u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return u
	}
	return pu.RequestURI()
}

// fetch GETs one URL and reads the whole body, recording the timeline.
func fetch(ctx context.Context, hc *http.Client, url, referer string) (ObjectTruth, []byte, error) {
	o := ObjectTruth{URL: pathOf(url)}
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
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet, url, nil)
	if err != nil {
		return o, nil, fmt.Errorf("request %s: %w", url, err)
	}
	req.Header.Set("User-Agent", "rtmon-testbed-goclient/1")
	if referer != "" {
		req.Header.Set("Referer", referer)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return o, nil, fmt.Errorf("get %s: %w", url, err)
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
		return o, nil, fmt.Errorf("read %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return o, body, fmt.Errorf("get %s: status %s", url, strconv.Itoa(resp.StatusCode))
	}
	return o, body, nil
}
