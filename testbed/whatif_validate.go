package testbed

// What-if validation against reality (issue 6). For each action, a run
// without it (the baseline, under conditions that make the action matter)
// is captured and analyzed, and the whatif package predicts from it; a
// second run with the action really applied measures what the clients then
// got. This file holds the runs and the real actions; the handshake hook is
// in handshakehook.go, the SPLICE splicer in splicer.go, the site variants
// and the comparison table in validate_site.go, and whatif_validate_test.go
// drives them.
//
// The real actions:
//
//   - FAST SYN: the link bridge (which sits between the client and the
//     server's capture point, as a front end would) remembers each client SYN
//     it forwards and, if no SYN/ACK for that SYN (acknowledging its ISN)
//     passed back within the gap, injects a copy towards the server; at most
//     fastMaxCopies per connection. The server's nft drop makes the first SYN
//     vanish, so the injected copy is what gets answered.
//   - FAST SYN/ACK: the bridge remembers each SYN/ACK going to the client
//     before the link loses it (the appliance is upstream of the lossy path)
//     and injects a copy towards the client if the client's handshake ACK has
//     not come back within the gap. Injected frames bypass the hook, so the
//     copy is exempt from the scenario's SYN/ACK loss; with that loss rule
//     (only the first SYN/ACK to a client after an idle spell is lost) a copy
//     sent a gap later would never have been dropped anyway, so the
//     exemption changes nothing.
//   - DROP SYN: an nft rule in the server namespace drops every SYN from the
//     low class's addresses. The rule's condition (RT_HIGH above a threshold
//     lower than any pageview) holds from the first high-priority completion
//     on, so a static rule is what an appliance would have done; the low
//     stream starts after the first high pageviews completed so the replay's
//     window is not empty when the first low pageview arrives.
//   - REMOVE EMBEDS / REWRITE EMBEDS: nginx serves a variant of the site, with
//     no embedded objects, or with objects above the threshold shrunk to the
//     ratio of their size, under the same paths.
//   - SPLICE: a user-space splicer in the server namespace (startSplicer)
//     answers the client's handshake and connects to nginx behind it; the
//     server drops that connection's first SYN for each pageview's first
//     connection, as it dropped the client's in the baseline. SPLICE
//     TERMINATE TLS (HTTPS runs, whatif_validate_tls.go): the splicer ends
//     the client's TLS itself and binds at the request (splicer_tls.go).
//
// What the comparison shows about the models (numbers in the report of
// issue 6): FAST SYN/ACK was predicted about one RTT slow until the model
// learnt that a server that retransmitted its SYN/ACK twice starts the
// connection with a congestion window of one segment (Linux
// tcp_init_transfer), which the measured transfer carries and the
// appliance's copy avoids; SPLICE was
// predicted about one RTT fast while the model started the splicer's
// server connection at the client's first SYN, where a splicer can start
// it only once the client's handshake completed (it now binds at the
// request).
//
// The workload removes client-side chance that is not the action's doing:
// one request per connection (loadFresh), at most six objects per page
// (ValidationSite), nginx at real-time priority (realtimeProcess), open-loop
// arrivals at an interval that is no multiple of the SYN timeout.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Client addresses of the validation workload. Each class has five
// addresses so that the per-address drop and loss rules, which recognise a
// pageview's first connection by an idle spell of its address, see every
// address idle for several seconds between its pageviews.
var (
	ValidateHigh = []netip.Addr{
		netip.MustParseAddr("198.51.100.16"), netip.MustParseAddr("198.51.100.17"),
		netip.MustParseAddr("198.51.100.18"), netip.MustParseAddr("198.51.100.19"),
		netip.MustParseAddr("198.51.100.20"),
	}
	ValidateLow = []netip.Addr{
		netip.MustParseAddr("198.51.100.32"), netip.MustParseAddr("198.51.100.33"),
		netip.MustParseAddr("198.51.100.34"), netip.MustParseAddr("198.51.100.35"),
		netip.MustParseAddr("198.51.100.36"),
	}
)

// Class names and the pattern that makes the high class (the rest is low).
const (
	ValidateHighClass   = "high"
	ValidateLowClass    = "low"
	validateHighPattern = "198.51.100.16/29"
)

