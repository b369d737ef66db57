// Package testbed is rtmon's own network testbed: network namespaces joined by
// veth pairs, with real servers (nginx), real clients (curl), server-side
// capture (tcpdump) and nftables drops, for ground-truth tests, demos and
// what-if validation.
//
// # Topology
//
// One client namespace and one server namespace joined by one veth pair. Both
// ends sit on a single L2 segment; each end carries an address from its own
// documentation range and a device route (no gateway) to the other range:
//
//	<p>-client: <p>c0 198.51.100.2/24, route 203.0.113.0/24 dev <p>c0
//	<p>-server: <p>s0 203.0.113.2/24,  route 198.51.100.0/24 dev <p>s0
//
// A router namespace was not used on purpose: the link emulator forwards
// Ethernet frames, so client and server stay on one L2 segment and the link
// slots in between without any change of addresses or routes.
//
// # Emulated link (Options.Link)
//
//	<p>-client c0 <-veth-> <p>lc [<p>-link: Bridge] <p>ls <-veth-> s0 <p>-server
//
// The link namespace has no addresses; a user-space bridge (bridge.go,
// AF_PACKET sockets on both veths, real-time threads) forwards frames with a
// one-way delay of RTT/2 per client address, seeded random loss and an
// optional rate. The client gets one extra address per RTT group
// (198.51.100.10/.11/.12 in the named scenarios); offloads are off on all
// veths so frames and the server-side capture are MTU-sized, and ARP entries
// are pinned so no ARP exchange crosses the link. Scenarios (scenario.go)
// add nginx with a generated site shaped like a real one (site.go) and a Go
// back end with server time, Chromium and Go-client sessions, nft drops and
// optionally a CPU hog, and capture on both hosts' veths.
//
// # Truth
//
// The truth of every transaction and page comes from the client's own wire
// (clientwire.go: the capture in the client namespace, kernel timestamps,
// reassembled and cut into HTTP messages independently of rtmon), so it
// does not depend on how busy the machine is. The clients only say which
// requests make up a page and when Chromium's load event fired (truth.go);
// their own clocks are kept for comparison. MeasureLink checks from the two
// captures that the emulated link delayed every packet as specified.
// `go run ./cmd/testbed run --scenario NAME --out DIR` runs one scenario and
// keeps both captures, truth.json and wire.json.
//
// # Safety rules for tests that use the network
//
//   - Namespaces, links and nft tables are named with a prefix unique to the
//     run (default "rtb" + pid + random), and all of it is torn down on Close,
//     which New registers with t.Cleanup so it also runs on failure and panic.
//   - Only 198.51.100.0/24 and 203.0.113.0/24 are ever assigned; IPv6 is
//     disabled in the namespaces so no link-local addresses appear either.
//   - Processes are started by the testbed, tracked by PID and ended by PID
//     only; every wait and loop is bounded in count and time.
//
// Needs root and these Debian packages: iproute2 (ip), nftables (nft),
// nginx-light (nginx), tcpdump, curl, procps (sysctl), util-linux (chrt);
// with an emulated link also ethtool, and for browser loads chromium (the
// Chromium tests install it with apt-get when /usr/bin/chromium is missing).
package testbed

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Address ranges: the only ones the testbed ever assigns (RFC 5737).
var (
	ClientRange = netip.MustParsePrefix("198.51.100.0/24")
	ServerRange = netip.MustParsePrefix("203.0.113.0/24")
)

// cmdTimeout bounds every short helper command (ip, nft, sysctl).
const cmdTimeout = 10 * time.Second

// maxIfNameLen is the kernel's IFNAMSIZ-1.
const maxIfNameLen = 15

// Host is one end system: a network namespace with one interface.
type Host struct {
	Role   string       // "client" or "server"
	NS     string       // network namespace name
	Iface  string       // the host's veth inside NS
	Addr   netip.Addr   // its primary address
	Prefix netip.Prefix // Addr with its /24
	// Addrs are all its addresses, Addr first. A client behind an
	// emulated link also has one address per RTT group.
	Addrs []netip.Addr
}

// Topology describes what New built.
type Topology struct {
	Client *Host
	Server *Host
	// Link is the emulated link between them, nil when client and server
	// share one veth pair (see wireDirect and wireLink).
	Link *Link
}

