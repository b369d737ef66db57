package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// NFTable is an nftables table the testbed installed in one namespace.
type NFTable struct {
	tb   *Testbed
	Host *Host
	Name string // family inet; prefixed with the run's unique name
}

// AddNFTable loads an nft table named <run>_<suffix> with the given body
// (chains and rules, without the surrounding "table inet NAME { }") into h's
// namespace. Close deletes it.
func (tb *Testbed) AddNFTable(ctx context.Context, h *Host, suffix, body string) (*NFTable, error) {
	name := tb.Name + "_" + suffix
	script := fmt.Sprintf("table inet %s {\n%s\n}\n", name, body)
	file := filepath.Join(tb.Dir, name+".nft")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		return nil, fmt.Errorf("nft script: %w", err)
	}
	if _, err := tb.Exec(ctx, h.NS, "nft", "-f", file); err != nil {
		return nil, fmt.Errorf("load nft table %s in %s: %w", name, h.NS, err)
	}
	t := &NFTable{tb: tb, Host: h, Name: name}
	tb.onClose(func() error {
		// The namespace's deletion would drop it too; deleting explicitly
		// keeps teardown correct if namespaces ever outlive the table.
		_, err := tb.Exec(context.Background(), h.NS, "nft", "delete", "table", "inet", name)
		return err
	})
	return t, nil
}

// DropSYNs installs, in h's namespace (the server's), a rule dropping incoming
// client SYNs on h's veth deterministically: of every `every` SYNs the first
// is dropped (numgen inc mod every == 0). With every=2 and connections opened
// one after another, the first SYN of each connection is dropped and its
// retransmission (about 1 s later, Linux's initial RTO) is accepted. The drop
// is in the input hook, after the capture tap: tcpdump on h's veth still sees
// every SYN, as rtmon would at the server.
func (tb *Testbed) DropSYNs(ctx context.Context, h *Host, every int) (*NFTable, error) {
	if every < 1 {
		return nil, fmt.Errorf("DropSYNs: every must be >= 1, got %d", every)
	}
	body := fmt.Sprintf(`  chain input {
    type filter hook input priority filter; policy accept;
    iifname %q tcp flags & (syn | ack) == syn numgen inc mod %d == 0 counter drop
  }`, h.Iface, every)
	return tb.AddNFTable(ctx, h, "syndrop", body)
}

// nftRules is the part of `nft -j list table` the counters are in.
type nftRules struct {
	Nftables []struct {
		Rule *struct {
			Expr []struct {
				Counter *struct {
					Packets int `json:"packets"`
				} `json:"counter"`
			} `json:"expr"`
		} `json:"rule"`
	} `json:"nftables"`
}

// Counters returns the packet counts of the table's counters, in rule order.
func (t *NFTable) Counters(ctx context.Context) ([]int, error) {
	out, err := t.tb.Exec(ctx, t.Host.NS, "nft", "-j", "list", "table", "inet", t.Name)
	if err != nil {
		return nil, fmt.Errorf("list nft table %s: %w", t.Name, err)
	}
	n, err := nftCounters(out)
	if err != nil {
		return nil, fmt.Errorf("nft table %s: %w", t.Name, err)
	}
	return n, nil
}

// nftCounters reads the counters of `nft -j list table`'s output, in rule
// order.
func nftCounters(out []byte) ([]int, error) {
	var rules nftRules
	if err := json.Unmarshal(out, &rules); err != nil {
		return nil, err
	}
	var n []int
	for _, o := range rules.Nftables {
		if o.Rule == nil {
			continue
		}
		for _, e := range o.Rule.Expr {
			if e.Counter != nil {
				n = append(n, e.Counter.Packets)
			}
		}
	}
	return n, nil
}

