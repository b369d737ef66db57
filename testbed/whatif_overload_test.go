//go:build validate

package testbed

// The what-if validation under overload (issue 12), a make validate
// target: minutes of runs; make test runs a shortened one
// (TestWhatIfOverloadRelief).

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/whatif"
)

// TestWhatIfOverloadValidation: a prefork server (4 workers, a listen
// backlog of 4) overloaded by a low class loading pages four times as
// often as the high class: the kernel drops SYNs of both classes. The
// baseline's records predict, with the queue model, what dropping the low
// class's SYNs does, always and only while RT_HIGH is high; the applied
// runs really drop them (nft; the conditional drop switched by a driver
// reading rtmon live's RT_HIGH) and the high class's clients measure it.
// A fourth run puts a splicer in front of the server (SPLICE for every
// class): the clients' handshakes complete at once, and the splicer's own
// SYNs meet the full backlog and are retried on the kernel's schedule. A
// fifth puts FAST SYN on the bridge (a copy every 200 ms until answered):
// the copies meet the full backlog too.
func TestWhatIfOverloadValidation(t *testing.T) {
	b := newOverloadBench(t)
	const rtHighAbove = 1200 * time.Millisecond
	condRule, err := whatif.ParseRule("IF IP.SRC != " + validateHighPattern + " AND RT_HIGH > 1.2s THEN DROP SYN")
	if err != nil {
		t.Fatal(err)
	}
	base, baseDir := b.run(t, "base", overloadValidationLoads, NoSYNDrops, nil)
	applied, appliedDir := b.run(t, "applied", overloadValidationLoads, DropLowClassSYNs, nil)
	cond, condDir := b.run(t, "rthigh", overloadValidationLoads, DropLowClassSYNsWhileRTHigh, func(s *ValidationSpec) {
		s.RTHigh = &RTHighDrive{Rtmon: b.rtmon, Classes: b.classes, Above: rtHighAbove}
	})
	spliced, splicedDir := b.run(t, "splice", overloadValidationLoads, NoSYNDrops, func(s *ValidationSpec) { s.SpliceProxy = true })
	fast, fastDir := b.run(t, "fastsyn", overloadValidationLoads, NoSYNDrops, func(s *ValidationSpec) { s.FastSYN = 200 * time.Millisecond })
	// The same runs again: how far two real runs of one setup differ is
	// the floor under any prediction's error.
	base2, _ := b.run(t, "base2", overloadValidationLoads, NoSYNDrops, nil)
	spliced2, _ := b.run(t, "splice2", overloadValidationLoads, NoSYNDrops, func(s *ValidationSpec) { s.SpliceProxy = true })
	fast2, _ := b.run(t, "fastsyn2", overloadValidationLoads, NoSYNDrops, func(s *ValidationSpec) { s.FastSYN = 200 * time.Millisecond })
	t.Logf("run to run, the same setup twice (the second against the first):\n%s%s%s",
		formatRunToRun("no action", base, base2), formatRunToRun("SPLICE", spliced, spliced2), formatRunToRun("FAST SYN GAP 200ms", fast, fast2))
	fastRule, err := whatif.ParseRule("IF IP.SRC == * THEN FAST SYN GAP 200ms")
	if err != nil {
		t.Fatal(err)
	}
	spliceRule, err := whatif.ParseRule("IF IP.SRC == * THEN SPLICE")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RT_HIGH driver: %d switches over %d live events, on for %v; nft dropped %d SYNs",
		cond.RTHigh.Switches, cond.RTHigh.Events, cond.RTHigh.On, cond.NFTDrops)
	if cond.RTHigh.Switches == 0 || cond.NFTDrops == 0 {
		t.Errorf("the conditional drop never acted (%d switches, %d SYNs dropped): the run says nothing of RT_HIGH", cond.RTHigh.Switches, cond.NFTDrops)
	}
	fitOverload(t, baseDir)
	rows, misses := judgeValidationWith(t, "overload-drop-syn", b.dropLow, base, applied, baseDir, appliedDir, queueValidateOptions())
	t.Logf("what-if validation under overload (queue model):\n%s", FormatValidationTable(rows))
	linRows, _ := judgeValidationWith(t, "overload-drop-syn (linear)", b.dropLow, base, applied, baseDir, appliedDir, validateOptions)
	t.Logf("the same with the linear model:\n%s", FormatValidationTable(linRows))
	condRows, condMisses := judgeValidationWith(t, "overload-rthigh-drop-syn", condRule, base, cond, baseDir, condDir, queueValidateOptions())
	t.Logf("the drop switched by rtmon live's RT_HIGH (queue model):\n%s", FormatValidationTable(condRows))
	spliceRows, spliceMisses := judgeValidationWith(t, "overload-splice", spliceRule, base, spliced, baseDir, splicedDir, queueValidateOptions())
	t.Logf("a splicer in front of the overloaded server (queue model):\n%s", FormatValidationTable(spliceRows))
	t.Logf("fast SYN: the bridge injected %d SYN copies; %d loads were reset by the server (set aside)", fast.InjectedSYN, resetLoads(fast, ""))
	fastRows, fastMisses := judgeValidationWith(t, "overload-fast-syn", fastRule, base, fast, baseDir, fastDir, queueValidateOptions())
	t.Logf("fast SYN in front of the overloaded server (queue model):\n%s", FormatValidationTable(fastRows))
	linFastRows, _ := judgeValidationWith(t, "overload-fast-syn (analytic)", fastRule, base, fast, baseDir, fastDir, validateOptions)
	t.Logf("the same with the analytic model:\n%s", FormatValidationTable(linFastRows))
	for _, miss := range slices.Concat(misses, condMisses, spliceMisses, fastMisses) {
		t.Error(miss)
	}
}

