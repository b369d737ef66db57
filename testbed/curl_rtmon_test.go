package testbed

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// These tests need root and the Debian packages listed in the package doc;
// they fail (never skip) without them.

// keepDir, when set, receives a copy of each test's capture, so an rtmon
// mismatch can be replayed (rtmon analyze) or read with tshark.
var keepDir = flag.String("testbed.keep", "", "copy each test's pcaps (server side; client side and truth for scenarios) into this directory")

// scenario is what one test does on the testbed.
type scenario struct {
	dropSYN bool
	// fresh: one curl invocation (one new connection) per path.
	fresh []string
	// keepalive: one curl invocation fetching all paths on one connection.
	keepalive []string
}

// invocation is one curl run and what it returned.
type invocation struct {
	results []CurlResult
	// stall: how long the emulated link (if any) held frames late while
	// curl ran, a delay the wire shows and curl's clock may not.
	stall time.Duration
}

type outcome struct {
	tb      *Testbed
	nginx   *Nginx
	capture *Capture
	drop    *NFTable
	invs    []invocation
	wire    *wire
}

func TestCurlMatchesRtmon(t *testing.T) {
	r := runScenario(t, scenario{
		fresh:     []string{"/index.html", "/1k.bin", "/64k.bin", "/256k.bin", "/1m.bin"},
		keepalive: []string{"/index.html", "/1k.bin", "/64k.bin", "/256k.bin", "/1m.bin"},
	})
	compareRtmon(t, r)
}

func TestCurlSYNDropMatchesRtmon(t *testing.T) {
	r := runScenario(t, scenario{
		dropSYN:   true,
		fresh:     []string{"/1k.bin", "/256k.bin"},
		keepalive: []string{"/index.html", "/64k.bin", "/1m.bin"},
	})
	compareRtmon(t, r)
}