// synProxyRules is the nft table body that puts the kernel's SYNPROXY in
// front of port on iface: the client's SYN is left untracked and answered
// by SYNPROXY with a cookie; once the client's ACK checks out, SYNPROXY
// opens the connection to the local listener itself. The capture (on the
// veth, before these hooks) sees the client's side only.
func synProxyRules(iface string, port int) string {
	return fmt.Sprintf(`  chain pre {
    type filter hook prerouting priority raw; policy accept;
    iifname %[1]q tcp dport %[2]d tcp flags syn notrack
  }
  chain in {
    type filter hook input priority filter; policy accept;
    iifname %[1]q tcp dport %[2]d ct state invalid,untracked synproxy mss 1460 wscale 7 timestamp sack-perm
    iifname %[1]q tcp dport %[2]d ct state invalid counter drop
  }`, iface, port)
}

// startSYNProxy loads the SYNPROXY table in the server's namespace and
// makes conntrack strict there, as SYNPROXY needs (a loose conntrack
// would pick the client's ACK up as a new connection).
func startSYNProxy(ctx context.Context, tb *Testbed, port int) error {
	if _, err := tb.AddNFTable(ctx, tb.Server, "synproxy", synProxyRules(tb.Server.Iface, port)); err != nil {
		return fmt.Errorf("synproxy: %w", err)
	}
	if _, err := tb.Exec(ctx, tb.Server.NS, "sysctl", "-q", "-w", "net.netfilter.nf_conntrack_tcp_loose=0"); err != nil {
		return fmt.Errorf("synproxy: strict conntrack: %w", err)
	}
	return nil
}

// synDropRules is the nft table body for a drop mode ("" for none). The
// drops are in the input hook, after the capture tap, as a server that
// drops SYNs (full queue, policy) would show them.
func synDropRules(mode SYNDropMode, iface string, port int) string {
	syn := fmt.Sprintf("iifname %q tcp dport %d tcp flags & (syn | ack) == syn", iface, port)
	switch mode {
	case DropFirstSplicedSYN:
		return fmt.Sprintf(`  set dropped { type ipv4_addr . inet_service; flags dynamic,timeout; timeout 30s; }
  chain input {
    type filter hook input priority filter; policy accept;
    %s tcp sport %d-%d ip saddr . tcp sport != @dropped add @dropped { ip saddr . tcp sport } counter drop
  }`, syn, spliceFirstPortMin, spliceFirstPortMax)
	case DropFirstSYNPerPageview:
		// dropped: connections whose first SYN went, so their next SYN (the
		// client's retransmission or the front end's copy) passes. active:
		// addresses with a SYN within the idle time, whose further
		// connections belong to the same pageview and pass.
		return fmt.Sprintf(`  set active { type ipv4_addr; flags dynamic,timeout; timeout %ds; }
  set dropped { type ipv4_addr . inet_service; flags dynamic,timeout; timeout 30s; }
  chain input {
    type filter hook input priority filter; policy accept;
    %s ip saddr . tcp sport @dropped update @active { ip saddr } accept
    %s ip saddr @active update @active { ip saddr } accept
    %s add @dropped { ip saddr . tcp sport } add @active { ip saddr } counter drop
  }`, int(handshakeIdle/time.Second), syn, syn, syn)
	case DropLowClassSYNs:
		return fmt.Sprintf(`  chain input {
    type filter hook input priority filter; policy accept;
    %s ip saddr != %s counter drop
  }`, syn, validateHighPattern)
	case DropLowClassSYNsWhileRTHigh:
		// rthigh holds the server's address while the drop is on. As the
		// what-if admits or drops a unit at its first SYN, a client whose
		// page was let in (a SYN within the idle time) keeps connecting.
		low := fmt.Sprintf("%s ip saddr != %s", syn, validateHighPattern)
		return fmt.Sprintf(`  set rthigh { type ipv4_addr; }
  set active { type ipv4_addr; flags dynamic,timeout; timeout %ds; }
  chain input {
    type filter hook input priority filter; policy accept;
    %s ip saddr @active update @active { ip saddr } accept
    %s ip daddr @rthigh counter drop
    %s update @active { ip saddr } accept
  }`, int(handshakeIdle/time.Second), low, low, low)
	}
	return ""
}
