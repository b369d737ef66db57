package reconstruct_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/synth"
)

// TestWorkloadMatchesTruth reconstructs a generated population of browsers
// (keep-alive, parallel connections, SYN and SYN/ACK losses, data loss and
// retransmission, three RTT groups) and compares every transaction with the
// generator's exact client-side truth.
func TestWorkloadMatchesTruth(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("ipv6=%v", v6), func(t *testing.T) {
			var truth []synth.TruthRecord
			out := analyze(t, synth.Options{Nanosecond: true}, reconstruct.Config{}, func(w *synth.Writer) {
				_, err := synth.Generate(w, synth.Workload{
					Seed: 42, Clients: 30, Duration: 30 * time.Second, IPv6: v6,
					SYNLossRate: 0.1, SYNACKLossRate: 0.05, DataLossRate: 0.02,
				}, func(r synth.TruthRecord) { truth = append(truth, r) })
				if err != nil {
					t.Fatal(err)
				}
			})
			type key struct {
				client netip.AddrPort
				reqCap int64
			}
			got := map[key]*reconstruct.Transaction{}
			for _, tx := range out.txs {
				got[key{netip.AddrPortFrom(tx.Client, tx.ClientPort), tx.RequestFirst}] = tx
			}
			if len(out.txs) != len(truth) {
				t.Errorf("transactions: got %d, truth %d", len(out.txs), len(truth))
			}
			var synLoss, mismatches int
			for _, r := range truth {
				tx := got[key{r.Client, r.ReqFirstCap}]
				if tx == nil {
					t.Errorf("truth transaction %v %s at %d not reconstructed", r.Client, r.URL, r.ReqFirstCap)
					continue
				}
				if r.SYNs > 1 {
					synLoss++
				}
				exp := want{r.Start, r.Tconn, 0, r.Trequest, r.Tserver, r.Ttransfer, r.End - r.Start}
				if g := (want{tx.Start, tx.Tconn, tx.Ttls, tx.Trequest, tx.Tserver, tx.Ttransfer, tx.Total}); g != exp {
					mismatches++
					if mismatches <= 5 {
						t.Errorf("%s %s (new conn %v, SYNs %d, SYN/ACKs %d, retrans %d):\n got  %+v\n want %+v flags %v",
							r.Client, r.URL, r.NewConn, r.SYNs, r.SYNACKs, r.RetransBytes, g, exp, tx.Flags)
					}
				}
				if tx.URL != r.URL || tx.Status != r.Status || tx.Referer != r.Referer || tx.BodyBytes != int64(r.BodyBytes) {
					t.Errorf("fields differ: %s %d %q %d vs truth %s %d %q %d", tx.URL, tx.Status, tx.Referer, tx.BodyBytes, r.URL, r.Status, r.Referer, r.BodyBytes)
				}
			}
			if mismatches > 0 {
				t.Errorf("%d of %d transactions differ from truth", mismatches, len(truth))
			}
			if synLoss == 0 {
				t.Error("workload produced no SYN losses; the test would prove nothing about them")
			}
		})
	}
}
