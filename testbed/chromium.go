package testbed

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// ChromiumPath is Debian's Chromium (package chromium).
const ChromiumPath = "/usr/bin/chromium"

// Chromium is a headless Chromium running inside the client namespace,
// driven over the DevTools protocol. It has a fresh profile and its cache
// disabled, so every load fetches every object.
type Chromium struct {
	tb      *Testbed
	Local   netip.Addr // source address of its connections
	dataDir string
	tmpDir  string // Chromium's TMPDIR (see StartChromiumWith)
	alloc   context.CancelFunc
	browser context.Context
	cancel  context.CancelFunc
	closed  bool
	// Tabs: the first one opens with the browser, NewTab adds more.
	Tabs []*ChromiumTab
	// protocol is the nextHopProtocol every navigation must report.
	protocol string
}

// ChromiumOptions are what an HTTPS run needs of the browser.
type ChromiumOptions struct {
	// KeyLog: the browser writes its TLS secrets there (NSS key log
	// format, --ssl-key-log-file).
	KeyLog string
	// Resolve maps host names to addresses (--host-resolver-rules "MAP
	// name addr"), so URLs can carry the certificate's name and the
	// browser sends it as SNI.
	Resolve map[string]netip.Addr
	// InsecureTLS accepts the test server's self-signed certificate.
	InsecureTLS bool
	// Protocol is the protocol every navigation must use (Navigation
	// Timing's nextHopProtocol): "http/1.1" when empty, "h2" for HTTP/2.
	Protocol string
}

// chromiumFlags: no background traffic (the capture must hold the page
// loads only), no QUIC (the server speaks HTTP/1.1 over TCP anyway).
var chromiumFlags = []string{"headless", "no-sandbox", "disable-gpu", "disable-background-networking",
	"disable-component-update", "disable-sync", "no-first-run", "disable-quic",
	"disable-default-apps", "disable-extensions", "mute-audio", "no-default-browser-check"}

// StartChromium starts Chromium in the client namespace with local as the
// source address of its connections. Chromium cannot bind a source address
// itself, so the client's route to the server gets local as its preferred
// source (SetClientSource) while this browser opens connections: run one
// Chromium at a time per testbed, one per client address.
func (tb *Testbed) StartChromium(ctx context.Context, local netip.Addr) (*Chromium, error) {
	return tb.StartChromiumWith(ctx, local, ChromiumOptions{})
}

// StartChromiumWith is StartChromium with options.
func (tb *Testbed) StartChromiumWith(ctx context.Context, local netip.Addr, co ChromiumOptions) (*Chromium, error) {
	if _, err := os.Stat(ChromiumPath); err != nil {
		return nil, fmt.Errorf("chromium: %w (install Debian package chromium)", err)
	}
	if err := tb.SetClientSource(ctx, local); err != nil {
		return nil, err
	}
	ipPath, err := toolPath("ip")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(tb.Dir, "chromium-")
	if err != nil {
		return nil, fmt.Errorf("chromium dir: %w", err)
	}
	// `ip netns exec` execs Chromium in place: the PID chromedp holds is
	// the browser's, and the DevTools pipe (fds 3, 4) passes through.
	wrapper := filepath.Join(dir, "chromium-in-netns")
	script := fmt.Sprintf("#!/bin/sh\nexec %s netns exec %s %s \"$@\"\n", ipPath, tb.Client.NS, ChromiumPath)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		return nil, fmt.Errorf("chromium wrapper: %w", err)
	}
	profile := filepath.Join(dir, "profile")
	// Chromium makes a directory for its singleton socket under TMPDIR,
	// which a killed browser leaves behind: a short one of its own (a
	// socket path holds 107 bytes; tb.Dir can be longer), removed on
	// Close.
	tmp, err := os.MkdirTemp("", "rtmon-chromium-")
	if err != nil {
		return nil, fmt.Errorf("chromium temp dir: %w", err)
	}
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(wrapper), chromedp.UserDataDir(profile),
		chromedp.Env("TMPDIR=" + tmp),
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		})}
	for _, f := range chromiumFlags {
		opts = append(opts, chromedp.Flag(f, true))
	}
	opts = append(opts, co.flags()...)
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(allocCtx)
	c := &Chromium{tb: tb, Local: local, dataDir: profile, tmpDir: tmp, alloc: allocCancel, browser: bctx, cancel: bcancel,
		protocol: cmp.Or(co.Protocol, "http/1.1")}
	tb.onClose(c.Close)
	// The first call on the browser's own context starts Chromium and ties
	// its life to that context, so it must not be a shorter-lived child: a
	// timer bounds the start instead.
	watchdog := time.AfterFunc(30*time.Second, bcancel)
	defer watchdog.Stop()
	if _, err := c.initTab(bctx, nil); err != nil {
		c.Close()
		return nil, fmt.Errorf("start chromium in %s: %w", tb.Client.NS, err)
	}
	return c, nil
}