// overloadValidationLoads is the high class's page loads per run: 78 s
// of loads holding three of the low class's bursts, so that a class's p90
// is that of six pageviews of the high class and 24 of the low, not two
// (with 20, two real runs of FAST SYN differed by 109% at the p90).
const overloadValidationLoads = 60

// formatRunToRun tells how far run b's client-measured median and p90 per
// class lie from run a's: two real runs of one setup, the noise no
// prediction can beat.
func formatRunToRun(setup string, a, b ValidationRun) string {
	var out strings.Builder
	for _, class := range []string{ValidateHighClass, ValidateLowClass} {
		ta, _ := classLoads(a, class)
		tb, _ := classLoads(b, class)
		da, db := whatif.NewDistribution(ta, whatif.DefaultEdges), whatif.NewDistribution(tb, whatif.DefaultEdges)
		fmt.Fprintf(&out, "    %-20s %-5s p50 %v -> %v (%+.1f%%)  p90 %v -> %v (%+.1f%%)  n %d/%d\n", setup, class,
			ms(da.P50), ms(db.P50), 100*relErr(db.P50, da.P50), ms(da.P90), ms(db.P90), 100*relErr(db.P90, da.P90), da.N, db.N)
	}
	return out.String()
}

// TestWhatIfSYNProxyValidation applies SPLICE with the kernel's SYNPROXY
// in front of the overloaded prefork server: the client's handshake
// completes at the proxy, which then sends the listener one SYN of its
// own. The baseline's records predict SPLICE as the queue model has it (a
// splicer that sends its SYN again until the server takes it), and the
// test reports how SYNPROXY really fared, loads that stalled included.
func TestWhatIfSYNProxyValidation(t *testing.T) {
	b := newOverloadBench(t)
	base, baseDir := b.run(t, "base", overloadValidationLoads, NoSYNDrops, nil)
	proxied, proxiedDir := b.run(t, "synproxy", overloadValidationLoads, NoSYNDrops, func(s *ValidationSpec) { s.SYNProxy = true })
	for _, class := range []string{ValidateHighClass, ValidateLowClass} {
		done, _ := classLoads(proxied, class)
		t.Logf("SYNPROXY %s: %d loads finished, %d stalled past %v, %d reset", class, len(done), stalledLoads(proxied, class),
			synProxyStall, resetLoads(proxied, class))
	}
	if done, _ := classLoads(proxied, ValidateHighClass); len(done) == 0 {
		t.Fatalf("no high-class load finished behind SYNPROXY: the proxy passed nothing")
	}
	spliceRule, err := whatif.ParseRule("IF IP.SRC == * THEN SPLICE")
	if err != nil {
		t.Fatal(err)
	}
	rows, misses := judgeValidationWith(t, "overload-synproxy", spliceRule, base, proxied, baseDir, proxiedDir, queueValidateOptions())
	t.Logf("SPLICE predicted, SYNPROXY applied (finished loads only):\n%s", FormatValidationTable(rows))
	for _, miss := range misses {
		t.Error(miss)
	}
}

// stalledLoads counts the loads of class in r that stalled.
func stalledLoads(r ValidationRun, class string) int {
	n := 0
	for _, l := range r.Loads {
		if l.Stalled && l.Class == class {
			n++
		}
	}
	return n
}
