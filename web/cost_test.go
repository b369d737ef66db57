package web

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rtmon/rtmon/store/query"
)

// Parameters that do not shape the overview do not make a new one: a
// client adding "&x=N" to every request used to defeat the cache.
func TestOverviewKeyIgnoresOtherParameters(t *testing.T) {
	key := func(q string) string {
		c, _ := gin.CreateTestContext(httptest.NewRecorder())
		c.Request = httptest.NewRequest("GET", "/api/overview?"+q, nil)
		p, err := overviewParamsFrom(c)
		if err != nil {
			t.Fatal(err)
		}
		return p.key()
	}
	if a, b := key("kind=transactions&last=15m&x=1"), key("last=15m&x=2&kind=transactions"); a != b {
		t.Errorf("keys differ: %q %q", a, b)
	}
	if a, b := key("kind=transactions&last=15m"), key("kind=transactions&last=1h"); a == b {
		t.Errorf("different ranges share key %q", a)
	}
}

// An overview every asker left is cancelled; one someone still waits for
// goes on and is shared.
func TestAbandonedOverviewIsCancelled(t *testing.T) {
	var c overviewCache
	c.ttl = time.Minute
	started, cancelled := make(chan struct{}), make(chan struct{})
	compute := func(ctx context.Context) (*Overview, error) {
		close(started)
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	}
	ctx, leave := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := c.get(ctx, "k", 1, compute); errc <- err }()
	<-started
	leave()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("the asker that left got %v", err)
	}
	<-cancelled // the computation saw its context end (a hang here fails by the test timeout)

	var runs atomic.Int32
	release := make(chan struct{})
	shared := func(ctx context.Context) (*Overview, error) {
		runs.Add(1)
		select {
		case <-release:
			return &Overview{}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	ctx1, leave1 := context.WithCancel(context.Background())
	res := make(chan error, 2)
	go func() { _, err := c.get(ctx1, "s", 1, shared); res <- err }()
	go func() { _, err := c.get(context.Background(), "s", 1, shared); res <- err }()
	for {
		c.mu.Lock()
		f := c.flights["s\x001"]
		n := 0
		if f != nil {
			n = f.waiters
		}
		c.mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	leave1()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Errorf("first asker: %v", err)
	}
	close(release)
	if err := <-res; err != nil {
		t.Errorf("the asker that stayed: %v", err)
	}
	if runs.Load() != 1 {
		t.Errorf("%d computations for two askers", runs.Load())
	}
}

// countingQuerier counts the store reads /metrics makes.
type countingQuerier struct {
	query.Querier
	histograms, summaries atomic.Int32
}

func (q *countingQuerier) Histogram(ctx context.Context, h query.HistogramQuery) ([]query.ClassHistogram, error) {
	q.histograms.Add(1)
	return q.Querier.Histogram(ctx, h)
}

func (q *countingQuerier) Summary(ctx context.Context, s query.SummaryQuery) (*query.Summary, error) {
	q.summaries.Add(1)
	return q.Querier.Summary(ctx, s)
}

// A scraper asking many times a second costs one store read per period,
// from the rollups (the store keeps them), never a scan of the records.
func TestMetricsScanTheStoreOncePerPeriod(t *testing.T) {
	q := &countingQuerier{Querier: knownCapture(t)}
	_, ts := newTestServer(t, Config{Store: q})
	for range 20 {
		resp := get(t, ts.URL+"/metrics")
		if body := readAll(t, resp); resp.StatusCode != 200 || len(body) == 0 {
			t.Fatalf("/metrics: %d", resp.StatusCode)
		}
	}
	if n, h := q.summaries.Load(), q.histograms.Load(); n != 2 || h != 0 { // one per kind, once
		t.Errorf("%d summaries and %d histogram scans for 20 scrapes of an unchanged store, want 2 and none", n, h)
	}
}
