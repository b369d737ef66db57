//go:build validate

package testbed

// The what-if validation under overload (issue 12), a make validate
// target: minutes of runs, not part of make test.

import (
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
func TestWhatIfOverloadValidation(t *testing.T) {
	bin, err := buildRtmon()
	if err != nil {
		t.Fatalf("rtmon is not buildable: %v", err)
	}
	preforkd, err := buildPreforkd()
	if err != nil {
		t.Fatalf("preforkd is not buildable: %v", err)
	}
	site := ValidationSite(42)
	ctx := testContext(t)
	classes, err := WriteValidateClasses(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rule, err := whatif.ParseRule("IF IP.SRC != " + validateHighPattern + " THEN DROP SYN")
	if err != nil {
		t.Fatal(err)
	}
	const rtHighAbove = 1200 * time.Millisecond
	condRule, err := whatif.ParseRule("IF IP.SRC != " + validateHighPattern + " AND RT_HIGH > 1.2s THEN DROP SYN")
	if err != nil {
		t.Fatal(err)
	}
	overload := func(s *ValidationSpec) {
		s.Prefork = &PreforkOptions{Bin: preforkd, Workers: 4, Backlog: 4, Service: 200 * time.Millisecond}
		s.PerClass, s.LowPerClass, s.LowInterval, s.LowOffset = 20, 80, 325*time.Millisecond, 0
		s.ClientSYNRetries = 2
		s.LowClients = 40
	}
	run := func(name string, drops SYNDropMode) (ValidationRun, string) {
		spec := DefaultValidationSpec("overload-"+name, site)
		overload(&spec)
		spec.SYNDrops = drops
		if drops == DropLowClassSYNsWhileRTHigh {
			spec.RTHigh = &RTHighDrive{Rtmon: bin, Classes: classes, Above: rtHighAbove}
		}
		// Namespaces of its own, beside make test's validation.
		return runAnalyzedValidation(t, ctx, bin, classes, spec, "rtwo")
	}
	base, baseDir := run("base", NoSYNDrops)
	applied, appliedDir := run("applied", DropLowClassSYNs)
	cond, condDir := run("rthigh", DropLowClassSYNsWhileRTHigh)
	t.Logf("RT_HIGH driver: %d switches over %d live events, on for %v; nft dropped %d SYNs",
		cond.RTHigh.Switches, cond.RTHigh.Events, cond.RTHigh.On, cond.NFTDrops)
	if cond.RTHigh.Switches == 0 || cond.NFTDrops == 0 {
		t.Errorf("the conditional drop never acted (%d switches, %d SYNs dropped): the run says nothing of RT_HIGH", cond.RTHigh.Switches, cond.NFTDrops)
	}
	ds, err := whatif.Load(baseDir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ds.QueueModel(queueValidateOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("baseline: %d SYN losses measured (%d replayed), %d workers (%.1f%% unexplained), backlog %d, %d connections left half-open, null replay within %.1f%%, notes %v",
		m.SYNLossesMeasured, m.SYNLossesReplayed, m.Workers, 100*m.Unexplained, m.Backlog, m.HalfOpen, 100*m.Worst, m.Notes)
	t.Logf("baseline: half-open handshakes take backlog slots: %v", m.HalfOpenSlots)
	if m.SYNLossesMeasured == 0 {
		t.Fatalf("the baseline was not overloaded: no SYN losses")
	}
	rows, misses := judgeValidationWith(t, "overload-drop-syn", rule, base, applied, baseDir, appliedDir, queueValidateOptions())
	t.Logf("what-if validation under overload (queue model):\n%s", FormatValidationTable(rows))
	linRows, _ := judgeValidationWith(t, "overload-drop-syn (linear)", rule, base, applied, baseDir, appliedDir, validateOptions)
	t.Logf("the same with the linear model:\n%s", FormatValidationTable(linRows))
	condRows, condMisses := judgeValidationWith(t, "overload-rthigh-drop-syn", condRule, base, cond, baseDir, condDir, queueValidateOptions())
	t.Logf("the drop switched by rtmon live's RT_HIGH (queue model):\n%s", FormatValidationTable(condRows))
	for _, miss := range append(misses, condMisses...) {
		t.Error(miss)
	}
}

func queueValidateOptions() whatif.Options {
	o := validateOptions
	o.ServerModel = whatif.ServerQueue
	return o
}
