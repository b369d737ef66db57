package testbed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"testing"
)

// This file builds the two-sensor topology of issue #16: a client whose
// connections a router spreads over two L4 front ends by real kernel ECMP,
// one rtmon sensor at each front end.
//
//	<p>-client c0 <-> r0 [<p>-router] r1 <-> a0 [<p>-fe0] a1 <-> s0 [<p>-server]
//	                                  r2 <-> b0 [<p>-fe1] b1 <-> s1
//
// The client keeps the single-sensor testbed's addresses and routes (one
// veth, 198.51.100.2/24, a device route to 203.0.113.0/24), so its capture
// is the truth exactly as there. It reaches the site at the VIP
// 203.0.113.100. The router, upstream of the front ends as in real sites,
// holds a multipath route to the VIP over both front ends with the L4 hash
// (fib_multipath_hash_policy=1): each TCP connection takes one front end by
// its 5-tuple, the return path follows it. Each front end DNATs VIP:80 to
// the server and SNATs to its own server-side address, as an L4 load
// balancer that SNATs does, so the server's replies come back through it.
// Its sensor captures on its client-facing veth: the client's real address
// and the VIP, both directions. The router has no addresses of its own:
// every neighbour entry on every hop is pinned, so no ARP crosses and only
// documentation addresses exist.

// ECMP addresses.
var (
	ECMPVIP = netip.MustParseAddr("203.0.113.100")
	// Per front end: client-facing and server-facing addresses.
	ecmpFront = [2]netip.Addr{netip.MustParseAddr("198.51.100.10"), netip.MustParseAddr("198.51.100.11")}
	ecmpBack  = [2]netip.Addr{netip.MustParseAddr("203.0.113.10"), netip.MustParseAddr("203.0.113.11")}
)

// ECMP is the testbed with a router and two front ends between client and
// server. Testbed.Link is nil; Server.Iface is the veth to front end 0.
type ECMP struct {
	*Testbed
	RouterNS string
	// FrontEnds: each front end's namespace with its client-facing veth
	// and address (where its sensor captures).
	FrontEnds [2]*Host
}

// NewECMP builds the ECMP testbed for a test and registers Close with
// t.Cleanup; it fails the test when something is missing.
func NewECMP(t testing.TB, prefix string) *ECMP {
	t.Helper()
	e, err := OpenECMP(context.Background(), prefix, t.TempDir())
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("testbed teardown: %v", err)
		}
	})
	return e
}