// ValidateClasses is the classes file given to rtmon analyze.
const ValidateClasses = "classes:\n  - name: " + ValidateHighClass + "\n    priority: high\n    match: \"IP.SRC == " +
	validateHighPattern + "\"\ndefault: { name: " + ValidateLowClass + ", priority: low }\n"

// ValidateClassOf is the class of a client address, as ValidateClasses says.
func ValidateClassOf(a netip.Addr) string {
	if netip.MustParsePrefix(validateHighPattern).Contains(a) {
		return ValidateHighClass
	}
	return ValidateLowClass
}

// validateLink: high-priority clients at 80 ms, low ones alternating 110 and
// 150 ms, as the named scenarios' RTT groups.
func validateLink(low []netip.Addr) LinkOptions {
	rtt := map[netip.Addr]time.Duration{}
	for _, a := range ValidateHigh {
		rtt[a] = 80 * time.Millisecond
	}
	for i, a := range low {
		rtt[a] = []time.Duration{110 * time.Millisecond, 150 * time.Millisecond}[i%2]
	}
	return LinkOptions{RTT: rtt, DefaultRTT: 80 * time.Millisecond, Seed: 42}
}

// SYNDropMode says which client SYNs the server's nft rules drop.
type SYNDropMode int

const (
	NoSYNDrops SYNDropMode = iota
	// DropFirstSYNPerPageview drops the first SYN of the first connection an
	// address opens after 2 s without SYNs (its pageview's container
	// connection) and no other: each pageview loses exactly one SYN, so
	// baseline and applied runs face the same drops whatever the SYN count
	// (numgen would shift its pattern by the injected copies).
	DropFirstSYNPerPageview
	// DropLowClassSYNs drops every SYN from the low class (DROP SYN).
	DropLowClassSYNs
	// DropFirstSplicedSYN drops the first SYN of the splicer's server-side
	// connection for each pageview's first connection (SpliceProxy marks
	// them by source port): the baseline's drops, behind the splicer.
	DropFirstSplicedSYN
	// DropLowClassSYNsWhileRTHigh drops the low class's SYNs while the
	// spec's RTHigh driver has switched the drop on, except from a client
	// whose page was let in (a SYN within handshakeIdle).
	DropLowClassSYNsWhileRTHigh
)

