package testbed

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// Client addresses of the RTT groups every scenario's link has.
var (
	Client80  = netip.MustParseAddr("198.51.100.10")
	Client110 = netip.MustParseAddr("198.51.100.11")
	Client150 = netip.MustParseAddr("198.51.100.12")
)

// Browser that performs a load.
const (
	BrowserChromium = "chromium"
	BrowserGo       = "go"
	// BrowserPipeline is a raw TCP client that writes all of a page's
	// requests back to back on one connection (HTTP/1.1 pipelining).
	BrowserPipeline = "pipeline"
)

// Load is one page load of a scenario.
type Load struct {
	Browser  string
	Client   netip.Addr
	Page     int // index into the site's pages
	ServerMS int // >0: the container comes from the back end after this server time
}

// Scenario is a named, repeatable experiment: a link, drops, a server set-up
// and a sequence of page loads.
type Scenario struct {
	Name  string
	Link  LinkOptions
	Pages int    // pages in the generated site
	Seed  uint64 // site and loss seed
	// Loads run one after another, Gap apart (Gap above nginx's keep-alive
	// timeout, so every pageview starts on fresh connections).
	Loads []Load
	Gap   time.Duration
	// Concurrent loads run all at once after the sequential ones (Go
	// client), to overload a small listen backlog.
	Concurrent []Load
	// DropSYNMod/DropSYNAt: the server drops incoming client SYNs whose
	// running count (nft numgen inc) mod DropSYNMod equals DropSYNAt.
	DropSYNMod, DropSYNAt int
	// DropSYNACKMod: the link drops every DropSYNACKMod-th SYN/ACK towards
	// the client, after the server-side capture point (lost in the network,
	// so the capture shows the SYN/ACK and then the client's SYN again).
	DropSYNACKMod int
	Backlog       int // nginx listen backlog, 0 = default
	KeepAlive     time.Duration
}

// Options are the testbed options the scenario needs (its link).
func (sc Scenario) Options() Options {
	l := sc.Link
	if sc.DropSYNACKMod > 0 {
		var mu sync.Mutex
		n := 0
		mod := sc.DropSYNACKMod
		l.Hook = func(_ *Bridge, f *Frame) bool {
			if f.Dir != ToClient || !f.SYN || !f.ACK {
				return true
			}
			mu.Lock()
			defer mu.Unlock()
			n++
			return (n-1)%mod != 0
		}
	}
	return Options{Link: &l}
}

// ScenarioResult is what a run left: the capture and the clients' truth.
type ScenarioResult struct {
	Name    string      `json:"name"`
	Capture string      `json:"capture"` // server-side pcap
	Truth   []PageTruth `json:"truth"`
	Bridge  BridgeStats `json:"bridge"`
	// NFTDrops counts packets dropped by the scenario's nft rule.
	NFTDrops int `json:"nft_drops"`
	// Captured and Dropped are tcpdump's statistics.
	Captured int    `json:"captured"`
	Dropped  int    `json:"dropped"`
	Server   string `json:"server"`
}

// defaultRTTs: the three client groups of every scenario.
func defaultRTTs() map[netip.Addr]time.Duration {
	return map[netip.Addr]time.Duration{Client80: 80 * time.Millisecond,
		Client110: 110 * time.Millisecond, Client150: 150 * time.Millisecond}
}

// ScenarioNames lists the named scenarios.
var ScenarioNames = []string{"baseline", "mixed-rtt", "syn-drops", "synack-loss", "data-loss",
	"overloaded", "keepalive-pipelining"}

// NamedScenario returns a predefined scenario. loads scales the number of
// page loads (0: the default, a few per browser).
func NamedScenario(name string, loads int) (Scenario, error) {
	if loads <= 0 {
		loads = 6
	}
	sc := Scenario{Name: name, Link: LinkOptions{RTT: defaultRTTs(), DefaultRTT: 80 * time.Millisecond, Seed: 42},
		Pages: 12, Seed: 42, Gap: 1500 * time.Millisecond, KeepAlive: time.Second}
	seq := func(browser string, clients []netip.Addr, n, first int) []Load {
		var ls []Load
		for i := range n {
			l := Load{Browser: browser, Client: clients[i*len(clients)/n], Page: (first + i*5) % sc.Pages}
			// Every other container is dynamic, with some server time.
			if i%2 == 1 {
				l.ServerMS = 20 + 30*(i%4)
			}
			ls = append(ls, l)
		}
		return ls
	}
	one := []netip.Addr{Client80}
	all := []netip.Addr{Client80, Client110, Client150}
	switch name {
	case "baseline":
		sc.Loads = append(seq(BrowserChromium, one, loads, 0), seq(BrowserGo, one, loads/2, 1)...)
	case "mixed-rtt":
		sc.Loads = append(seq(BrowserChromium, all, loads, 2), seq(BrowserGo, all, loads/2, 3)...)
	case "syn-drops":
		// Pageviews open their container connection first, then up to
		// five more: of every 7 SYNs the second one is dropped, so the
		// first pageview's second connection loses its SYN and later ones
		// lose others as the count drifts with retransmissions.
		sc.DropSYNMod, sc.DropSYNAt = 7, 1
		sc.Loads = append(seq(BrowserChromium, one, loads, 4), seq(BrowserGo, one, loads/2, 5)...)
	case "synack-loss":
		sc.DropSYNACKMod = 5
		sc.Loads = append(seq(BrowserChromium, one, loads, 6), seq(BrowserGo, one, loads/2, 7)...)
	case "data-loss":
		sc.Link.Loss = 0.015
		sc.Link.LossSparesSYN = true
		sc.Link.LossToClientOnly = true
		sc.Loads = append(seq(BrowserChromium, all, loads, 8), seq(BrowserGo, all, loads/2, 9)...)
	case "overloaded":
		sc.Backlog = 4
		for i := range 4 * loads {
			sc.Concurrent = append(sc.Concurrent, Load{Browser: BrowserGo, Client: all[i%3], Page: i % sc.Pages, ServerMS: 50})
		}
	case "keepalive-pipelining":
		sc.KeepAlive = 10 * time.Second
		sc.Loads = seq(BrowserPipeline, all, loads, 10)
	default:
		return sc, fmt.Errorf("unknown scenario %q (known: %v)", name, ScenarioNames)
	}
	return sc, nil
}