// OpenECMP builds the ECMP testbed; the caller must Close it. On error
// everything already created is torn down.
func OpenECMP(ctx context.Context, prefix, dir string) (e *ECMP, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("needs root (network namespaces, nftables, capture)")
	}
	for _, name := range []string{"ip", "sysctl", "nft"} {
		if _, err := toolPath(name); err != nil {
			return nil, err
		}
	}
	name, err := uniqueName(prefix)
	if err != nil {
		return nil, err
	}
	tb := &Testbed{Name: name, Dir: dir}
	defer func() {
		if err != nil {
			if cerr := tb.Close(); cerr != nil {
				err = fmt.Errorf("%w (teardown: %v)", err, cerr)
			}
			e = nil
		}
	}()
	host := func(role, ns, iface, addr string) *Host {
		a := netip.MustParseAddr(addr)
		return &Host{Role: role, NS: ns, Iface: iface, Addr: a, Prefix: netip.PrefixFrom(a, 24), Addrs: []netip.Addr{a}}
	}
	tb.Client = host("client", name+"-client", name+"c0", "198.51.100.2")
	tb.Server = host("server", name+"-server", name+"s0", "203.0.113.2")
	e = &ECMP{Testbed: tb, RouterNS: name + "-router"}
	for i, tag := range []string{"a", "b"} {
		e.FrontEnds[i] = host("frontend", name+"-fe"+strconv.Itoa(i), name+tag+"0", ecmpFront[i].String())
	}
	for _, ns := range []string{tb.Client.NS, e.RouterNS, e.FrontEnds[0].NS, e.FrontEnds[1].NS, tb.Server.NS} {
		if err := tb.addNamespace(ctx, ns); err != nil {
			return nil, err
		}
	}
	// Forwarding namespaces: set before their veths exist, so the
	// interfaces inherit the defaults. rp_filter off: the router's
	// multipath return traffic would fail a strict reverse-path check.
	fwd := []string{"net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"}
	for _, ns := range []string{e.RouterNS, e.FrontEnds[0].NS, e.FrontEnds[1].NS} {
		args := append([]string{"-q", "-w"}, fwd...)
		if ns == e.RouterNS {
			// L4 hash: the connection's 5-tuple picks the front end.
			args = append(args, "net.ipv4.fib_multipath_hash_policy=1")
		}
		if _, err := tb.Exec(ctx, ns, "sysctl", args...); err != nil {
			return nil, fmt.Errorf("ecmp sysctl in %s: %w", ns, err)
		}
	}
	if err := e.wire(ctx); err != nil {
		return nil, err
	}
	if err := e.route(ctx); err != nil {
		return nil, err
	}
	for i := range e.FrontEnds {
		if err := e.addNAT(ctx, i); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// uniqueName is the run's name: prefix, pid and random, as Open makes it.
func uniqueName(prefix string) (string, error) {
	if prefix == "" {
		prefix = "rte"
	}
	for _, r := range prefix {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return "", fmt.Errorf("prefix %q: only a-z and 0-9 allowed", prefix)
		}
	}
	var rnd [2]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", fmt.Errorf("random prefix: %w", err)
	}
	name := prefix + strconv.FormatInt(int64(os.Getpid()), 36) + hex.EncodeToString(rnd[:])
	if len(name)+2 > maxIfNameLen {
		return "", fmt.Errorf("prefix %q too long: interface names would exceed %d bytes", prefix, maxIfNameLen)
	}
	return name, nil
}

// ecmpLink is one veth pair: an end in each namespace.
type ecmpLink struct{ ns1, if1, ns2, if2 string }

// links lists the topology's veth pairs.
func (e *ECMP) links() []ecmpLink {
	n := e.Name
	return []ecmpLink{
		{e.Client.NS, e.Client.Iface, e.RouterNS, n + "r0"},
		{e.RouterNS, n + "r1", e.FrontEnds[0].NS, e.FrontEnds[0].Iface},
		{e.RouterNS, n + "r2", e.FrontEnds[1].NS, e.FrontEnds[1].Iface},
		{e.FrontEnds[0].NS, n + "a1", e.Server.NS, n + "s0"},
		{e.FrontEnds[1].NS, n + "b1", e.Server.NS, n + "s1"},
	}
}

// wire creates the veth pairs, each directly in its two namespaces, and
// brings them up.
func (e *ECMP) wire(ctx context.Context) error {
	for _, l := range e.links() {
		if err := e.ip(ctx, "-n", l.ns1, "link", "add", l.if1, "type", "veth", "peer", "name", l.if2, "netns", l.ns2); err != nil {
			return err
		}
		for _, end := range [][2]string{{l.ns1, l.if1}, {l.ns2, l.if2}} {
			if err := e.ip(ctx, "-n", end[0], "link", "set", end[1], "up"); err != nil {
				return err
			}
		}
	}
	return nil
}