// ValidationSpec is one run of the validation workload.
type ValidationSpec struct {
	Name string
	Site *Site
	// PerClass page loads per class, Interval apart (open loop: arrivals do
	// not wait for earlier loads, as the replay keeps arrival times); the
	// low class's stream starts LowOffset after the high one.
	PerClass  int
	Interval  time.Duration
	LowOffset time.Duration
	SYNDrops  SYNDropMode
	// SYNACKLoss: the link loses the first SYN/ACK towards an address after
	// 2 s without SYN/ACKs to it (its pageview's first connection), after
	// the server-side capture point.
	SYNACKLoss bool
	// FastSYN, FastSYNACK: the real actions' gaps (0: off).
	FastSYN, FastSYNACK time.Duration
	// ClientSYNRetries sets net.ipv4.tcp_syn_retries in the client namespace
	// (0: the kernel's default). 2 makes a client give up after 1+2+4 s,
	// the replay's SYNAttempts 3 with SYNTimeout 1 s.
	ClientSYNRetries int
	// SpliceProxy puts a user-space splicer in front of the server (SPLICE):
	// it completes the client's handshake in the kernel's listen socket,
	// then connects to nginx or the prefork server (moved to port
	// spliceBackendPort) and copies both ways; the kernel retransmits its
	// SYN to the server on its own 1 s schedule (into the prefork server's
	// full backlog under overload). SYNDrops then apply to that
	// server-side SYN on lo (DropFirstSplicedSYN).
	//
	// The kernel's SYNPROXY (nft synproxy with notrack on SYNs, ct state
	// invalid,untracked, nf_conntrack_tcp_loose=0) was tried first: it
	// answers handshakes and passes loads when the server drops nothing, but
	// it sends its SYN to the server once and never again, so with a
	// server-side SYN drop every applied load hung until the client's 30 s
	// timeout. That is not the splicer the model describes (one that keeps
	// connecting until the server accepts), hence the user-space one.
	SpliceProxy bool
	// SYNProxy puts the kernel's SYNPROXY (nft synproxy) in front of the
	// prefork server: the handshake with the client completes at the
	// proxy, which then sends one SYN of its own to the listener. Loads
	// that do not finish within RequestTimeout are set aside as stalled
	// (ValidationLoad.Stalled): SYNPROXY does not resend its SYN when the
	// listener drops it.
	SYNProxy bool
	// Prefork serves the site from a prefork server (StartPrefork) on port
	// 80 instead of nginx: the overload of a small listen backlog.
	Prefork *PreforkOptions
	// RTHigh, with SYNDrops DropLowClassSYNsWhileRTHigh, switches the drop
	// from rtmon's live RT_HIGH.
	RTHigh *RTHighDrive
	// LowPerClass and LowInterval: the low class's loads, when they differ
	// from PerClass and Interval (a heavier load generator).
	LowPerClass int
	LowInterval time.Duration
	// LowBurst and LowPause: the low class's stream runs in bursts of
	// LowBurst, LowPause apart (0: one stream). An overload that comes and
	// goes, as a flash crowd or a batch job's does, lets a long run repeat
	// it: an open-loop overload held for a minute has no steady state (its
	// queue grows until the clients' two-minute timeouts end loads), and a
	// short one gives a p90 of two pageviews.
	LowBurst, LowPause time.Duration
	// LowClients: how many addresses the low class's loads come from, in
	// turn (0: ValidateLow's five). A rule that exempts a client in the
	// middle of a page (an address with a SYN in the last 2 s) needs
	// addresses that are not always in one: many clients, as real load
	// comes from, not five that each start a page every 1.6 s.
	LowClients int
	// HTTPS: the clients load over TLS (whatif_validate_tls.go), from
	// nginx or, with SpliceProxy, the TLS-terminating splicer.
	HTTPS bool
}

// spliceBackendPort is nginx's port behind the user-space splicer; the
// splicer's server-side connections for pageviews' first connections come
// from ports spliceFirstPortMin..Max (below the ephemeral range).
const (
	spliceBackendPort  = 8081
	spliceFirstPortMin = 20000
	spliceFirstPortMax = 20999
)

// DefaultValidationSpec has the workload every action's runs share. The
// interval is no multiple of the clients' 1 s SYN timeout: with 1 s, a
// retransmitted SYN in the baseline met the next pageview's start every
// time, a contention the applied run (shifted by the action) did not have.
func DefaultValidationSpec(name string, site *Site) ValidationSpec {
	return ValidationSpec{Name: name, Site: site, PerClass: 15, Interval: 1300 * time.Millisecond,
		LowOffset: 2900 * time.Millisecond}
}

// Options are the testbed options the run needs: the link with its hook.
func (s ValidationSpec) Options() (Options, *HandshakeHook) {
	l := validateLink(s.lowClients())
	h := &HandshakeHook{SYNACKLoss: s.SYNACKLoss, FastSYN: s.FastSYN, FastSYNACK: s.FastSYNACK}
	if h.active() {
		l.Hook = h.Hook
	}
	return Options{Prefix: "rtwv", Link: &l}, h
}

// ValidationLoad is one page load of a run as its client saw it.
type ValidationLoad struct {
	Class  string
	Client netip.Addr
	Truth  PageTruth
	// Failed: the client gave up connecting; TotalNS is then the time it
	// waited (connect start to the error).
	Failed  bool
	TotalNS int64
	// Reset: the server reset one of the load's connections. Only a FAST
	// SYN run or an overloaded one tolerates it (set aside, counted): a
	// copy of a SYN can meet the listener while its SYN queue is full and
	// get a SYN cookie's SYN/ACK where another copy got a queued
	// handshake's, and the client's ACK to one then finds the other and is
	// answered with a reset. An overloaded listener without copies does
	// it too, rarely (one load in 100 of one baseline on 2026-12-04): a
	// half-open connection it forgot (its SYN queue pruned, a cookie
	// expired) is reset when the client's request comes again. The
	// what-if models neither.
	Reset bool
	// Stalled: the load did not finish within its request timeout in a
	// SYNProxy run (set aside, counted).
	Stalled bool
}