func (co ChromiumOptions) flags() []chromedp.ExecAllocatorOption {
	var opts []chromedp.ExecAllocatorOption
	if co.KeyLog != "" {
		opts = append(opts, chromedp.Flag("ssl-key-log-file", co.KeyLog))
	}
	if len(co.Resolve) > 0 {
		var rules []string
		for _, name := range slices.Sorted(maps.Keys(co.Resolve)) {
			rules = append(rules, "MAP "+name+" "+co.Resolve[name].String())
		}
		opts = append(opts, chromedp.Flag("host-resolver-rules", strings.Join(rules, ", ")))
	}
	if co.InsecureTLS {
		opts = append(opts, chromedp.Flag("ignore-certificate-errors", true))
	}
	return opts
}

// ChromiumTab is one tab (target) of the browser. It records every request
// its documents make (DevTools Network.requestWillBeSent), which is how the
// browser says what belongs to a page, favicon and beacons included.
type ChromiumTab struct {
	c      *Chromium
	ctx    context.Context
	cancel context.CancelFunc
	Index  int

	mu     sync.Mutex
	events []netEvent
	pages  []*chromePage
}

// netEvent is one request a tab's document made.
type netEvent struct {
	RequestID   string
	LoaderID    string
	DocumentURL string
	Method      string
	URL         string
	Type        string
	Redirected  bool  // a redirect hop's follow-up (same request id)
	WallTime    int64 // Unix ns, browser clock
}

// chromePage is a navigation of a tab, completed by Pages.
type chromePage struct {
	pt       PageTruth
	firstEv  int // index of the first event after the navigation was issued
	loaderID string
	jsAfter  map[string]ObjectTruth // Resource Timing entries ending after load
}

// initTab enables the Network domain (events, no cache) on a tab context
// and starts recording its requests.
func (c *Chromium) initTab(ctx context.Context, cancel context.CancelFunc) (*ChromiumTab, error) {
	t := &ChromiumTab{c: c, ctx: ctx, cancel: cancel, Index: len(c.Tabs)}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		return nil, err
	}
	if _, err := chromedp.Call(ctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true}); err != nil {
		return nil, err
	}
	if err := chromedp.Listen(ctx, func(ev any) {
		e, ok := ev.(*network.EventRequestWillBeSent)
		if !ok || e.Request == nil {
			return
		}
		t.mu.Lock()
		t.events = append(t.events, netEvent{RequestID: string(e.RequestID), LoaderID: string(e.LoaderID),
			DocumentURL: e.DocumentURL, Method: e.Request.Method, URL: e.Request.URL, Type: string(e.Type),
			Redirected: e.RedirectResponse != nil, WallTime: int64(math.Round(float64(e.WallTime) * 1e9))})
		t.mu.Unlock()
	}); err != nil {
		return nil, err
	}
	c.Tabs = append(c.Tabs, t)
	return t, nil
}

// NewTab opens another tab (a second target of the same browser, sharing
// its connections).
func (c *Chromium) NewTab() (*ChromiumTab, error) {
	ctx, cancel := chromedp.NewContext(c.browser)
	t, err := c.initTab(ctx, cancel)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("chromium new tab: %w", err)
	}
	return t, nil
}

// Close ends the browser and then, by PID, any of its processes that
// outlived it (its zygote and utility processes carry our unique profile
// directory on their command line).
func (c *Chromium) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	for _, t := range c.Tabs {
		if t.cancel != nil {
			t.cancel()
		}
	}
	c.cancel()
	c.alloc()
	want := []byte("--user-data-dir=" + c.dataDir)
	deadline := time.Now().Add(5 * time.Second)
	for quiet := 0; quiet < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("chromium processes of %s still running after 5s", c.dataDir)
		}
		if killByArg(want) == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
	if err := os.RemoveAll(c.tmpDir); err != nil {
		return fmt.Errorf("chromium temp dir: %w", err)
	}
	return nil
}

