package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