// ValidationRun is what one run left.
type ValidationRun struct {
	Spec     ValidationSpec
	Capture  string
	Loads    []ValidationLoad
	Bridge   BridgeStats
	NFTDrops int
	// RTHigh: what the RT_HIGH driver did (spec.RTHigh).
	RTHigh RTHighStats
	// SYNACKsLost and Injected come from the hook.
	SYNACKsLost    int
	InjectedSYN    int
	InjectedSYNACK int
	// KeyLog: the clients' TLS secrets (HTTPS runs).
	KeyLog           string
	CaptureDropped   int
	CapturedPackets  int
	ServerStderrTail string
}

// RunValidation runs spec on tb (opened with spec.Options(), whose hook is
// h): nginx with the spec's site, the SYN drops, a server-side capture, and
// the two classes' open-loop page loads with the Go client.
func RunValidation(ctx context.Context, tb *Testbed, h *HandshakeHook, spec ValidationSpec) (ValidationRun, error) {
	run := ValidationRun{Spec: spec}
	if err := prepareValidation(ctx, tb, spec); err != nil {
		return run, err
	}
	ng, drop, err := startValidationServer(ctx, tb, spec)
	if err != nil {
		return run, err
	}
	nginxExited := func() bool { return ng != nil && ng.Exited() }
	capt, err := tb.StartCapture(ctx, tb.Server, spec.Name)
	if err != nil {
		return run, fmt.Errorf("validation %s: %w", spec.Name, err)
	}
	run.Capture = capt.Path
	var driver *rtHighDriver
	if spec.RTHigh != nil {
		if drop == nil || spec.SYNDrops != DropLowClassSYNsWhileRTHigh {
			return run, fmt.Errorf("validation %s: an RT_HIGH drive needs SYNDrops DropLowClassSYNsWhileRTHigh", spec.Name)
		}
		if driver, err = startRTHighDriver(ctx, tb, drop, *spec.RTHigh); err != nil {
			return run, fmt.Errorf("validation %s: %w", spec.Name, err)
		}
	}
	cl, err := validationClientFor(tb, spec, ng, &run)
	if err != nil {
		return run, fmt.Errorf("validation %s: %w", spec.Name, err)
	}
	loads, errs := runValidationLoads(ctx, tb, cl, validationPlans(spec), spec)
	var runErr error
	for _, e := range errs {
		if e != nil {
			runErr = fmt.Errorf("validation %s: %w", spec.Name, e)
			break
		}
	}
	if nginxExited() && runErr == nil {
		runErr = fmt.Errorf("validation %s: nginx exited: %s", spec.Name, ng.ReadStderr())
	}
	if runErr == nil {
		// Let the last connections close so their FINs are in the capture.
		time.Sleep(1300 * time.Millisecond)
	}
	if driver != nil {
		var err error
		if run.RTHigh, err = driver.stop(); err != nil && runErr == nil {
			runErr = fmt.Errorf("validation %s: RT_HIGH driver: %w", spec.Name, err)
		}
	}
	if err := capt.Stop(); err != nil && runErr == nil {
		runErr = fmt.Errorf("validation %s: %w", spec.Name, err)
	}
	run.CapturedPackets, run.CaptureDropped = capt.Captured, capt.Dropped
	run.Loads = loads
	run.Bridge = tb.Link.Bridge.Stats()
	run.SYNACKsLost, run.InjectedSYN, run.InjectedSYNACK = h.Counts()
	if drop != nil {
		if c, err := drop.Counters(ctx); err == nil && len(c) > 0 {
			run.NFTDrops = c[len(c)-1]
		} else if err != nil && runErr == nil {
			runErr = fmt.Errorf("validation %s: %w", spec.Name, err)
		}
	}
	return run, runErr
}