// Options configure New.
type Options struct {
	// Prefix starts every name the testbed creates; a per-run unique part
	// (pid and random) is always appended. Default "rtb".
	Prefix string
	// Link, if set, puts a link namespace with the user-space bridge
	// between client and server (see wireLink).
	Link *LinkOptions
}

// Testbed owns namespaces, nft tables and processes until Close.
type Testbed struct {
	Topology
	// Name is the per-run unique prefix of everything created.
	Name string
	// Dir is a private directory for configs, logs and captures.
	Dir string

	mu       sync.Mutex
	cleanups []func() error // run in reverse on Close
	closed   bool
}

// tools maps each required binary to the Debian package that ships it, so a
// missing tool fails with an actionable message.
var tools = map[string]string{
	"ip":      "iproute2",
	"nft":     "nftables",
	"nginx":   "nginx-light",
	"tcpdump": "tcpdump",
	"curl":    "curl",
	"sysctl":  "procps",
	"chrt":    "util-linux",
	"ethtool": "ethtool",
	"taskset": "util-linux",
	"env":     "coreutils",
}

// toolPath finds a binary, checking sbin directories too because PATH in CI
// may lack them.
func toolPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := dir + "/" + name
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("testbed: %s not found: install Debian package %s", name, tools[name])
}

// New builds the testbed for a test and registers Close with t.Cleanup; it
// fails the test (never skips) when something is missing.
func New(t testing.TB, opts Options) *Testbed {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = "rtb"
	}
	tb, err := Open(context.Background(), opts, t.TempDir())
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Errorf("testbed teardown: %v", err)
		}
	})
	return tb
}

// Open builds the testbed outside of tests (demos); dir holds its files. The
// caller must Close it. On error everything already created is torn down.
func Open(ctx context.Context, opts Options, dir string) (tb *Testbed, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("needs root (network namespaces, nftables, capture)")
	}
	for _, name := range []string{"ip", "sysctl"} {
		if _, err := toolPath(name); err != nil {
			return nil, err
		}
	}
	if opts.Prefix == "" {
		opts.Prefix = "rtb"
	}
	var rnd [2]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("random prefix: %w", err)
	}
	name := opts.Prefix + strconv.FormatInt(int64(os.Getpid()), 36) + hex.EncodeToString(rnd[:])
	for _, r := range opts.Prefix {
		// Names are used unquoted in nft and as interface names.
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return nil, fmt.Errorf("prefix %q: only a-z and 0-9 allowed", opts.Prefix)
		}
	}
	if len(name)+2 > maxIfNameLen {
		return nil, fmt.Errorf("prefix %q too long: interface names would exceed %d bytes", opts.Prefix, maxIfNameLen)
	}
	tb = &Testbed{Name: name, Dir: dir}
	defer func() {
		if err != nil {
			if cerr := tb.Close(); cerr != nil {
				err = fmt.Errorf("%w (teardown: %v)", err, cerr)
			}
			tb = nil
		}
	}()
	tb.Client = &Host{Role: "client", NS: name + "-client", Iface: name + "c0",
		Addr: netip.MustParseAddr("198.51.100.2")}
	tb.Server = &Host{Role: "server", NS: name + "-server", Iface: name + "s0",
		Addr: netip.MustParseAddr("203.0.113.2")}
	tb.Client.Prefix = netip.PrefixFrom(tb.Client.Addr, 24)
	tb.Server.Prefix = netip.PrefixFrom(tb.Server.Addr, 24)
	tb.Client.Addrs = []netip.Addr{tb.Client.Addr}
	tb.Server.Addrs = []netip.Addr{tb.Server.Addr}

	for _, h := range []*Host{tb.Client, tb.Server} {
		if err := tb.addNamespace(ctx, h.NS); err != nil {
			return nil, err
		}
	}
	if opts.Link != nil {
		tb.Client.Addrs = append(tb.Client.Addrs, linkClientAddrs(opts.Link)...)
		if err := tb.wireLink(ctx, *opts.Link); err != nil {
			return nil, err
		}
	} else if err := tb.wireDirect(ctx); err != nil {
		return nil, err
	}
	for _, pair := range []struct {
		h    *Host
		peer netip.Prefix
	}{{tb.Client, ServerRange}, {tb.Server, ClientRange}} {
		h := pair.h
		steps := [][]string{
			{"-n", h.NS, "addr", "add", h.Prefix.String(), "dev", h.Iface},
			{"-n", h.NS, "link", "set", h.Iface, "up"},
			{"-n", h.NS, "route", "add", pair.peer.String(), "dev", h.Iface},
		}
		for _, s := range steps {
			if err := tb.ip(ctx, s...); err != nil {
				return nil, err
			}
		}
		for _, a := range h.Addrs[1:] {
			if err := tb.ip(ctx, "-n", h.NS, "addr", "add", netip.PrefixFrom(a, 24).String(), "dev", h.Iface); err != nil {
				return nil, err
			}
		}
	}
	if tb.Link != nil {
		if err := tb.pinNeighbours(ctx); err != nil {
			return nil, err
		}
	}
	return tb, nil
}

