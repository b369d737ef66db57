package testbed

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestTeardown checks the safety rules on the testbed itself: only
// documentation (and loopback) addresses exist in its namespaces, and Close
// removes the namespaces, the nft table and every process it started.
func TestTeardown(t *testing.T) {
	ctx := testContext(t)
	tb, err := Open(ctx, Options{}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			tb.Close()
		}
	}()
	ng, err := tb.StartNginx(ctx, NginxOptions{Files: map[string]int{"/a.html": 100}})
	if err != nil {
		t.Fatal(err)
	}
	capt, err := tb.StartCapture(ctx, tb.Server, "teardown")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.DropSYNs(ctx, tb.Server, 2); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*Host{tb.Client, tb.Server} {
		out, err := runBounded(ctx, "ip", "-n", h.NS, "-j", "addr", "show")
		if err != nil {
			t.Fatal(err)
		}
		var links []struct {
			IfName   string `json:"ifname"`
			AddrInfo []struct {
				Local string `json:"local"`
			} `json:"addr_info"`
		}
		if err := json.Unmarshal(out, &links); err != nil {
			t.Fatalf("ip -j addr: %v", err)
		}
		var addrs []string
		for _, l := range links {
			for _, a := range l.AddrInfo {
				addrs = append(addrs, l.IfName+"="+a.Local)
				ip, err := netip.ParseAddr(a.Local)
				if err != nil || !(ip == netip.MustParseAddr("127.0.0.1") || ClientRange.Contains(ip) || ServerRange.Contains(ip)) {
					t.Errorf("%s: address %s on %s outside the allowed ranges", h.NS, a.Local, l.IfName)
				}
			}
		}
		want := []string{"lo=127.0.0.1", h.Iface + "=" + h.Addr.String()}
		if strings.Join(addrs, " ") != strings.Join(want, " ") {
			t.Errorf("%s addresses %v, want %v", h.NS, addrs, want)
		}
	}
	pids := []int{ng.PID, capt.PID}
	if err := tb.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed = true
	if err := tb.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	out, err := runBounded(ctx, "ip", "netns", "list")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), tb.Name) {
		t.Errorf("namespaces left after Close:\n%s", out)
	}
	for _, pid := range pids {
		// Signal 0 only probes: the process must be gone (reaped by Close).
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("pid %d still exists after Close (kill 0: %v)", pid, err)
		}
	}
}

// TestTeardownLink: with the emulated link and a Chromium, Close leaves no
// namespace, no process of the browser and no bridge behind, and the hosts
// only ever had documentation addresses.
func TestTeardownLink(t *testing.T) {
	needChromium(t)
	ctx := testContext(t)
	sc, err := NamedScenario("baseline", 1)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := Open(ctx, sc.Options(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			tb.Close()
		}
	}()
	for _, ns := range []string{tb.Client.NS, tb.Server.NS, tb.Link.NS} {
		out, err := runBounded(ctx, "ip", "-n", ns, "-j", "addr", "show")
		if err != nil {
			t.Fatal(err)
		}
		var links []struct {
			AddrInfo []struct {
				Local string `json:"local"`
			} `json:"addr_info"`
		}
		if err := json.Unmarshal(out, &links); err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			for _, a := range l.AddrInfo {
				ip, err := netip.ParseAddr(a.Local)
				if err != nil || !(ip.IsLoopback() || ClientRange.Contains(ip) || ServerRange.Contains(ip)) {
					t.Errorf("%s: address %s outside the allowed ranges", ns, a.Local)
				}
				if ns == tb.Link.NS && !ip.IsLoopback() {
					t.Errorf("link namespace has address %s, want none", ip)
				}
			}
		}
	}
	ch, err := tb.StartChromium(ctx, Client110)
	if err != nil {
		t.Fatal(err)
	}
	arg := []byte("--user-data-dir=" + ch.dataDir)
	if n := countByArg(arg); n == 0 {
		t.Fatalf("no Chromium process found running")
	}
	if err := tb.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed = true
	if n := countByArg(arg); n != 0 {
		t.Errorf("%d Chromium processes left after Close", n)
	}
	// Chromium's singleton socket directory, which a killed browser
	// leaves in its TMPDIR, goes with it.
	if _, err := os.Stat(ch.tmpDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Chromium's temp dir %s after Close: %v", ch.tmpDir, err)
	}
	out, err := runBounded(ctx, "ip", "netns", "list")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), tb.Name) {
		t.Errorf("namespaces left after Close:\n%s", out)
	}
}

// countByArg counts processes with arg on their command line.
func countByArg(arg []byte) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cl, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		for _, a := range bytes.Split(cl, []byte{0}) {
			if bytes.Equal(a, arg) {
				n++
				break
			}
		}
	}
	return n
}
