package testbed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	alloc   context.CancelFunc
	browser context.Context
	cancel  context.CancelFunc
	closed  bool
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
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(wrapper), chromedp.UserDataDir(profile),
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		})}
	for _, f := range chromiumFlags {
		opts = append(opts, chromedp.Flag(f, true))
	}
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(allocCtx)
	c := &Chromium{tb: tb, Local: local, dataDir: profile, alloc: allocCancel, browser: bctx, cancel: bcancel}
	tb.onClose(c.Close)
	// The first call on the browser's own context starts Chromium and ties
	// its life to that context, so it must not be a shorter-lived child: a
	// timer bounds the start instead.
	watchdog := time.AfterFunc(30*time.Second, bcancel)
	defer watchdog.Stop()
	startCtx := bctx
	if _, err := chromedp.Call(startCtx, network.Enable, network.EnableParams{}); err != nil {
		c.Close()
		return nil, fmt.Errorf("start chromium in %s: %w", tb.Client.NS, err)
	}
	if _, err := chromedp.Call(startCtx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true}); err != nil {
		c.Close()
		return nil, fmt.Errorf("start chromium in %s: %w", tb.Client.NS, err)
	}
	return c, nil
}

// Close ends the browser and then, by PID, any of its processes that
// outlived it (its zygote and utility processes carry our unique profile
// directory on their command line).
func (c *Chromium) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
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

// Load navigates to url, waits for the load event, and returns the page's
// Navigation and Resource Timing as truth.
//
// Pageview truth: Start is the navigation's connectStart on a fresh
// connection (its requestStart on a reused one); End is the largest
// responseEnd of the document and every resource. That is what a server-side
// monitor can see: the first SYN and the last byte delivered. loadEventStart
// is kept too (LoadEventNS, from navigation start) but not compared: it adds
// what no packet shows — the browser's own work before the first SYN and
// after the last byte (parsing, running scripts, decoding images). DNS is 0
// (IP literals) and there are no redirects.
func (c *Chromium) Load(ctx context.Context, url string) (PageTruth, error) {
	pt := PageTruth{Source: "chromium", Client: c.Local.String(), URL: pathOf(url)}
	lctx, cancel := context.WithTimeout(c.browser, 30*time.Second)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
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
		return ObjectTruth{URL: pathOf(r.Name), Status: r.Status, Bytes: r.BodySize,
			// A reused connection reports connectStart == connectEnd
			// (both equal to fetchStart/domainLookupEnd).
			Reused:       r.ConnectEnd == r.ConnectStart,
			ConnectStart: abs(r.ConnectStart), ConnectEnd: abs(r.ConnectEnd),
			RequestStart: abs(r.RequestStart), ResponseFirst: abs(r.ResponseStart), ResponseEnd: abs(r.ResponseEnd)}
	}
	pt.Container = conv(d.Nav.resTiming)
	pt.Start = pt.Container.Begin()
	pt.End = pt.Container.ResponseEnd
	for _, r := range d.Res {
		o := conv(r)
		pt.Objects = append(pt.Objects, o)
		pt.End = max(pt.End, o.ResponseEnd)
	}
	pt.TotalNS = pt.End - pt.Start
	pt.LoadEventNS = int64(math.Round(d.Nav.LoadEventStart * 1e6))
	pt.Extra = map[string]any{"protocol": d.Nav.Protocol}
	if d.Nav.Protocol != "http/1.1" {
		return pt, fmt.Errorf("chromium load %s: protocol %q, want http/1.1", url, d.Nav.Protocol)
	}
	return pt, nil
}