// wireDirect joins client and server with one veth pair, created with one
// end in each namespace so it never appears in the root namespace. wireLink
// replaces this step only: two veth pairs into a link namespace whose bridge
// forwards frames, same interface names on the hosts' side, same addresses
// and routes.
func (tb *Testbed) wireDirect(ctx context.Context) error {
	return tb.ip(ctx, "-n", tb.Client.NS, "link", "add", tb.Client.Iface, "type", "veth",
		"peer", "name", tb.Server.Iface, "netns", tb.Server.NS)
}

// addNamespace creates a namespace, registers its deletion, brings lo up and
// disables IPv6 so no address outside the documentation ranges exists.
func (tb *Testbed) addNamespace(ctx context.Context, ns string) error {
	if err := tb.ip(ctx, "netns", "add", ns); err != nil {
		return err
	}
	tb.onClose(func() error {
		return tb.ip(context.Background(), "netns", "del", ns)
	})
	// -e: a kernel without IPv6 has no such keys, which is fine.
	if _, err := tb.Exec(ctx, ns, "sysctl", "-e", "-q", "-w",
		"net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"); err != nil {
		return err
	}
	return tb.ip(ctx, "-n", ns, "link", "set", "lo", "up")
}

// onClose registers a teardown step; steps run in reverse order.
func (tb *Testbed) onClose(f func() error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.cleanups = append(tb.cleanups, f)
}

// Close stops every process the testbed started (by PID), deletes its nft
// tables and namespaces. It runs every step even if some fail and is safe to
// call more than once.
func (tb *Testbed) Close() error {
	tb.mu.Lock()
	if tb.closed {
		tb.mu.Unlock()
		return nil
	}
	tb.closed = true
	cl := tb.cleanups
	tb.cleanups = nil
	tb.mu.Unlock()
	var errs []error
	for i := len(cl) - 1; i >= 0; i-- {
		if err := cl[i](); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ip runs the ip tool in the root namespace (its -n flag targets a namespace).
func (tb *Testbed) ip(ctx context.Context, args ...string) error {
	_, err := runBounded(ctx, "ip", args...)
	return err
}

// Exec runs a short command inside namespace ns, bounded by cmdTimeout, and
// returns its stdout.
func (tb *Testbed) Exec(ctx context.Context, ns, name string, args ...string) ([]byte, error) {
	path, err := toolPath(name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	return run(ctx, "ip", append([]string{"netns", "exec", ns, path}, args...)...)
}

// execLong is Exec bounded by ctx alone, for commands that may take longer
// than cmdTimeout (ctx must carry a deadline).
func (tb *Testbed) execLong(ctx context.Context, ns, name string, args ...string) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		return nil, fmt.Errorf("%s: unbounded context", name)
	}
	path, err := toolPath(name)
	if err != nil {
		return nil, err
	}
	return run(ctx, "ip", append([]string{"netns", "exec", ns, path}, args...)...)
}

func runBounded(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	return run(ctx, name, args...)
}

// run runs a command to completion; ctx must carry a deadline.
func run(ctx context.Context, name string, args ...string) ([]byte, error) {
	path, err := toolPath(name)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, path, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %q: %w: %s", name, args, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}
