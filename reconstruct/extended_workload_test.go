package reconstruct_test

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/synth"
)

// TestLossyWorkloadMatchesTruth reconstructs browsers on lossy paths as
// Linux clients and servers produce them: client ACKs lost before the
// capture point (the server's probes resend bytes the client has, which it
// reports with D-SACK), request segments lost before the capture point
// (retransmitted on the client's RTO, visible only as a step in its IPv4
// IDs), reordered multi-segment requests, lost handshake ACKs, plus the
// data, SYN and SYN/ACK losses of the plain workload. Every transaction is
// compared with the generator's client-side truth: exactly where the
// capture holds the evidence, within max(2 ms, 5%) where the client's
// retransmission timer had to be estimated.
func TestLossyWorkloadMatchesTruth(t *testing.T) {
	for _, seed := range []int64{11, 12, 13} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			lossyWorkload(t, synth.Workload{Seed: seed, Clients: 30, Duration: 40 * time.Second, IPID: synth.IPIDPerConn,
				SYNLossRate: 0.05, SYNACKLossRate: 0.03, DataLossRate: 0.02, AckLossRate: 0.05,
				UpstreamLossRate: 0.05, ReorderRate: 0.2, RequestBodies: [2]int{2000, 9000}})
		})
	}
}

// TestLossyWorkloadWithoutIPIDs: clients whose IPv4 IDs come from a
// host-wide counter (or IPv6, which has none) give no loss evidence; rtmon
// must then not claim any (no upstream_loss flag where there was none),
// and stays right wherever the capture itself holds the evidence.
func TestLossyWorkloadWithoutIPIDs(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(fmt.Sprint("ipv6=", v6), func(t *testing.T) {
			wl := synth.Workload{Seed: 21, Clients: 30, Duration: 40 * time.Second, IPv6: v6, IPID: synth.IPIDCounter,
				DataLossRate: 0.02, AckLossRate: 0.05, UpstreamLossRate: 0.05, ReorderRate: 0.2, RequestBodies: [2]int{2000, 9000}}
			var truth []synth.TruthRecord
			out := analyze(t, synth.Options{Nanosecond: true}, reconstruct.Config{}, func(w *synth.Writer) {
				if _, err := synth.Generate(w, wl, func(r synth.TruthRecord) { truth = append(truth, r) }); err != nil {
					t.Fatal(err)
				}
			})
			if len(out.txs) != len(truth) {
				t.Errorf("transactions: got %d, truth %d", len(out.txs), len(truth))
			}
			lost := 0
			for _, r := range truth {
				lost += r.UpstreamLost
			}
			flagged := 0
			for _, tx := range out.txs {
				if tx.Flags&reconstruct.FlagUpstreamLoss != 0 {
					flagged++
				}
			}
			// Without trusted IDs only a resent segment that filled a hole
			// behind later ones is evidence; never more than the losses.
			t.Logf("%d copies lost upstream, %d transactions flagged", lost, flagged)
			if lost == 0 || flagged > lost {
				t.Errorf("%d copies lost upstream, %d transactions flagged", lost, flagged)
			}
		})
	}
}