// RunScenario runs sc on tb, which must have been opened with sc.Options():
// site, back end and nginx in the server namespace, drops, a server-side
// capture, then the loads. It writes truth.json next to the capture in
// tb.Dir and returns the clients' truth.
func RunScenario(ctx context.Context, tb *Testbed, sc Scenario) (ScenarioResult, error) {
	res := ScenarioResult{Name: sc.Name, Server: tb.Server.Addr.String()}
	if tb.Link == nil {
		return res, fmt.Errorf("scenario %s: testbed has no emulated link (open it with Scenario.Options)", sc.Name)
	}
	site := GenerateSite(sc.Pages, sc.Seed)
	be, err := tb.StartBackend(site)
	if err != nil {
		return res, err
	}
	ng, err := tb.StartNginx(ctx, NginxOptions{Content: site.Content, Backend: be.Addr.String(),
		Backlog: sc.Backlog, KeepaliveTimeout: sc.KeepAlive})
	if err != nil {
		return res, err
	}
	var drop *NFTable
	if sc.DropSYNMod > 0 {
		body := fmt.Sprintf(`  chain input {
    type filter hook input priority filter; policy accept;
    iifname %q tcp dport %d tcp flags & (syn | ack) == syn numgen inc mod %d == %d counter drop
  }`, tb.Server.Iface, ng.Port, sc.DropSYNMod, sc.DropSYNAt)
		if drop, err = tb.AddNFTable(ctx, tb.Server, "syndrop", body); err != nil {
			return res, err
		}
	}
	capt, err := tb.StartCapture(ctx, tb.Server, sc.Name)
	if err != nil {
		return res, err
	}
	res.Capture = capt.Path
	base := "http://" + tb.Server.Addr.String()
	url := func(l Load) string {
		p := site.Pages[l.Page%len(site.Pages)]
		if l.ServerMS > 0 {
			return base + p.AppPath(l.ServerMS)
		}
		return base + p.Path
	}
	var chrome *Chromium
	defer func() {
		if chrome != nil {
			chrome.Close()
		}
	}()
	runErr := func() error {
		for i, l := range sc.Loads {
			if i > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(sc.Gap):
				}
			}
			var pt PageTruth
			var err error
			switch l.Browser {
			case BrowserChromium:
				if chrome == nil || chrome.Local != l.Client {
					if chrome != nil {
						if err := chrome.Close(); err != nil {
							return err
						}
					}
					if chrome, err = tb.StartChromium(ctx, l.Client); err != nil {
						return err
					}
					// Chromium's start-up traffic (none expected) and ours
					// must not overlap: give it the same gap.
					time.Sleep(sc.Gap)
				}
				pt, err = chrome.Load(ctx, url(l))
			case BrowserGo:
				undo := clientRealtime()
				pt, err = tb.NewGoClient(l.Client, base).Load(ctx, pathOf(url(l)))
				undo()
			case BrowserPipeline:
				undo := clientRealtime()
				pt, err = tb.Pipeline(ctx, l.Client, base, pathOf(url(l)), site.Pages[l.Page%len(site.Pages)])
				undo()
			default:
				err = fmt.Errorf("unknown browser %q", l.Browser)
			}
			if err != nil {
				return fmt.Errorf("load %d (%s from %s): %w", i, l.Browser, l.Client, err)
			}
			res.Truth = append(res.Truth, pt)
		}
		if len(sc.Concurrent) > 0 {
			out := make([]PageTruth, len(sc.Concurrent))
			errs := make([]error, len(sc.Concurrent))
			undo := clientRealtime()
			defer undo()
			var wg sync.WaitGroup
			for i, l := range sc.Concurrent {
				wg.Add(1)
				go func() {
					defer wg.Done()
					out[i], errs[i] = tb.NewGoClient(l.Client, base).Load(ctx, pathOf(url(l)))
				}()
			}
			wg.Wait()
			for i, e := range errs {
				if e != nil {
					return fmt.Errorf("concurrent load %d: %w", i, e)
				}
			}
			res.Truth = append(res.Truth, out...)
		}
		return nil
	}()
	if chrome != nil {
		if err := chrome.Close(); err != nil && runErr == nil {
			runErr = err
		}
	}
	if ng.Exited() && runErr == nil {
		runErr = fmt.Errorf("nginx exited during the scenario: %s", ng.ReadStderr())
	}
	// Let the last connections close (keep-alive timeout) so their FINs
	// are in the capture.
	if runErr == nil {
		time.Sleep(min(sc.KeepAlive, 2*time.Second) + 300*time.Millisecond)
	}
	if err := capt.Stop(); err != nil && runErr == nil {
		runErr = err
	}
	res.Captured, res.Dropped = capt.Captured, capt.Dropped
	res.Bridge = tb.Link.Bridge.Stats()
	if drop != nil {
		if n, err := drop.Counters(ctx); err == nil && len(n) > 0 {
			res.NFTDrops = n[0]
		}
	}
	if sc.DropSYNACKMod > 0 {
		res.NFTDrops = int(res.Bridge.HookDrops[ToClient])
	}
	sort.SliceStable(res.Truth, func(i, j int) bool { return res.Truth[i].Start < res.Truth[j].Start })
	if err := writeJSON(filepath.Join(filepath.Dir(capt.Path), "truth.json"), res); err != nil && runErr == nil {
		runErr = err
	}
	return res, runErr
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Pipeline loads a page over one connection with HTTP/1.1 pipelining: it
// writes the container request, reads the container, then writes every
// object request back to back before reading the responses in order,
// timing each response's first and last byte with its own clock.
func (tb *Testbed) Pipeline(ctx context.Context, local netip.Addr, base, path string, page Page) (PageTruth, error) {
	pt := PageTruth{Source: BrowserPipeline, Client: local.String(), URL: path}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	host := base[len("http://"):]
	connStart := time.Now().UnixNano()
	c, err := Dialer(tb, local).DialContext(ctx, "tcp4", net.JoinHostPort(host, "80"))
	if err != nil {
		return pt, fmt.Errorf("pipeline dial: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	connEnd := time.Now().UnixNano()
	port := c.LocalAddr().(*net.TCPAddr).Port
	fr := &firstByteReader{r: c}
	br := bufio.NewReaderSize(fr, 64<<10)
	roundTrip := func(paths []string) ([]ObjectTruth, error) {
		var buf []byte
		for _, p := range paths {
			buf = fmt.Appendf(buf, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: rtmon-testbed-pipeline/1\r\nReferer: %s\r\n\r\n", p, host, base+path)
		}
		reqStart := time.Now().UnixNano()
		if _, err := c.Write(buf); err != nil {
			return nil, fmt.Errorf("pipeline write: %w", err)
		}
		var out []ObjectTruth
		for _, p := range paths {
			o := ObjectTruth{URL: p, Reused: true, LocalPort: port, RequestStart: reqStart}
			// The first byte of a response is the first byte read after the
			// previous response ended (or the one already buffered).
			fr.mark(br.Buffered() > 0)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				return out, fmt.Errorf("pipeline response %s: %w", p, err)
			}
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			o.ResponseEnd = time.Now().UnixNano()
			o.ResponseFirst = fr.first()
			o.Status, o.Bytes = resp.StatusCode, n
			if err != nil || resp.StatusCode != http.StatusOK {
				return out, fmt.Errorf("pipeline %s: status %d, %v", p, resp.StatusCode, err)
			}
			out = append(out, o)
		}
		return out, nil
	}
	cont, err := roundTrip([]string{path})
	if err != nil {
		return pt, err
	}
	pt.Container = cont[0]
	pt.Container.Reused, pt.Container.ConnectStart, pt.Container.ConnectEnd = false, connStart, connEnd
	var paths []string
	for _, o := range page.Objects {
		paths = append(paths, o.Path)
	}
	if pt.Objects, err = roundTrip(paths); err != nil {
		return pt, err
	}
	pt.Start = connStart
	pt.End = pt.Container.ResponseEnd
	for _, o := range pt.Objects {
		pt.End = max(pt.End, o.ResponseEnd)
	}
	pt.TotalNS = pt.End - pt.Start
	return pt, nil
}

// firstByteReader notes when the first read after mark returned data.
type firstByteReader struct {
	r       io.Reader
	waiting bool
	at      int64
}

func (f *firstByteReader) mark(buffered bool) {
	f.waiting = !buffered
	if buffered {
		f.at = time.Now().UnixNano()
	}
}

func (f *firstByteReader) first() int64 { return f.at }

func (f *firstByteReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if n > 0 && f.waiting {
		f.at = time.Now().UnixNano()
		f.waiting = false
	}
	return n, err
}
