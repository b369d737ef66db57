package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store/chcluster"
)

// TestTwoSensorsECMPPageviews is issue #16's proof with two capture points:
// Chromium loads pages whose connections the router's ECMP splits over two
// front ends, a sensor at each stores its records into one ClickHouse
// cluster (2 shards x 2 replicas, each sensor through a server of its own
// shard, as one sensor per front end would), and the pageviews `rtmon
// stitch` makes are checked against the client's wire truth as the
// single-sensor scenarios check theirs (compareWithRtmon), and must name
// both sensors where the page's connections took both. Before stitching,
// some page must be split: each sensor alone holds only part of it
// (ecmpSetup checks that). TestECMPFrontEnds does the same into DuckDB,
// without the stitching.
func TestTwoSensorsECMPPageviews(t *testing.T) {
	c := startTestCluster(t)
	r := ecmpSetup(t, [2]string{c.URL(0, "ecmp"), c.URL(2, "ecmp")})
	ctx, bin, run, split, db, one, srv := r.ctx, r.bin, r.run, r.split, r.db, r.one, r.srv

	from, to := ecmpSpan(run.res.Truth)
	out := rtmonCmd(ctx, t, bin, "stitch", "--store", db, "--from", fmt.Sprint(from), "--to", fmt.Sprint(to), "--format", "json")
	var stats struct{ Pageviews, Stitched int }
	if err := json.Unmarshal(out, &stats); err != nil {
		t.Fatalf("stitch output %q: %v", out, err)
	}
	t.Logf("stitch: %s", out)
	if stats.Stitched < split {
		t.Errorf("stitch made %d pageviews across sensors, the wire has %d pages split across front ends", stats.Stitched, split)
	}
	after := readStored(ctx, t, db)
	t.Run("stitched", func(t *testing.T) {
		compareWithRtmon(t, Scenario{}, run.res, srv, &LinkDelays{}, after.writeJSONL(t)).report(t, "two sensors, stitched", true)
		checkStitchedSensors(t, run, after)
		logAgainstOne(t, run, after, one)
	})
}

// ecmpSpan is the stitch range: a minute around the pages.
func ecmpSpan(pages []PageTruth) (from, to int64) {
	from, to = pages[0].Wire.Start, pages[0].Wire.End
	for i := range pages {
		from, to = min(from, pages[i].Wire.Start), max(to, pages[i].Wire.End)
	}
	return from - int64(time.Minute), to + int64(time.Minute)
}

// writeJSONL writes the records as analyze --out does, for compareWithRtmon.
func (s *stored) writeJSONL(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var txns, pvs []any
	for _, x := range s.txns {
		txns = append(txns, x.raw)
	}
	for _, p := range s.pvs {
		pvs = append(pvs, p.raw)
	}
	for name, recs := range map[string][]any{"transactions.jsonl": txns, "pageviews.jsonl": pvs, "connections.jsonl": s.conns} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		enc := json.NewEncoder(f)
		enc.SetEscapeHTML(false)
		for _, r := range recs {
			if err := enc.Encode(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// checkStitchedSensors: each page's pageview names exactly the front ends
// its connections went through.
func checkStitchedSensors(t *testing.T, r *ecmpRun, after *stored) {
	t.Helper()
	for i := range r.res.Truth {
		p := &r.res.Truth[i]
		cx := after.txnOf(p.Wire.Chain[len(p.Wire.Chain)-1])
		if cx == nil {
			continue // compareWithRtmon reported it
		}
		pv := after.pvs[cx.rec.PageviewID]
		if pv == nil {
			continue
		}
		got := slices.Sorted(slices.Values(pv.sensors))
		if want := r.pageSensors(p, true); !slices.Equal(got, want) {
			t.Errorf("%s: stitched pageview's sensors %v, its connections went through %v", p, got, want)
		}
	}
}

// logAgainstOne logs each page's stitched pageview beside the one sensor's
// that saw every connection: where they differ, the stitching did.
func logAgainstOne(t *testing.T, r *ecmpRun, after *stored, oneDir string) {
	t.Helper()
	txns := readJSONL[rtmonTxnRec](t, filepath.Join(oneDir, "transactions.jsonl"))
	pvs := map[string]rtmonPV{}
	for _, p := range readJSONL[rtmonPV](t, filepath.Join(oneDir, "pageviews.jsonl")) {
		pvs[p.ID] = p
	}
	for i := range r.res.Truth {
		p := &r.res.Truth[i]
		c := p.Wire.Chain[len(p.Wire.Chain)-1]
		var one rtmonPV
		for _, x := range txns {
			if x.Client == c.Client && x.ClientPort == int(c.Port) && x.Index == c.Index {
				one = pvs[x.PageviewID]
			}
		}
		var st rtmonPV
		if cx := after.txnOf(c); cx != nil && after.pvs[cx.rec.PageviewID] != nil {
			st = after.pvs[cx.rec.PageviewID].rec
		}
		t.Logf("%s: wire %v, %d in load, %d after load; one sensor %v, %d objects, %d after load (%s); stitched %v, %d objects, %d after load (%s)",
			p, time.Duration(p.Wire.Total), len(p.Wire.InLoad), len(p.Wire.AfterLoad), time.Duration(one.Total), one.Objects,
			derefInt(one.AfterLoad), one.Evidence, time.Duration(st.Total), st.Objects, derefInt(st.AfterLoad), st.Evidence)
	}
}

// startTestCluster starts a 2 x 2 ClickHouse cluster with its ZooKeeper
// (store/chcluster) for the test, stopped when it ends.
func startTestCluster(t *testing.T) *chcluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(testContext(t), 10*time.Minute)
	defer cancel()
	c, err := chcluster.Start(ctx, t.TempDir(), chcluster.Options{})
	if err != nil {
		t.Fatalf("clickhouse cluster: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

func derefInt(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}
