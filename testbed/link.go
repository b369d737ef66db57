package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
)

// Link is the emulated link: a namespace with two veths and the bridge
// forwarding between them.
type Link struct {
	NS         string
	ClientSide string // veth facing the client's
	ServerSide string // veth facing the server's
	Bridge     *Bridge
}

// linkClientAddrs are the client addresses an emulated link adds (its RTT
// groups), sorted, without the primary one.
func linkClientAddrs(o *LinkOptions) []netip.Addr {
	var out []netip.Addr
	for a := range o.RTT {
		if a != netip.MustParseAddr("198.51.100.2") {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// wireLink joins client and server through a link namespace:
//
//	client c0 <-veth-> lc [link: bridge] ls <-veth-> s0 server
//
// The link namespace has no addresses at all; the bridge forwards whole
// Ethernet frames, so hosts keep their addresses and device routes as with
// wireDirect. Offloads are turned off on all four veths: the kernel then
// hands the bridge MTU-sized frames with checksums filled in (segmentation
// and checksum offload would leave 64 KB super-frames and partial checksums,
// which a packet socket cannot pass on as they are), and the server-side
// capture sees the packets as a real NIC would put them on the wire.
func (tb *Testbed) wireLink(ctx context.Context, opts LinkOptions) error {
	for a := range opts.RTT {
		if !ClientRange.Contains(a) {
			return fmt.Errorf("link: client address %s outside %s", a, ClientRange)
		}
	}
	if _, err := toolPath("ethtool"); err != nil {
		return err
	}
	l := &Link{NS: tb.Name + "-link", ClientSide: tb.Name + "lc", ServerSide: tb.Name + "ls"}
	if err := tb.addNamespace(ctx, l.NS); err != nil {
		return err
	}
	steps := [][]string{
		{"-n", tb.Client.NS, "link", "add", tb.Client.Iface, "type", "veth", "peer", "name", l.ClientSide, "netns", l.NS},
		{"-n", tb.Server.NS, "link", "add", tb.Server.Iface, "type", "veth", "peer", "name", l.ServerSide, "netns", l.NS},
		{"-n", l.NS, "link", "set", l.ClientSide, "up"},
		{"-n", l.NS, "link", "set", l.ServerSide, "up"},
	}
	for _, s := range steps {
		if err := tb.ip(ctx, s...); err != nil {
			return err
		}
	}
	for _, e := range []struct{ ns, dev string }{
		{tb.Client.NS, tb.Client.Iface}, {tb.Server.NS, tb.Server.Iface},
		{l.NS, l.ClientSide}, {l.NS, l.ServerSide},
	} {
		if _, err := tb.Exec(ctx, e.ns, "ethtool", "-K", e.dev, "tx", "off", "sg", "off", "tso", "off",
			"gso", "off", "gro", "off"); err != nil {
			return fmt.Errorf("offloads off on %s: %w", e.dev, err)
		}
	}
	b, err := StartBridge(l.NS, l.ClientSide, l.ServerSide, opts)
	if err != nil {
		return err
	}
	l.Bridge = b
	tb.Link = l
	tb.onClose(b.Close)
	return nil
}

// pinNeighbours installs permanent ARP entries on both hosts, so no ARP
// exchange (delayed by the link) ever adds to a first connection's time:
// it would be in the client's connect time but invisible at the server.
func (tb *Testbed) pinNeighbours(ctx context.Context) error {
	cmac, err := tb.mac(ctx, tb.Client)
	if err != nil {
		return err
	}
	smac, err := tb.mac(ctx, tb.Server)
	if err != nil {
		return err
	}
	for _, a := range tb.Server.Addrs {
		if err := tb.ip(ctx, "-n", tb.Client.NS, "neigh", "replace", a.String(), "lladdr", smac,
			"dev", tb.Client.Iface, "nud", "permanent"); err != nil {
			return err
		}
	}
	for _, a := range tb.Client.Addrs {
		if err := tb.ip(ctx, "-n", tb.Server.NS, "neigh", "replace", a.String(), "lladdr", cmac,
			"dev", tb.Server.Iface, "nud", "permanent"); err != nil {
			return err
		}
	}
	return nil
}

func (tb *Testbed) mac(ctx context.Context, h *Host) (string, error) {
	out, err := runBounded(ctx, "ip", "-n", h.NS, "-j", "link", "show", "dev", h.Iface)
	if err != nil {
		return "", err
	}
	var links []struct {
		Address string `json:"address"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		return "", fmt.Errorf("ip -j link show %s: %v: %s", h.Iface, err, out)
	}
	return links[0].Address, nil
}

// SetClientSource makes addr the source address the client's kernel picks
// for new connections to the server (programs that do not bind one, such as
// Chromium). Connections already open keep theirs.
func (tb *Testbed) SetClientSource(ctx context.Context, addr netip.Addr) error {
	if !slices.Contains(tb.Client.Addrs, addr) {
		return fmt.Errorf("client has no address %s (has %v)", addr, tb.Client.Addrs)
	}
	return tb.ip(ctx, "-n", tb.Client.NS, "route", "replace", ServerRange.String(), "dev", tb.Client.Iface,
		"src", addr.String())
}