// killByArg SIGKILLs processes with arg on their command line (our own
// browser's, identified by its unique profile path) and counts them.
func killByArg(arg []byte) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cl, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		for _, a := range bytes.Split(cl, []byte{0}) {
			if bytes.Equal(a, arg) {
				syscall.Kill(pid, syscall.SIGKILL)
				n++
				break
			}
		}
	}
	return n
}

// navTiming and resTiming are the fields of PerformanceNavigationTiming and
// PerformanceResourceTiming used here, in ms since timeOrigin.
type resTiming struct {
	Name          string  `json:"name"`
	StartTime     float64 `json:"startTime"`
	FetchStart    float64 `json:"fetchStart"`
	ConnectStart  float64 `json:"connectStart"`
	ConnectEnd    float64 `json:"connectEnd"`
	RequestStart  float64 `json:"requestStart"`
	ResponseStart float64 `json:"responseStart"`
	ResponseEnd   float64 `json:"responseEnd"`
	TransferSize  int64   `json:"transferSize"`
	BodySize      int64   `json:"encodedBodySize"`
	Status        int     `json:"responseStatus"`
	Protocol      string  `json:"nextHopProtocol"`
}

type navTiming struct {
	resTiming
	LoadEventStart float64 `json:"loadEventStart"`
	LoadEventEnd   float64 `json:"loadEventEnd"`
	RedirectCount  int     `json:"redirectCount"`
	RedirectStart  float64 `json:"redirectStart"`
}

type perfDump struct {
	Origin float64     `json:"origin"`
	Nav    navTiming   `json:"nav"`
	Res    []resTiming `json:"res"`
}

const perfJS = `(() => {
  const n = performance.getEntriesByType('navigation')[0];
  if (!n || n.loadEventEnd === 0) return '';
  return JSON.stringify({origin: performance.timeOrigin, nav: n.toJSON(),
    res: performance.getEntriesByType('resource').map(r => r.toJSON())});
})()`

// Load navigates the first tab (see ChromiumTab.Load).
func (c *Chromium) Load(ctx context.Context, url string) (PageTruth, error) {
	return c.Tabs[0].Load(ctx, url)
}