func lossyWorkload(t *testing.T, wl synth.Workload) {
	var truth []synth.TruthRecord
	out := analyze(t, synth.Options{Nanosecond: true}, reconstruct.Config{}, func(w *synth.Writer) {
		if _, err := synth.Generate(w, wl, func(r synth.TruthRecord) { truth = append(truth, r) }); err != nil {
			t.Fatal(err)
		}
	})
	type key struct {
		client netip.AddrPort
		last   int64
	}
	got := map[key]*reconstruct.Transaction{}
	for _, tx := range out.txs {
		got[key{netip.AddrPortFrom(tx.Client, tx.ClientPort), tx.RequestLast}] = tx
	}
	if len(out.txs) != len(truth) {
		t.Errorf("transactions: got %d, truth %d", len(out.txs), len(truth))
	}
	// flagMiss: a transaction outside tolerance whose evidence flag is
	// missing (a flag is not needed where the capture's own times suffice).
	var n struct{ spurious, upstream, reordered, hsLost, exact, within, outside, flagMiss, falseFlag int }
	var errs []float64
	for _, r := range truth {
		tx := got[key{r.Client, r.ReqLastCap}]
		if tx == nil {
			t.Errorf("truth %v %s (request complete at %d) not reconstructed", r.Client, r.URL, r.ReqLastCap)
			continue
		}
		if r.SpuriousRetrans {
			n.spurious++
		}
		if r.UpstreamLost > 0 {
			n.upstream++
		}
		if r.Reordered {
			n.reordered++
		}
		if r.HandshakeACKLost {
			n.hsLost++
		}
		want := r.End - r.Start
		d := time.Duration(tx.Total - want)
		exp := [...]int64{r.Start, r.Tconn, r.Trequest, r.Tserver, r.Ttransfer, want}
		gotv := [...]int64{tx.Start, tx.Tconn, tx.Trequest, tx.Tserver, tx.Ttransfer, tx.Total}
		switch tol := max(2*time.Millisecond, time.Duration(0.05*float64(want))); {
		case gotv == exp:
			n.exact++
		case d.Abs() <= tol:
			n.within++
		default:
			n.outside++
			t.Logf("%s %s: total %v, truth %v (%+v): spurious %v upstream lost %d reordered %v hs-ack lost %v flags %v",
				r.Client, r.URL, time.Duration(tx.Total), time.Duration(want), r, r.SpuriousRetrans, r.UpstreamLost,
				r.Reordered, r.HandshakeACKLost, tx.Flags)
		}
		errs = append(errs, float64(d.Abs())/float64(max(want, 1)))
		if r.SpuriousRetrans && tx.Flags&reconstruct.FlagSpuriousRetrans == 0 {
			n.flagMiss++
			t.Logf("%s %s: spurious retransmission not flagged: %v", r.Client, r.URL, tx.Flags)
		}
		if r.UpstreamLost > 0 && tx.Flags&reconstruct.FlagUpstreamLoss == 0 && d.Abs() > max(2*time.Millisecond, time.Duration(0.05*float64(want))) {
			n.flagMiss++
			t.Logf("%s %s: upstream loss not flagged: %v", r.Client, r.URL, tx.Flags)
		}
		if r.UpstreamLost == 0 && tx.Flags&reconstruct.FlagUpstreamLoss != 0 {
			n.falseFlag++
		}
		if (r.Preconnected) != (tx.Flags&reconstruct.FlagPreconnected != 0) {
			t.Errorf("%s %s: preconnected %v, flags %v", r.Client, r.URL, r.Preconnected, tx.Flags)
		}
	}
	slices.Sort(errs)
	t.Logf("%d transactions: %d exact, %d within max(2 ms, 5%%), %d outside; spurious %d, upstream loss %d, reordered %d, handshake ACK lost %d; flag misses %d, false upstream flags %d; relative error p99 %.2f%%",
		len(truth), n.exact, n.within, n.outside, n.spurious, n.upstream, n.reordered, n.hsLost, n.flagMiss, n.falseFlag,
		100*errs[len(errs)*99/100])
	for what, c := range map[string]int{"spurious retransmissions": n.spurious, "upstream losses": n.upstream,
		"reordered requests": n.reordered, "lost handshake ACKs": n.hsLost} {
		if c == 0 {
			t.Errorf("the workload made no %s: the test proves nothing about them", what)
		}
	}
	if n.outside > len(truth)/100 {
		t.Errorf("%d of %d transactions outside max(2 ms, 5%%) of the truth (bound 1%%)", n.outside, len(truth))
	}
	if n.flagMiss > 0 || n.falseFlag > 0 {
		t.Errorf("%d evidence flags missing, %d set without cause", n.flagMiss, n.falseFlag)
	}
}
