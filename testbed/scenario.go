package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
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

// Load is one page load of a session.
type Load struct {
	Page     int // index into the site's pages
	ServerMS int // >0: the container comes from the back end after this server time
	// Redirect: the load starts at a URL nginx redirects to the container
	// (/r/pN, or /ra/pN?ms= for a back-end container).
	Redirect bool
	// Tab (Chromium): loads of one tab run back to back, tabs at once.
	Tab int
}

// Session is one client program on one client address: a Chromium (one or
// more tabs, each navigating back to back: the next navigation right after
// the load event), a Go client, or the pipelining client.
type Session struct {
	Browser string
	Client  netip.Addr
	Loads   []Load
	// Gap is the think time between a Go or pipeline session's loads.
	Gap time.Duration
	// Go client options (see GoClient): no Referer, keep connections
	// across pages, accept br, favicon and beacon after load.
	NoReferer, KeepConnections, Brotli, AfterLoad bool
	// Concurrent: every load at once, each with its own Go client.
	Concurrent bool
	// Realtime runs a Go or pipeline session's threads under SCHED_FIFO
	// (clientRealtime), so its own clock notices data as the kernel gets
	// it: for checking the wire truth against that clock. Scenarios leave
	// it off (see runSession).
	Realtime bool
}

// Scenario is a named, repeatable experiment: a link, drops, a server set-up
// and client sessions.
type Scenario struct {
	Name  string
	Link  LinkOptions
	Pages int    // pages in the generated site
	Seed  uint64 // site and loss seed
	// Phases run one after another; a phase's sessions run at once (at
	// most one Chromium per phase: it takes the client's source route).
	Phases [][]Session
	// DropSYNMod/DropSYNAt: the server drops incoming client SYNs whose
	// running count (nft numgen inc) mod DropSYNMod equals DropSYNAt.
	DropSYNMod, DropSYNAt int
	// DropFirstSYNOf: with DropSYNMod, this client's first SYN is
	// dropped too.
	DropFirstSYNOf netip.Addr
	// DropSYNACKMod: the link drops every DropSYNACKMod-th SYN/ACK towards
	// the client, after the server-side capture point (lost in the network,
	// so the capture shows the SYN/ACK and then the client's SYN again).
	DropSYNACKMod int
	Backlog       int // nginx listen backlog, 0 = default
	KeepAlive     time.Duration
	// CPUHog runs a busy process pinned to one CPU during the loads.
	CPUHog bool
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

// Loads counts the scenario's page loads.
func (sc Scenario) Loads() int {
	n := 0
	for _, ph := range sc.Phases {
		for _, s := range ph {
			n += len(s.Loads)
		}
	}
	return n
}

// ScenarioResult is what a run left: both captures, the clients' pages with
// their wire truth, and the run's statistics.
type ScenarioResult struct {
	Name          string      `json:"name"`
	Capture       string      `json:"capture"`        // server-side pcap (rtmon's input)
	ClientCapture string      `json:"client_capture"` // client-side pcap (the truth)
	Truth         []PageTruth `json:"truth"`
	// Unattributed are client wire transactions no page claimed.
	Unattributed []WireID    `json:"unattributed,omitempty"`
	Wire         *ClientWire `json:"-"`
	Bridge       BridgeStats `json:"bridge"`
	// NFTDrops counts packets dropped by the scenario's nft rule.
	NFTDrops int `json:"nft_drops"`
	// Captured and Dropped are tcpdump's statistics (server side, then
	// client side).
	Captured       int    `json:"captured"`
	Dropped        int    `json:"dropped"`
	ClientCaptured int    `json:"client_captured"`
	ClientDropped  int    `json:"client_dropped"`
	Server         string `json:"server"`
	CPUHog         bool   `json:"cpu_hog,omitempty"`
	// StealNS is the CPU time the VM's host took from its vCPUs during
	// the loads (/proc/stat steal), 0 on bare metal.
	StealNS int64 `json:"steal_ns"`
	// ServerErrorLog is nginx's error log (for diagnosing a failed run).
	ServerErrorLog string `json:"-"`
}

// defaultRTTs: the three client groups of every scenario.
func defaultRTTs() map[netip.Addr]time.Duration {
	return map[netip.Addr]time.Duration{Client80: 80 * time.Millisecond,
		Client110: 110 * time.Millisecond, Client150: 150 * time.Millisecond}
}

// ScenarioNames lists the named scenarios.
var ScenarioNames = []string{"baseline", "mixed-rtt", "syn-drops", "synack-loss", "loss",
	"overloaded", "keepalive-pipelining"}

// NamedScenario returns a predefined scenario. loads is the number of page
// loads per client session (0: the default, 8).
//
// Every scenario serves the realistic site (GenerateSite) and, unless it
// is about something else, has the same three kinds of clients at once on
// the three RTT groups: a Chromium navigating back to back in one tab
// (next navigation right after the load event, so keep-alive connections
// and the previous page's beacon overlap the next page), a Go client with
// Referer on fresh connections per page, and a Go client without Referer
// keeping its connections from page to page. Some loads start at a
// redirect, every other container comes from the back end with server
// time, and the site has pages whose subresources carry no Referer.
func NamedScenario(name string, loads int) (Scenario, error) {
	if loads <= 0 {
		loads = 8
	}
	sc := Scenario{Name: name, Link: LinkOptions{RTT: defaultRTTs(), DefaultRTT: 80 * time.Millisecond, Seed: 42},
		Pages: 16, Seed: 42, KeepAlive: 5 * time.Second}
	// seq: n loads starting at page first, stepping through the site so
	// that no page repeats within a session.
	seq := func(n, first, step int) []Load {
		var ls []Load
		for i := range n {
			l := Load{Page: (first + i*step) % sc.Pages}
			if i%2 == 1 {
				l.ServerMS = 20 + 30*(i%4)
			}
			l.Redirect = i%3 == 2
			ls = append(ls, l)
		}
		return ls
	}
	chrome := func(c netip.Addr, first int) Session {
		return Session{Browser: BrowserChromium, Client: c, Loads: seq(loads, first, 5)}
	}
	goRef := func(c netip.Addr, first int) Session {
		return Session{Browser: BrowserGo, Client: c, Loads: seq(loads, first, 3), Gap: 300 * time.Millisecond, AfterLoad: true}
	}
	goKeep := func(c netip.Addr, first int) Session {
		return Session{Browser: BrowserGo, Client: c, Loads: seq(loads, first, 7), Gap: 300 * time.Millisecond,
			AfterLoad: true, NoReferer: true, KeepConnections: true}
	}
	switch name {
	case "baseline":
		sc.Phases = [][]Session{{chrome(Client80, 0), goRef(Client110, 1), goKeep(Client150, 2)}}
	case "mixed-rtt":
		// Chromium with two tabs loading at once, the Go clients asking
		// for brotli.
		c := chrome(Client150, 3)
		for i := range c.Loads {
			c.Loads[i].Tab = i % 2
		}
		g1, g2 := goRef(Client80, 4), goKeep(Client110, 5)
		g1.Brotli, g2.Brotli = true, true
		sc.Phases = [][]Session{{c, g1, g2}}
	case "syn-drops":
		// Of every 7 SYNs at the server the second is dropped, so some
		// pageviews lose a SYN on a secondary connection and the count
		// drifts over the others; and the Go client's first SYN.
		sc.DropSYNMod, sc.DropSYNAt, sc.DropFirstSYNOf = 7, 1, Client110
		sc.Phases = [][]Session{{chrome(Client80, 4), goRef(Client110, 5)}}
	case "synack-loss":
		sc.DropSYNACKMod = 5
		sc.Phases = [][]Session{{chrome(Client80, 6), goRef(Client110, 7)}}
	case "loss":
		// 2% of frames lost in each direction, ACK-only segments and
		// requests included; handshakes spared (a SYN lost before the
		// server-side capture leaves no trace there; handshake losses
		// have their own scenarios).
		sc.Link.Loss = 0.02
		sc.Link.LossSparesSYN = true
		// Twice the loads: the rarer events (a duplicate response, a
		// lost request) must happen in every run, and be counted often
		// enough for their flags to be judged.
		loads *= 2
		sc.Phases = [][]Session{{chrome(Client80, 8), goRef(Client110, 9), goKeep(Client150, 10)}}
	case "overloaded":
		sc.Backlog = 4
		s := Session{Browser: BrowserGo, Client: Client80, Concurrent: true, AfterLoad: true}
		for i := range loads + loads/2 {
			s.Loads = append(s.Loads, Load{Page: i % sc.Pages, ServerMS: 50})
		}
		s2 := s
		s2.Client, s2.Loads = Client110, nil
		for i := range loads + loads/2 {
			s2.Loads = append(s2.Loads, Load{Page: (i + 8) % sc.Pages, ServerMS: 50})
		}
		sc.Phases = [][]Session{{s, s2}}
	case "keepalive-pipelining":
		sc.KeepAlive = 10 * time.Second
		p := func(c netip.Addr, first int) Session {
			return Session{Browser: BrowserPipeline, Client: c, Loads: seq(loads, first, 5), Gap: 300 * time.Millisecond}
		}
		ph := []Session{p(Client80, 10), p(Client110, 11), p(Client150, 12)}
		for _, s := range ph {
			for i := range s.Loads {
				s.Loads[i].Redirect = false // the raw client follows none
			}
		}
		sc.Phases = [][]Session{ph}
	default:
		return sc, fmt.Errorf("unknown scenario %q (known: %v)", name, ScenarioNames)
	}
	return sc, nil
}

// afterLoadDwell is how long a Chromium session stays after its last load
// event, so the last page's favicon and beacon (50 ms after load) are sent
// and answered.
const afterLoadDwell = 1200 * time.Millisecond

// RunScenario runs sc on tb, which must have been opened with sc.Options():
// site, back end and nginx in the server namespace, drops, captures on the
// server's and the client's veth, then the sessions. It reads the truth
// from the client capture (AttachWireTruth), writes truth.json next to the
// server capture in tb.Dir and returns the result.
func RunScenario(ctx context.Context, tb *Testbed, sc Scenario) (ScenarioResult, error) {
	r := &scenarioRun{tb: tb, sc: sc, res: ScenarioResult{Name: sc.Name, Server: tb.Server.Addr.String(), CPUHog: sc.CPUHog}}
	if tb.Link == nil {
		return r.res, fmt.Errorf("scenario %s: testbed has no emulated link (open it with Scenario.Options)", sc.Name)
	}
	if err := r.startServer(ctx); err != nil {
		return r.res, err
	}
	if err := r.startCaptures(ctx); err != nil {
		return r.res, err
	}
	// The bridge runs in this process: a garbage collection's
	// stop-the-world waits for every goroutine of the process, also one
	// on a thread the kernel has descheduled for the CPU hog or Chromium,
	// and stalls the bridge with it (seen: frames 25 ms late). The loads
	// allocate little, so the collector waits until the run is over.
	defer holdGC()()
	var hog *Proc
	if sc.CPUHog {
		var err error
		if hog, err = tb.StartCPUHog(1); err != nil {
			return r.res, err
		}
	}
	steal0 := stealTime()
	runErr := r.runPhases(ctx)
	r.res.StealNS = stealTime() - steal0
	runErr = r.stop(ctx, hog, runErr)
	runErr = r.finish(runErr)
	return r.res, runErr
}

// scenarioRun is one run of a scenario: what it started and what it
// found so far.
type scenarioRun struct {
	tb          *Testbed
	sc          Scenario
	site        *Site
	ng          *Nginx
	drop        *NFTable // nil without SYN drops
	capt, ccapt *Capture // server and client side
	res         ScenarioResult
}

// startServer starts the back end and nginx with the generated site, and
// the server's SYN drops.
func (r *scenarioRun) startServer(ctx context.Context) error {
	tb, sc := r.tb, r.sc
	r.site = GenerateSite(sc.Pages, sc.Seed)
	be, err := tb.StartBackend(r.site)
	if err != nil {
		return err
	}
	r.ng, err = tb.StartNginx(ctx, NginxOptions{Content: r.site.Content, Backend: be.Addr.String(),
		Backlog: sc.Backlog, KeepaliveTimeout: sc.KeepAlive, WebSite: true})
	if err != nil {
		return err
	}
	r.res.ServerErrorLog = r.ng.ErrorLog
	if sc.DropSYNMod > 0 {
		// The first rule drops DropFirstSYNOf's first SYN, its first
		// navigation's: a loss the client must wait out and resend. The
		// spread rule's drops mostly hit dials the Go client gives up
		// within the second, once another of its connections has served
		// the request (a lone SYN on the wire, as a real client leaves
		// it), so alone it may leave no resent SYN in a run. Each numgen
		// counts for its own rule, from 0.
		var first string
		if sc.DropFirstSYNOf.IsValid() {
			first = fmt.Sprintf("    iifname %q ip saddr %s tcp dport %d tcp flags & (syn | ack) == syn numgen inc mod 1000000 == 0 counter drop\n",
				tb.Server.Iface, sc.DropFirstSYNOf, r.ng.Port)
		}
		body := fmt.Sprintf(`  chain input {
    type filter hook input priority filter; policy accept;
%s    iifname %q tcp dport %d tcp flags & (syn | ack) == syn numgen inc mod %d == %d counter drop
  }`, first, tb.Server.Iface, r.ng.Port, sc.DropSYNMod, sc.DropSYNAt)
		if r.drop, err = tb.AddNFTable(ctx, tb.Server, "syndrop", body); err != nil {
			return err
		}
	}
	return nil
}

// startCaptures starts the captures on the server's and the client's side.
func (r *scenarioRun) startCaptures(ctx context.Context) error {
	var err error
	if r.capt, err = r.tb.StartCapture(ctx, r.tb.Server, r.sc.Name); err != nil {
		return err
	}
	r.res.Capture = r.capt.Path
	if r.ccapt, err = r.tb.StartCapture(ctx, r.tb.Client, r.sc.Name+"-client"); err != nil {
		return err
	}
	r.res.ClientCapture = r.ccapt.Path
	return nil
}

// runPhases runs the phases one after another, each phase's sessions at
// once, and collects the clients' pages.
func (r *scenarioRun) runPhases(ctx context.Context) error {
	base := "http://" + r.tb.Server.Addr.String()
	for _, phase := range r.sc.Phases {
		out, errs := inParallel(len(phase), func(i int) ([]PageTruth, error) {
			return runSession(ctx, r.tb, r.site, base, phase[i])
		})
		for i, e := range errs {
			if e != nil {
				return &SessionError{Browser: phase[i].Browser, Client: phase[i].Client, Err: e}
			}
			r.res.Truth = append(r.res.Truth, out[i]...)
		}
	}
	return nil
}

// stop ends the CPU hog and the captures and collects the run's
// statistics; it returns runErr, or the first error of its own if runErr
// is nil.
func (r *scenarioRun) stop(ctx context.Context, hog *Proc, runErr error) error {
	if hog != nil {
		if err := hog.Stop(syscall.SIGKILL); err != nil && runErr == nil {
			runErr = fmt.Errorf("cpu hog: %w", err)
		}
	}
	if r.ng.Exited() && runErr == nil {
		runErr = fmt.Errorf("nginx exited during the scenario: %s", r.ng.ReadStderr())
	}
	// Let the last connections close (keep-alive timeout) so their FINs
	// are in the captures.
	if runErr == nil {
		time.Sleep(min(r.sc.KeepAlive, 2*time.Second) + 300*time.Millisecond)
	} else if ClientNetworkFailure(runErr) {
		time.Sleep(sessionFailureGrace)
	}
	for _, c := range []*Capture{r.capt, r.ccapt} {
		if err := c.Stop(); err != nil && runErr == nil {
			runErr = err
		}
	}
	res := &r.res
	res.Captured, res.Dropped = r.capt.Captured, r.capt.Dropped
	res.ClientCaptured, res.ClientDropped = r.ccapt.Captured, r.ccapt.Dropped
	res.Bridge = r.tb.Link.Bridge.Stats()
	if r.drop != nil {
		if n, err := r.drop.Counters(ctx); err == nil {
			for _, v := range n {
				res.NFTDrops += v
			}
		}
	}
	if r.sc.DropSYNACKMod > 0 {
		res.NFTDrops = int(res.Bridge.HookDrops[ToClient])
	}
	return runErr
}

// finish reads the truth from the client capture (if the run went well)
// and writes truth.json and wire.json next to the server capture; it
// returns runErr, or the first error of its own if runErr is nil.
func (r *scenarioRun) finish(runErr error) error {
	res := &r.res
	if runErr == nil {
		w, err := ReadClientWire(r.ccapt.Path)
		if err != nil {
			runErr = err
		} else {
			res.Wire = w
			res.Unattributed = AttachWireTruth(res.Truth, w)
		}
	}
	sort.SliceStable(res.Truth, func(i, j int) bool { return res.Truth[i].Start < res.Truth[j].Start })
	dir := filepath.Dir(r.capt.Path)
	if err := writeJSON(filepath.Join(dir, "truth.json"), *res); err != nil && runErr == nil {
		runErr = err
	}
	if res.Wire != nil {
		if err := writeJSON(filepath.Join(dir, "wire.json"), res.Wire); err != nil && runErr == nil {
			runErr = err
		}
	}
	return runErr
}

// stealTime reads the machine's total steal time (ns; 0 if unknown).
func stealTime() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	ticks, err := strconv.ParseInt(f[8], 10, 64)
	if err != nil {
		return 0
	}
	return ticks * int64(10*time.Millisecond) // USER_HZ is 100 on Linux
}

// holdGC turns the garbage collector off (up to gcHoldLimit of heap)
// until the returned function runs.
func holdGC() (undo func()) {
	pct := debug.SetGCPercent(-1)
	lim := debug.SetMemoryLimit(gcHoldLimit)
	return func() {
		debug.SetGCPercent(pct)
		debug.SetMemoryLimit(lim)
	}
}

const gcHoldLimit = 2 << 30

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
