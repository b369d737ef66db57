package testbed

import (
	"context"
	"os/exec"
	"testing"

	"github.com/rtmon/rtmon/whatif"
)

// judgeKeyless judges an HTTPS case as a monitor without the keys sees
// it: rtmon analyzes the captures keyless, timing each connection's TCP
// and TLS handshakes and its request/response turns of records, and
// groups the turns into pageviews by client, host (SNI) and timing, since
// it cannot read the HTML. The workload's pages, seconds apart per client
// address, must come out one pageview each, as with the keys, and the
// prediction from the baseline's keyless pageviews is judged as
// judgeValidation judges the decrypted one.
func judgeKeyless(t *testing.T, ctx context.Context, bin, classes, name string, rule whatif.Rule, base, applied ValidationRun) (rows []ValidationRow, misses []string) {
	t.Helper()
	analyze := func(r ValidationRun) string {
		out := t.TempDir()
		b, err := exec.CommandContext(ctx, bin, "analyze", "--classes", classes, "--out", out, r.Capture).CombinedOutput()
		if err != nil {
			t.Fatalf("rtmon analyze %s keyless: %v\n%s", r.Spec.Name, err, b)
		}
		return out
	}
	rows, misses = judgeValidation(t, name+" keyless", rule, base, applied, analyze(base), analyze(applied))
	for i := range rows {
		rows[i].Action += " (keyless)"
	}
	return rows, misses
}
