package testbed

import (
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/whatif"
)

// The repeated judge averages each quantile over the runs and judges the
// averages: one pair off by 30% each way is no miss, one biased setup is.
func TestJudgeRepeatedAveragesRuns(t *testing.T) {
	dist := func(p50, p90 int64, n int64) whatif.Distribution {
		return whatif.Distribution{N: n, P50: p50, P75: p50, P90: p90, P99: p90, Mean: p50}
	}
	pair := func(pred, truth int64, allow time.Duration) []judgedRow {
		return []judgedRow{{row: ValidationRow{Action: "SPLICE", Class: ValidateHighClass,
			Predicted: dist(pred, 2*pred, 10), Truth: dist(truth, 2*truth, 6)}, allow: allow}}
	}
	rows, spread, misses := judgeRepeated("noisy", [][]judgedRow{pair(1000e6, 770e6, 0), pair(1000e6, 1300e6, 0), pair(1000e6, 930e6, 0)})
	if len(misses) != 0 || len(rows) != 1 {
		t.Fatalf("runs averaging to the prediction judged a miss: %v %v", rows, misses)
	}
	if r := rows[0]; r.Truth.P50 != 1000e6 || r.Truth.P90 != 2000e6 || r.Truth.N != 18 || r.Predicted.N != 30 || r.Rtmon.N != 0 || r.Rtmon.P50 != 0 {
		t.Errorf("mean row %+v", r)
	}
	if !strings.Contains(spread, "3 pairs") || !strings.Contains(spread, "+29.9%") || !strings.Contains(spread, "69% apart") {
		t.Errorf("spread line %q", spread)
	}
	_, _, misses = judgeRepeated("biased", [][]judgedRow{pair(1200e6, 1000e6, 0), pair(1150e6, 1000e6, 0), pair(1300e6, 1100e6, 0)})
	if len(misses) != 1 || !strings.Contains(misses[0], "biased high") {
		t.Errorf("a prediction 18%% high on average passed: %v", misses)
	}
	// The link's stalls, averaged, widen the allowance.
	_, _, misses = judgeRepeated("stalled", [][]judgedRow{pair(1200e6, 1000e6, 400*time.Millisecond), pair(1200e6, 1000e6, 200*time.Millisecond)})
	if len(misses) != 0 {
		t.Errorf("a 200 ms miss within 10%% + 300 ms of mean stalls: %v", misses)
	}
}