// prepareValidation checks that tb and spec can run, and sets the
// client's SYN retries.
func prepareValidation(ctx context.Context, tb *Testbed, spec ValidationSpec) error {
	if tb.Link == nil {
		return fmt.Errorf("validation %s: testbed has no emulated link", spec.Name)
	}
	if spec.PerClass < 1 || spec.PerClass > 100 || spec.LowPerClass > 400 || spec.Interval <= 0 {
		return fmt.Errorf("validation %s: %d loads per class every %v: want 1..100, a positive interval",
			spec.Name, spec.PerClass, spec.Interval)
	}
	if spec.ClientSYNRetries > 0 {
		if _, err := tb.Exec(ctx, tb.Client.NS, "sysctl", "-q", "-w",
			fmt.Sprintf("net.ipv4.tcp_syn_retries=%d", spec.ClientSYNRetries)); err != nil {
			return fmt.Errorf("validation %s: client SYN retries: %w", spec.Name, err)
		}
	}
	return nil
}

// startValidationServer starts nginx at real-time priority with the
// spec's site, the splicer in front of it if asked, and the SYN drops
// (drop is nil without them).
func startValidationServer(ctx context.Context, tb *Testbed, spec ValidationSpec) (ng *Nginx, drop *NFTable, err error) {
	if spec.Prefork != nil {
		o := *spec.Prefork
		o.Port, o.Content = 80, spec.Site.Content
		iface := tb.Server.Iface
		if spec.SpliceProxy {
			// The splicer takes every client's handshake; its own SYNs
			// meet the prefork server's small backlog on lo.
			o.Port, iface = spliceBackendPort, "lo"
		}
		if _, err := tb.StartPrefork(o); err != nil {
			return nil, nil, fmt.Errorf("validation %s: %w", spec.Name, err)
		}
		if spec.SpliceProxy {
			if err := startSplicer(tb, netip.AddrPortFrom(tb.Server.Addr, 80),
				netip.AddrPortFrom(tb.Server.Addr, spliceBackendPort)); err != nil {
				return nil, nil, fmt.Errorf("validation %s: %w", spec.Name, err)
			}
		}
		if body := synDropRules(spec.SYNDrops, iface, o.Port); body != "" {
			if drop, err = tb.AddNFTable(ctx, tb.Server, "wvdrop", body); err != nil {
				return nil, nil, fmt.Errorf("validation %s: %w", spec.Name, err)
			}
		}
		if spec.SYNProxy {
			if err := startSYNProxy(ctx, tb, o.Port); err != nil {
				return nil, nil, fmt.Errorf("validation %s: %w", spec.Name, err)
			}
		}
		return nil, drop, nil
	}
	nopts := NginxOptions{Content: spec.Site.Content, KeepaliveTimeout: time.Second}
	if spec.SpliceProxy {
		nopts.Port = spliceBackendPort
	} else if spec.HTTPS {
		nopts.TLS = &NginxTLS{}
	}
	ng, err = tb.StartNginx(ctx, nopts)
	if err != nil {
		return nil, nil, fmt.Errorf("validation %s: %w", spec.Name, err)
	}
	if err := realtimeProcess(ng.PID); err != nil {
		return nil, nil, fmt.Errorf("validation %s: nginx priority: %w", spec.Name, err)
	}
	iface := tb.Server.Iface
	if spec.SpliceProxy {
		// The clients then verify the TLS splicer's certificate.
		if ng.CAFile, err = startValidationSplicer(tb, spec); err != nil {
			return nil, nil, fmt.Errorf("validation %s: %w", spec.Name, err)
		}
		iface = "lo"
	}
	if body := synDropRules(spec.SYNDrops, iface, ng.Port); body != "" {
		if drop, err = tb.AddNFTable(ctx, tb.Server, "wvdrop", body); err != nil {
			return nil, nil, fmt.Errorf("validation %s: %w", spec.Name, err)
		}
	}
	return ng, drop, nil
}