// route assigns addresses, device routes, the router's multipath route and
// pinned neighbour entries (each hop's next hop by its peer's MAC).
func (e *ECMP) route(ctx context.Context) error {
	n, c, s := e.Name, e.Client, e.Server
	rt := e.RouterNS
	fe := e.FrontEnds
	steps := [][]string{
		{"-n", c.NS, "addr", "add", c.Prefix.String(), "dev", c.Iface},
		{"-n", c.NS, "route", "add", ServerRange.String(), "dev", c.Iface},
		{"-n", rt, "route", "add", c.Addr.String() + "/32", "dev", n + "r0"},
		{"-n", s.NS, "addr", "add", s.Addr.String() + "/32", "dev", n + "s0"},
		{"-n", s.NS, "addr", "add", s.Addr.String() + "/32", "dev", n + "s1"},
	}
	for i, tag := range []string{"a", "b"} {
		r := n + "r" + strconv.Itoa(i+1)
		si := n + "s" + strconv.Itoa(i)
		steps = append(steps,
			[]string{"-n", rt, "route", "add", ecmpFront[i].String() + "/32", "dev", r},
			[]string{"-n", fe[i].NS, "addr", "add", ecmpFront[i].String() + "/32", "dev", fe[i].Iface},
			[]string{"-n", fe[i].NS, "route", "add", c.Addr.String() + "/32", "dev", fe[i].Iface},
			[]string{"-n", fe[i].NS, "addr", "add", ecmpBack[i].String() + "/32", "dev", n + tag + "1"},
			[]string{"-n", fe[i].NS, "route", "add", s.Addr.String() + "/32", "dev", n + tag + "1"},
			[]string{"-n", s.NS, "route", "add", ecmpBack[i].String() + "/32", "dev", si})
	}
	steps = append(steps, []string{"-n", rt, "route", "add", ECMPVIP.String() + "/32",
		"nexthop", "via", ecmpFront[0].String(), "dev", n + "r1",
		"nexthop", "via", ecmpFront[1].String(), "dev", n + "r2"})
	for _, st := range steps {
		if err := e.ip(ctx, st...); err != nil {
			return err
		}
	}
	// Neighbour pins: {namespace, device, address, peer namespace, peer
	// device}. The client's and the front ends' entries for addresses
	// beyond the router name the router's MAC, as proxy ARP would.
	pins := [][5]string{
		{c.NS, c.Iface, ECMPVIP.String(), rt, n + "r0"},
		{rt, n + "r0", c.Addr.String(), c.NS, c.Iface},
	}
	for i, tag := range []string{"a", "b"} {
		r := n + "r" + strconv.Itoa(i+1)
		si := n + "s" + strconv.Itoa(i)
		pins = append(pins,
			[5]string{rt, r, ecmpFront[i].String(), fe[i].NS, fe[i].Iface},
			[5]string{fe[i].NS, fe[i].Iface, c.Addr.String(), rt, r},
			[5]string{fe[i].NS, n + tag + "1", s.Addr.String(), s.NS, si},
			[5]string{s.NS, si, ecmpBack[i].String(), fe[i].NS, n + tag + "1"})
	}
	for _, p := range pins {
		mac, err := e.mac(ctx, &Host{NS: p[3], Iface: p[4]})
		if err != nil {
			return err
		}
		if err := e.ip(ctx, "-n", p[0], "neigh", "replace", p[2], "lladdr", mac, "dev", p[1], "nud", "permanent"); err != nil {
			return err
		}
	}
	return nil
}

// addNAT makes front end i an L4 load balancer: VIP:80 DNAT to the server,
// SNAT to its own server-side address on the way there.
func (e *ECMP) addNAT(ctx context.Context, i int) error {
	back := e.Name + []string{"a", "b"}[i] + "1"
	body := fmt.Sprintf(`  chain pre {
    type nat hook prerouting priority dstnat; policy accept;
    ip daddr %s tcp dport 80 dnat ip to %s:80
  }
  chain post {
    type nat hook postrouting priority srcnat; policy accept;
    oifname %q snat ip to %s
  }`, ECMPVIP, e.Server.Addr, back, ecmpBack[i])
	if _, err := e.AddNFTable(ctx, e.FrontEnds[i], "lb", body); err != nil {
		return fmt.Errorf("front end %d: %w", i, err)
	}
	return nil
}