// runScenario builds the testbed, runs the traffic under capture and checks
// the harness against the wire, all before rtmon is involved.
func runScenario(t *testing.T, sc scenario) *outcome {
	t.Helper()
	ctx := testContext(t)
	tb := New(t, Options{})
	t.Logf("testbed %s in %s", tb.Name, tb.Dir)
	ng, err := tb.StartNginx(ctx, NginxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := &outcome{tb: tb, nginx: ng}
	// Installed before any traffic so the deterministic counter starts at
	// the first client SYN (the readiness probe ran over lo, not matched).
	if sc.dropSYN {
		if r.drop, err = tb.DropSYNs(ctx, tb.Server, 2); err != nil {
			t.Fatal(err)
		}
	}
	if r.capture, err = tb.StartCapture(ctx, tb.Server, "server"); err != nil {
		t.Fatal(err)
	}
	var groups [][]string
	for _, p := range sc.fresh {
		groups = append(groups, []string{p})
	}
	if len(sc.keepalive) > 0 {
		groups = append(groups, sc.keepalive)
	}
	for _, g := range groups {
		urls := make([]string, len(g))
		for i, p := range g {
			urls[i] = ng.URL(p)
		}
		res, err := tb.Curl(ctx, CurlOptions{URLs: urls, MaxTime: 10 * time.Second})
		if err != nil {
			t.Fatalf("curl %v: %v", g, err)
		}
		r.invs = append(r.invs, invocation{results: res})
		for _, c := range res {
			t.Logf("curl port %d %-12s connects=%d connect=%v pretransfer=%v starttransfer=%v total=%v",
				c.LocalPort, pathOf(c.URL), c.NumConnects, c.Connect(), c.Pretransfer(), c.Starttransfer(), c.Total())
		}
	}
	stopCapture(t, r.capture)
	if r.wire, err = readWire(r.capture.Path); err != nil {
		t.Fatal(err)
	}
	checkHarness(t, sc, r)
	conns, txns := r.wire.records(r.tb.Client.Addr.String(), r.tb.Server.Addr.String())
	compareRecords(t, "wire", r, conns, txns)
	return r
}

// stopCapture ends a test's capture and keeps a copy (-testbed.keep).
func stopCapture(t *testing.T, c *Capture) {
	t.Helper()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("tcpdump: %d captured, %d received, %d dropped", c.Captured, c.Received, c.Dropped)
	if *keepDir != "" {
		// Subtest names hold slashes.
		name := strings.ReplaceAll(t.Name(), "/", "_")
		b, err := os.ReadFile(c.Path)
		if err == nil {
			err = os.WriteFile(filepath.Join(*keepDir, name+".pcap"), b, 0o644)
		}
		if err != nil {
			t.Errorf("keep pcap: %v", err)
		}
	}
}

// checkHarness verifies curl, the capture and the SYN drops against each
// other, with the same tolerance as the rtmon comparison: if the naive wire
// reading matches curl, the setup is sound and any rtmon mismatch is rtmon's.
func checkHarness(t *testing.T, sc scenario, r *outcome) {
	t.Helper()
	w := r.wire
	if r.capture.Dropped != 0 {
		t.Errorf("tcpdump dropped %d packets", r.capture.Dropped)
	}
	if len(w.foreignIPs) > 0 {
		t.Errorf("capture has addresses outside the documentation ranges: %v", w.foreignIPs)
	}
	if r.capture.Captured != w.packets {
		t.Errorf("tcpdump says %d packets captured, file has %d", r.capture.Captured, w.packets)
	}
	nconn := 0
	for _, inv := range r.invs {
		port := inv.results[0].LocalPort
		for i, c := range inv.results {
			p := pathOf(c.URL)
			if c.HTTPCode != 200 || c.SizeDownload != int64(r.nginx.Files[p]) {
				t.Errorf("curl %s: code %d, %d bytes; want 200, %d", c.URL, c.HTTPCode, c.SizeDownload, r.nginx.Files[p])
			}
			if c.LocalIP != r.tb.Client.Addr.String() || c.RemoteIP != r.tb.Server.Addr.String() {
				t.Errorf("curl %s: %s -> %s, want %s -> %s", c.URL, c.LocalIP, c.RemoteIP, r.tb.Client.Addr, r.tb.Server.Addr)
			}
			if want := b2i(i == 0); c.NumConnects != want || c.LocalPort != port {
				t.Errorf("curl %s (#%d): num_connects %d port %d, want %d on port %d (keep-alive)",
					c.URL, i, c.NumConnects, c.LocalPort, want, port)
			}
		}
		nconn++
		wc := w.conns[uint16(port)]
		if wc == nil {
			t.Errorf("port %d: connection not in the capture", port)
			continue
		}
		wantSYNs := 1 + b2i(sc.dropSYN)
		if len(wc.syns) != wantSYNs || len(wc.synacks) != 1 {
			t.Errorf("port %d: %d SYNs, %d SYN/ACKs in capture; want %d, 1", port, len(wc.syns), len(wc.synacks), wantSYNs)
			continue
		}
		if sc.dropSYN {
			// Linux's initial SYN RTO is 1 s.
			if gap := wc.syns[1].Sub(wc.syns[0]); gap < 900*time.Millisecond || gap > 1500*time.Millisecond {
				t.Errorf("port %d: SYN retransmission after %v, want ~1s", port, gap)
			}
		}
		if len(wc.reqs) != len(inv.results) {
			t.Errorf("port %d: %d requests in capture, curl made %d", port, len(wc.reqs), len(inv.results))
			continue
		}
		for i, c := range inv.results {
			if q := wc.reqs[i]; q.path != pathOf(c.URL) {
				t.Errorf("port %d request %d: capture has %s, curl fetched %s", port, i, q.path, pathOf(c.URL))
			}
		}
	}
	if len(w.conns) != nconn {
		t.Errorf("capture has %d connections (ports %v), curl opened %d", len(w.conns), w.ports(), nconn)
	}
	if r.drop != nil {
		n, err := r.drop.Counters(context.Background())
		if err != nil {
			t.Error(err)
		} else if len(n) != 1 || n[0] != nconn {
			t.Errorf("nft dropped %v SYNs, want [%d] (one per connection)", n, nconn)
		}
	}
}

// curlStall is the most a busy machine is taken to delay curl's noticing
// a packet (the CI-like load's real-time spins last up to 30 ms).
const curlStall = 100 * time.Millisecond

// tolerance is the agreement required between rtmon (or the wire) and curl.
func tolerance(curl time.Duration) time.Duration {
	return max(2*time.Millisecond, curl/20)
}

// checkNear compares a time from the capture with curl's own for it.
// curl's clock reads when curl noticed (its connect returned, its read got
// the byte), which can only be later than the wire: a curl the machine
// descheduled (seen: 7 ms, with the CPU hog's real-time spins) reads late,
// and up to curlStall that is no error of rtmon's, only logged. A capture
// time later than curl's is impossible on a sound reading and fails, as
// does one short by more than any stall (a missed SYN loss is 1 s).
func checkNear(t *testing.T, what string, got, curl time.Duration) {
	t.Helper()
	switch d := curl - got; {
	case d < -tolerance(curl):
		t.Errorf("%s: %v, curl %v: later than curl saw it by %v (tolerance %v)", what, got, curl, -d, tolerance(curl))
	case d > tolerance(curl)+curlStall:
		t.Errorf("%s: %v, curl %v: short by %v, more than a descheduled curl explains (tolerance %v + %v)", what, got, curl, d, tolerance(curl), curlStall)
	case d > tolerance(curl):
		t.Logf("%s: %v, curl %v: curl noticed %v after the wire (curl descheduled)", what, got, curl, d)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// rtmonConn and rtmonTxn are the fields of rtmon's jsonl records these tests use.
type rtmonConn struct {
	Client       string  `json:"client"`
	ClientPort   int     `json:"client_port"`
	Server       string  `json:"server"`
	ServerPort   int     `json:"server_port"`
	SYNTimes     []int64 `json:"syn_times"`
	SYNLosses    int     `json:"syn_losses"`
	SYNACKLosses int     `json:"synack_losses"`
	Tconn        int64   `json:"tconn_ns"`
}

type rtmonTxn struct {
	Client     string `json:"client"`
	ClientPort int    `json:"client_port"`
	Server     string `json:"server"`
	ServerPort int    `json:"server_port"`
	Index      int    `json:"index"`
	URL        string `json:"url"`
	Status     int    `json:"status"`
	Tconn      int64  `json:"tconn_ns"`
	Trequest   int64  `json:"trequest_ns"`
	Tserver    int64  `json:"tserver_ns"`
	Ttransfer  int64  `json:"ttransfer_ns"`
	Total      int64  `json:"total_ns"`
}

// Commands the tests build, once per test binary, into binDir.
var (
	buildMu sync.Mutex
	built   = map[string]builtCommand{}
	binDir  string
)

type builtCommand struct {
	bin string
	err error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// testContext ends a little before the test binary's -timeout, so that a
// hung peer fails the test with its cleanup run. Per-step deadlines are
// not used: how long a step takes on a busy machine is not what the
// tests judge.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if dl, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-time.Minute))
	}
	t.Cleanup(cancel)
	return ctx
}

// buildRtmon builds ./cmd/rtmon from the module root once per test binary.
func buildRtmon() (string, error) { return buildCommand("./cmd/rtmon") }

// buildPreforkd builds the testbed's prefork server (StartPrefork).
func buildPreforkd() (string, error) { return buildCommand("./testbed/preforkd") }

// buildCommand builds the command package pkg (relative to the module
// root) once per test binary. No deadline: linking DuckDB takes a minute
// on a busy machine, and the test binary's -timeout bounds a hang.
func buildCommand(pkg string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if b, ok := built[pkg]; ok {
		return b.bin, b.err
	}
	bin, err := goBuild(pkg)
	built[pkg] = builtCommand{bin, err}
	return bin, err
}

func goBuild(pkg string) (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if binDir == "" {
		if binDir, err = os.MkdirTemp("", "rtmon-bin-"); err != nil {
			return "", fmt.Errorf("build dir: %w", err)
		}
	}
	bin := filepath.Join(binDir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s in %s: %w\n%s", pkg, root, err, out)
	}
	return bin, nil
}

// analyze runs `rtmon analyze --format jsonl` on the capture.
func analyze(t *testing.T, pcap string) ([]rtmonConn, []rtmonTxn) {
	t.Helper()
	out := analyzeDir(t, pcap)
	conns := readJSONL[rtmonConn](t, filepath.Join(out, "connections.jsonl"))
	txns := readJSONL[rtmonTxn](t, filepath.Join(out, "transactions.jsonl"))
	return conns, txns
}

// analyzeDir runs `rtmon analyze --format jsonl` (with extra flags before
// the capture) and returns the directory holding its record files.
func analyzeDir(t *testing.T, pcap string, flags ...string) string {
	t.Helper()
	bin, err := buildRtmon()
	if err != nil {
		t.Fatalf("rtmon is not buildable (cmd/rtmon is another engineer's, possibly not ready): %v", err)
	}
	out := t.TempDir()
	args := append(append([]string{"analyze", "--format", "jsonl", "--out", out}, flags...), pcap)
	cmd := exec.CommandContext(testContext(t), bin, args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rtmon %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out
}

func readJSONL[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("rtmon output: %v", err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s line %d: %v", path, n, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return out
}

// compareRtmon runs rtmon on the server-side capture and checks its records
// against curl.
func compareRtmon(t *testing.T, r *outcome) {
	t.Helper()
	conns, txns := analyze(t, r.capture.Path)
	compareRecords(t, "rtmon", r, conns, txns)
}

// compareRecords checks each curl transfer against the transaction the
// records (rtmon's, or the naive wire reading's) give for it.
//
// What curl measures: its timers restart for every URL of an invocation, so
// every time_* is from the start of that transfer. For the first URL that
// start precedes the SYN: time_connect is the connect time (SYN losses
// included), time_starttransfer = connect + request + server time. For a URL
// on a reused connection, time_connect is 0 and the transfer starts just
// before the request is written (time_pretransfer is microseconds), so
// time_starttransfer = request + server time. rtmon's transaction on a
// reused connection has Tconn 0 and starts at the request, so the same sum
// Tconn + Trequest + Tserver compares to time_starttransfer in both cases,
// and Total to time_total. Trequest + Tserver, the part after connecting,
// compares to time_starttransfer - time_pretransfer.
func compareRecords(t *testing.T, src string, r *outcome, conns []rtmonConn, txns []rtmonTxn) {
	t.Helper()
	client, server := r.tb.Client.Addr.String(), r.tb.Server.Addr.String()
	connBy := map[int]rtmonConn{}
	for _, c := range conns {
		if c.Client == client && c.Server == server && c.ServerPort == r.nginx.Port {
			connBy[c.ClientPort] = c
		}
	}
	type key struct {
		port, index int
	}
	txnBy := map[key]rtmonTxn{}
	for _, x := range txns {
		if x.Client != client || x.Server != server || x.ServerPort != r.nginx.Port {
			t.Errorf("%s transaction with unexpected endpoints: %+v", src, x)
			continue
		}
		txnBy[key{x.ClientPort, x.Index}] = x
	}
	ntx := 0
	for _, inv := range r.invs {
		port := inv.results[0].LocalPort
		first := inv.results[0]
		conn, ok := connBy[port]
		if !ok {
			t.Errorf("%s has no connection for client port %d", src, port)
		} else {
			t.Logf("%s conn port %d: syn_losses=%d synack_losses=%d tconn=%v (curl connect %v)",
				src, port, conn.SYNLosses, conn.SYNACKLosses, time.Duration(conn.Tconn), first.Connect())
			checkNear(t, fmt.Sprintf("%s port %d connection tconn", src, port), time.Duration(conn.Tconn), first.Connect())
			if r.drop != nil {
				if conn.SYNLosses < 1 || len(conn.SYNTimes) < 2 || conn.Tconn < int64(time.Second) {
					t.Errorf("%s port %d: syn_losses %d, %d SYNs, tconn %v; want >= 1 loss, >= 2 SYNs, tconn >= 1s",
						src, port, conn.SYNLosses, len(conn.SYNTimes), time.Duration(conn.Tconn))
				}
			} else if conn.SYNLosses != 0 || conn.SYNACKLosses != 0 {
				t.Errorf("%s port %d: syn_losses %d synack_losses %d, want 0 (no drops)", src, port, conn.SYNLosses, conn.SYNACKLosses)
			}
		}
		for i, c := range inv.results {
			ntx++
			name := fmt.Sprintf("%s port %d #%d %s", src, port, i, pathOf(c.URL))
			x, ok := txnBy[key{port, i}]
			if !ok {
				t.Errorf("%s: no transaction", name)
				continue
			}
			if pathOf(x.URL) != pathOf(c.URL) || x.Status != c.HTTPCode {
				t.Errorf("%s: record has %q status %d, curl %q status %d", name, x.URL, x.Status, c.URL, c.HTTPCode)
			}
			t.Logf("%s: tconn=%v trequest=%v tserver=%v ttransfer=%v total=%v",
				name, time.Duration(x.Tconn), time.Duration(x.Trequest), time.Duration(x.Tserver),
				time.Duration(x.Ttransfer), time.Duration(x.Total))
			if sum := x.Tconn + x.Trequest + x.Tserver + x.Ttransfer; sum != x.Total {
				t.Errorf("%s: components add up to %v, total_ns is %v", name, time.Duration(sum), time.Duration(x.Total))
			}
			if i == 0 {
				checkNear(t, name+" tconn vs time_connect", time.Duration(x.Tconn), c.Connect())
				if r.drop != nil && x.Tconn < int64(time.Second) {
					t.Errorf("%s: tconn %v after a dropped SYN, want >= 1s", name, time.Duration(x.Tconn))
				}
			} else if x.Tconn != 0 {
				t.Errorf("%s: tconn %v on a reused connection, want 0", name, time.Duration(x.Tconn))
			}
			checkNear(t, name+" tconn+trequest+tserver vs time_starttransfer",
				time.Duration(x.Tconn+x.Trequest+x.Tserver), c.Starttransfer())
			// trequest+tserver against starttransfer-pretransfer is only
			// logged: pretransfer is curl's clock read before it writes,
			// and a busy machine delays the write after the read (seen:
			// the wire's request 2.4 ms after connect, curl's read 0.8 ms
			// after). The cumulative times above bound the split.
			t.Logf("%s trequest+tserver %v, curl starttransfer-pretransfer %v", name,
				time.Duration(x.Trequest+x.Tserver), c.Starttransfer()-c.Pretransfer())
			checkNear(t, name+" total vs time_total", time.Duration(x.Total), c.Total())
		}
	}
	if len(txns) != ntx {
		t.Errorf("%s reports %d transactions, curl made %d", src, len(txns), ntx)
	}
	if len(conns) != len(r.invs) {
		t.Errorf("%s reports %d connections, curl opened %d", src, len(conns), len(r.invs))
	}
}