// runValidationLoads starts every planned load at its time, the clients
// at real-time priority, and returns the loads and errors by plan;
// A FAST SYN or overloaded run sets aside a load a reset ended
// (ValidationLoad.Reset), a SYNPROXY run one that timed out (Stalled).
func runValidationLoads(ctx context.Context, tb *Testbed, cl validationClient, plans []validationPlan, spec ValidationSpec) ([]ValidationLoad, []error) {
	tolerateReset := spec.FastSYN > 0 || spec.Prefork != nil
	timeout := 2 * time.Minute // overloaded runs (see RequestTimeout)
	if spec.SYNProxy {
		timeout = synProxyStall
	}
	undo := clientRealtime()
	t0 := time.Now()
	loads, errs := inParallel(len(plans), func(i int) (ValidationLoad, error) {
		p := plans[i]
		if err := sleepCtx(ctx, time.Until(t0.Add(p.at))); err != nil {
			return ValidationLoad{}, err
		}
		pt, err := loadFresh(ctx, tb, p.client, cl, p.page.Path, timeout)
		l := ValidationLoad{Class: p.class, Client: p.client, Truth: pt, TotalNS: pt.TotalNS}
		if err != nil && tolerateReset && errors.Is(err, syscall.ECONNRESET) {
			return ValidationLoad{Class: p.class, Client: p.client, Reset: true}, nil
		}
		var ne net.Error
		if err != nil && spec.SYNProxy && !errors.Is(err, syscall.ETIMEDOUT) && errors.As(err, &ne) && ne.Timeout() {
			return ValidationLoad{Class: p.class, Client: p.client, Stalled: true}, nil
		}
		if err != nil {
			// Only a connect that timed out (every SYN dropped) is what an
			// overload or DROP SYN does; anything else breaks the run.
			if !errors.Is(err, syscall.ETIMEDOUT) {
				return ValidationLoad{}, fmt.Errorf("load %s from %s: %w", p.page.Path, p.client, err)
			}
			var ok bool
			if l, ok = timedOutLoad(l); !ok {
				return ValidationLoad{}, fmt.Errorf("load %s from %s: %w", p.page.Path, p.client, err)
			}
		}
		return l, nil
	})
	undo()
	return loads, errs
}

// timedOutLoad is a load one of whose connects timed out. The
// container's: the client waited that long for nothing (Failed). An
// object's (an overloaded server drops the high class's SYNs too): a
// browser fires the load event once every object has settled, the failed
// one included, so the page took until the last object's response or the
// failed connect, whichever came later. ok is false when no connect shows
// the timeout.
func timedOutLoad(l ValidationLoad) (ValidationLoad, bool) {
	timedOut := func(o ObjectTruth) bool {
		return o.RequestStart == 0 && o.ConnectStart != 0 && o.ConnectEnd > o.ConnectStart
	}
	c := l.Truth.Container
	if c.RequestStart == 0 {
		if !timedOut(c) {
			return l, false
		}
		l.Failed, l.TotalNS = true, c.ConnectEnd-c.ConnectStart
		return l, true
	}
	start, end, failed := c.Begin(), c.ResponseEnd, false
	if len(l.Truth.Redirects) > 0 {
		start = l.Truth.Redirects[0].Begin()
	}
	for _, o := range l.Truth.Objects {
		switch {
		case timedOut(o):
			failed = true
			end = max(end, o.ConnectEnd)
		case o.ResponseEnd == 0:
			return l, false // neither answered nor timed out connecting
		default:
			end = max(end, o.ResponseEnd)
		}
	}
	l.TotalNS = end - start
	return l, failed
}

// realtimeProcess puts the threads of process pid (nginx, which the
// testbed runs as one process: master_process off) under SCHED_FIFO at the
// clients' priority. The validation's truth is timing under the action;
// with other packages' tests loading both cores, a normally scheduled nginx
// was seen answering a 3 KB page after 1.3 s in the applied run only, a
// stall no what-if model can foresee (the load model knows the server's
// concurrency, not its CPU share).
func realtimeProcess(pid int) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return fmt.Errorf("threads of %d: %w", pid, err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetAttr(tid, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: clientRTPriority}, 0); err != nil {
			return fmt.Errorf("SCHED_FIFO for thread %d of %d: %w", tid, pid, err)
		}
	}
	return nil
}

// synProxyStall is how long a SYNPROXY run's request may take before its
// load counts as stalled: the overloaded server's slowest real responses
// took 15-20 s.
const synProxyStall = 40 * time.Second