// Load navigates the tab to url, waits for the load event and returns the
// page as Navigation and Resource Timing report it. Those timestamps are
// the browser's own (they lag when the machine is busy) and serve only to
// say which requests make up the page, when the load event fired, and for
// logging how far they are from the wire: the resources whose responseEnd
// is at or before loadEventStart are the page's in-load objects. What the
// page's documents request later (favicon, beacons) is added by Pages, from
// the tab's DevTools events.
func (t *ChromiumTab) Load(ctx context.Context, url string) (PageTruth, error) {
	pt := PageTruth{Source: BrowserChromium, Client: t.c.Local.String(), URL: pathOf(url), NavURL: pathOf(url), Tab: t.Index}
	lctx, cancel := context.WithTimeout(t.ctx, 30*time.Second)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	t.mu.Lock()
	cp := &chromePage{firstEv: len(t.events)}
	t.mu.Unlock()
	pt.NavIssued = time.Now().UnixNano()
	if err := chromedp.Do(lctx, chromedp.Navigate(url)); err != nil {
		return pt, fmt.Errorf("chromium load %s: %w", url, err)
	}
	var d perfDump
	for i := 0; ; i++ {
		s, err := chromedp.Run(lctx, chromedp.Evaluate[string](perfJS))
		if err != nil {
			return pt, fmt.Errorf("chromium timing %s: %w", url, err)
		}
		if s != "" {
			if err := json.Unmarshal([]byte(s), &d); err != nil {
				return pt, fmt.Errorf("chromium timing %s: %w", url, err)
			}
			break
		}
		if i >= 100 {
			return pt, errors.New("chromium: load event did not end within 2s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	abs := func(ms float64) int64 {
		if ms == 0 {
			return 0
		}
		return int64(math.Round((d.Origin + ms) * 1e6))
	}
	conv := func(r resTiming) ObjectTruth {
		return ObjectTruth{URL: pathOf(r.Name), Method: "GET", Status: r.Status, Bytes: r.BodySize,
			// A reused connection reports connectStart == connectEnd
			// (both equal to fetchStart/domainLookupEnd).
			Reused:       r.ConnectEnd == r.ConnectStart,
			ConnectStart: abs(r.ConnectStart), ConnectEnd: abs(r.ConnectEnd),
			RequestStart: abs(r.RequestStart), ResponseFirst: abs(r.ResponseStart), ResponseEnd: abs(r.ResponseEnd)}
	}
	pt.Container = conv(d.Nav.resTiming)
	pt.Container.Role = RoleContainer
	pt.URL = pt.Container.URL
	pt.Start = pt.Container.Begin()
	if d.Nav.RedirectCount > 0 && d.Nav.RedirectStart > 0 {
		pt.Start = abs(d.Nav.RedirectStart)
	}
	pt.End = pt.Container.ResponseEnd
	cp.jsAfter = map[string]ObjectTruth{}
	for _, r := range d.Res {
		o := conv(r)
		if r.ResponseEnd > d.Nav.LoadEventStart {
			o.Role = RoleAfterLoad
			cp.jsAfter[o.URL] = o
			continue
		}
		o.Role = RoleObject
		pt.Objects = append(pt.Objects, o)
		pt.End = max(pt.End, o.ResponseEnd)
	}
	pt.TotalNS = pt.End - pt.Start
	pt.LoadEventNS = int64(math.Round(d.Nav.LoadEventStart * 1e6))
	pt.LoadEventAt = abs(d.Nav.LoadEventStart)
	pt.Extra = map[string]any{"protocol": d.Nav.Protocol, "redirect_count": d.Nav.RedirectCount}
	if d.Nav.Protocol != t.c.protocol {
		return pt, fmt.Errorf("chromium load %s: protocol %q, want %s", url, d.Nav.Protocol, t.c.protocol)
	}
	cp.pt = pt
	t.mu.Lock()
	t.pages = append(t.pages, cp)
	t.mu.Unlock()
	return pt, nil
}

// Pages returns the tab's page loads completed with what the browser says
// belongs to each: the navigation's redirect hops and, after the load
// event, whatever the page's document requested (favicon, beacons). Call it
// once the pages have had time for their after-load requests.
func (t *ChromiumTab) Pages() []PageTruth {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []PageTruth
	for i, cp := range t.pages {
		pt := cp.pt
		pt.Redirects = nil
		pt.AfterLoad = nil
		end := len(t.events)
		if i+1 < len(t.pages) {
			end = t.pages[i+1].firstEv
		}
		// The navigation's document request is the first Document-type
		// request after it was issued; its loader id names every request
		// the page's document makes, also after the next navigation began.
		loader := ""
		var chain []netEvent
		for _, e := range t.events[cp.firstEv:end] {
			if e.Type == string(network.ResourceTypeDocument) && (loader == "" || e.LoaderID == loader) {
				if loader == "" && e.Redirected {
					continue
				}
				loader = e.LoaderID
				chain = append(chain, e)
			}
		}
		cp.loaderID = loader
		for _, e := range chain[:max(0, len(chain)-1)] {
			pt.Redirects = append(pt.Redirects, ObjectTruth{URL: pathOf(e.URL), Method: e.Method, Role: RoleRedirect})
		}
		if len(chain) > 0 {
			pt.NavURL = pathOf(chain[0].URL)
		}
		inLoad := map[string]bool{}
		for _, o := range pt.Objects {
			inLoad[o.URL] = true
		}
		seen := map[string]bool{}
		for _, e := range t.events[cp.firstEv:] {
			if loader == "" || e.LoaderID != loader || e.Type == string(network.ResourceTypeDocument) {
				continue
			}
			u := pathOf(e.URL)
			if inLoad[u] || seen[e.Method+" "+u] {
				continue
			}
			seen[e.Method+" "+u] = true
			o, ok := cp.jsAfter[u]
			if !ok {
				o = ObjectTruth{URL: u}
			}
			o.Method, o.Role = e.Method, RoleAfterLoad
			pt.AfterLoad = append(pt.AfterLoad, o)
		}
		out = append(out, pt)
	}
	return out
}
