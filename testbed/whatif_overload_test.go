//go:build validate

package testbed

// The what-if validation under overload (issue 12), a make validate
// target: minutes of runs; make test runs a shortened one
// (TestWhatIfOverloadRelief).

import (
	"fmt"
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
// A fourth setup puts a splicer in front of the server (SPLICE for every
// class): the clients' handshakes complete at once, and the splicer's own
// SYNs meet the full backlog and are retried on the kernel's schedule. A
// fifth puts FAST SYN on the bridge (a copy every 200 ms until answered):
// the copies meet the full backlog too.
//
// Every setup runs overloadRepeats times, in rounds (one of each setup a
// round, so that drift of the machine touches all alike). Baseline i
// predicts applied run i; the mean of the predictions is judged against
// the mean of the measurements, and the spread of the pairs is logged.
func TestWhatIfOverloadValidation(t *testing.T) {
	b := newOverloadBench(t)
	const rtHighAbove = 1200 * time.Millisecond
	condRule, err := whatif.ParseRule("IF IP.SRC != " + validateHighPattern + " AND RT_HIGH > 1.2s THEN DROP SYN")
	if err != nil {
		t.Fatal(err)
	}
	fastRule, err := whatif.ParseRule("IF IP.SRC == * THEN FAST SYN GAP 200ms")
	if err != nil {
		t.Fatal(err)
	}
	spliceRule, err := whatif.ParseRule("IF IP.SRC == * THEN SPLICE")
	if err != nil {
		t.Fatal(err)
	}
	setups := []overloadSetup{
		{name: "base"},
		{name: "applied", drops: DropLowClassSYNs, rule: b.dropLow, judge: "overload-drop-syn"},
		{name: "rthigh", drops: DropLowClassSYNsWhileRTHigh, rule: condRule, judge: "overload-rthigh-drop-syn", spec: func(s *ValidationSpec) {
			s.RTHigh = &RTHighDrive{Rtmon: b.rtmon, Classes: b.classes, Above: rtHighAbove}
		}},
		{name: "splice", rule: spliceRule, judge: "overload-splice", spec: func(s *ValidationSpec) { s.SpliceProxy = true }},
		{name: "fastsyn", rule: fastRule, judge: "overload-fast-syn", spec: func(s *ValidationSpec) { s.FastSYN = 200 * time.Millisecond }},
	}
	for round := 1; round <= overloadRepeats; round++ {
		for i := range setups {
			s := &setups[i]
			r, dir := b.run(t, fmt.Sprintf("%s%d", s.name, round), overloadValidationLoads, s.drops, s.spec)
			s.runs, s.dirs = append(s.runs, r), append(s.dirs, dir)
		}
	}
	base := setups[0]
	var runToRun strings.Builder
	for _, s := range setups {
		for i := 1; i < len(s.runs); i++ {
			runToRun.WriteString(formatRunToRun(fmt.Sprintf("%s %d vs 1", s.name, i+1), s.runs[0], s.runs[i]))
		}
	}
	t.Logf("run to run, the same setup again (against its first run):\n%s", runToRun.String())
	for i, cond := range setups[2].runs {
		t.Logf("RT_HIGH driver, run %d: %d switches over %d live events, on for %v; nft dropped %d SYNs",
			i+1, cond.RTHigh.Switches, cond.RTHigh.Events, cond.RTHigh.On, cond.NFTDrops)
		if cond.RTHigh.Switches == 0 || cond.NFTDrops == 0 {
			t.Errorf("run %d: the conditional drop never acted (%d switches, %d SYNs dropped): the run says nothing of RT_HIGH", i+1, cond.RTHigh.Switches, cond.NFTDrops)
		}
	}
	for i, fast := range setups[4].runs {
		t.Logf("fast SYN, run %d: the bridge injected %d SYN copies; %d loads were reset by the server (set aside)", i+1, fast.InjectedSYN, resetLoads(fast, ""))
	}
	for _, dir := range base.dirs {
		fitOverload(t, dir)
	}
	var misses []string
	for _, s := range setups[1:] {
		rows, spread, miss := judgeRepeated(s.judge, s.pairs(t, base, queueValidateOptions()))
		t.Logf("%s (queue model), the mean of %d pairs:\n%s%s", s.judge, len(s.runs), FormatValidationTable(rows), spread)
		misses = append(misses, miss...)
	}
	// The models the queue model replaced, for comparison (not judged).
	for _, s := range []overloadSetup{setups[1], setups[4]} {
		rows, spread, _ := judgeRepeated(s.judge+" (linear/analytic)", s.pairs(t, base, validateOptions))
		t.Logf("the same with the linear load model and the analytic actions:\n%s%s", FormatValidationTable(rows), spread)
	}
	for _, miss := range misses {
		t.Error(miss)
	}
}

// overloadRepeats is how many times each setup of the overload validation
// runs: two real runs of one setup differed by up to 34% at a class's
// p90, which no model can be judged within 10% against.
const overloadRepeats = 3

// overloadSetup is one setup of the overload validation and its runs.
type overloadSetup struct {
	name, judge string
	drops       SYNDropMode
	spec        func(*ValidationSpec)
	rule        whatif.Rule
	runs        []ValidationRun
	dirs        []string
}

// pairs predicts each of s's runs from the baseline run of its round.
func (s overloadSetup) pairs(t *testing.T, base overloadSetup, opts whatif.Options) [][]judgedRow {
	var out [][]judgedRow
	for i := range s.runs {
		out = append(out, predictValidation(t, fmt.Sprintf("%s (round %d)", s.judge, i+1), s.rule, base.runs[i], s.runs[i], base.dirs[i], s.dirs[i], opts))
	}
	return out
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
