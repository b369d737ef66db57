package store

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/rtmon/rtmon/store/query"
)

// A shard down in cluster mode (docs/cluster.md, "Failures"). Writes need
// nothing here: an insert through the Distributed tables fails while any
// shard is unreachable, and the writer retries or spills the whole batch.
// Reads fail too unless the caller asked for a partial answer
// (query.WithPartial): then they skip the shards that are down
// (skip_unavailable_shards) and the Partial names them, found by probing
// each shard's replicas around the read.

// shardProbe knows the cluster's replicas and which shards answer.
type shardProbe struct {
	shards [][]string // host:port of each shard's replicas; index shard_num-1
	mu     sync.Mutex
	down   []int
	at     time.Time // of the last probe
	busy   bool      // a background probe runs
}

// probeTimeout bounds one replica's probe: a stopped server refuses at
// once; a hung one must not hold the read for long.
const probeTimeout = 2 * time.Second

// statsProbeAge: Stats (polled by metrics and health) probes again in the
// background past this age and reports the last probe meanwhile.
const statsProbeAge = 5 * time.Second

func newShardProbe(ctx context.Context, c *chBackend) (*shardProbe, error) {
	rows, err := c.sdb.QueryContext(ctx, "SELECT shard_num, host_address, port FROM system.clusters WHERE cluster = ? ORDER BY shard_num, replica_num", c.cluster)
	if err != nil {
		return nil, fmt.Errorf("replicas of cluster %s: %w", c.cluster, err)
	}
	defer rows.Close()
	p := &shardProbe{}
	for rows.Next() {
		var shard uint32
		var host string
		var port uint16
		if err := rows.Scan(&shard, &host, &port); err != nil {
			return nil, fmt.Errorf("replicas of cluster %s: %w", c.cluster, err)
		}
		for len(p.shards) < int(shard) {
			p.shards = append(p.shards, nil)
		}
		p.shards[shard-1] = append(p.shards[shard-1], net.JoinHostPort(host, strconv.Itoa(int(port))))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("replicas of cluster %s: %w", c.cluster, err)
	}
	return p, nil
}

// probe lists the shards none of whose replicas accepts a connection: what
// a Distributed read skips (it fails over between replicas on connect).
func (p *shardProbe) probe(ctx context.Context) []int {
	up := make([]bool, len(p.shards))
	var wg sync.WaitGroup
	for s, addrs := range p.shards {
		for _, a := range addrs {
			wg.Go(func() {
				d := net.Dialer{Timeout: probeTimeout}
				conn, err := d.DialContext(ctx, "tcp", a)
				if err == nil {
					conn.Close()
					p.mu.Lock()
					up[s] = true
					p.mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	var down []int
	for s, ok := range up {
		if !ok {
			down = append(down, s+1)
		}
	}
	p.mu.Lock()
	p.down, p.at = down, time.Now()
	p.mu.Unlock()
	return down
}

// recent is the last probe's answer; one older than statsProbeAge starts
// a new probe in the background.
func (p *shardProbe) recent() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.busy && time.Since(p.at) > statsProbeAge {
		p.busy = true
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*probeTimeout)
			defer cancel()
			p.probe(ctx)
			p.mu.Lock()
			p.busy = false
			p.mu.Unlock()
		}()
	}
	return slices.Clone(p.down)
}

type skipShardsKey struct{}

// skipsShards: reads under ctx may have skipped a shard, so what they
// computed (a recomputed rollup) must not be stored.
func skipsShards(ctx context.Context) bool { return ctx.Value(skipShardsKey{}) != nil }

// Stats is the writer's; in cluster mode with the shards that are down.
func (e *engine) Stats() WriterStats {
	st := e.writer.Stats()
	if e.shards != nil {
		st.ShardsDown = e.shards.recent()
	}
	return st
}

// The engine's reads go through read, which only cluster mode (shards set)
// changes.

// read runs f over every shard; under query.WithPartial, without the
// shards that are down, which it adds to the Partial. The probes before
// and after bracket the read: a shard down at either is named, so an
// answer that may lack it is never passed off as complete.
func read[T any](e *engine, ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	p := query.PartialFrom(ctx)
	if p == nil || e.shards == nil {
		return f(ctx)
	}
	before := e.shards.probe(ctx)
	if len(before) == 0 {
		v, err := f(ctx)
		if err == nil {
			return v, nil
		}
		// A shard may have gone down since the probe: answer without it.
		if before = e.shards.probe(ctx); len(before) == 0 {
			return v, err
		}
	}
	sctx := context.WithValue(ctx, skipShardsKey{}, true)
	sctx = clickhouse.Context(sctx, clickhouse.WithSettings(clickhouse.Settings{"skip_unavailable_shards": 1}))
	v, err := f(sctx)
	p.Add(before...)
	p.Add(e.shards.probe(ctx)...)
	return v, err
}

func (e *engine) Histogram(ctx context.Context, q HistogramQuery) ([]ClassHistogram, error) {
	return read(e, ctx, func(ctx context.Context) ([]ClassHistogram, error) { return e.querier.Histogram(ctx, q) })
}

func (e *engine) Percentiles(ctx context.Context, q PercentileQuery) ([]ClassPercentiles, error) {
	return read(e, ctx, func(ctx context.Context) ([]ClassPercentiles, error) { return e.querier.Percentiles(ctx, q) })
}

func (e *engine) PercentileSeries(ctx context.Context, q PercentileQuery) ([]SeriesPoint, error) {
	return read(e, ctx, func(ctx context.Context) ([]SeriesPoint, error) { return e.querier.PercentileSeries(ctx, q) })
}

func (e *engine) Counters(ctx context.Context, r TimeRange, class string) (Counters, error) {
	return read(e, ctx, func(ctx context.Context) (Counters, error) { return e.querier.Counters(ctx, r, class) })
}

func (e *engine) SensorCounters(ctx context.Context, r TimeRange, class, sensor string) (Counters, error) {
	return read(e, ctx, func(ctx context.Context) (Counters, error) { return e.querier.SensorCounters(ctx, r, class, sensor) })
}

func (e *engine) TopSlow(ctx context.Context, q TopQuery) ([]TopRow, error) {
	return read(e, ctx, func(ctx context.Context) ([]TopRow, error) { return e.querier.TopSlow(ctx, q) })
}

func (e *engine) Search(ctx context.Context, q SearchQuery) (SearchResult, error) {
	return read(e, ctx, func(ctx context.Context) (SearchResult, error) { return e.querier.Search(ctx, q) })
}

func (e *engine) SearchConnections(ctx context.Context, q ConnectionSearch) (ConnectionResult, error) {
	return read(e, ctx, func(ctx context.Context) (ConnectionResult, error) { return e.querier.SearchConnections(ctx, q) })
}

func (e *engine) PageviewByID(ctx context.Context, id string) (*PageviewDetail, error) {
	return read(e, ctx, func(ctx context.Context) (*PageviewDetail, error) { return e.querier.PageviewByID(ctx, id) })
}

func (e *engine) Sensors(ctx context.Context, r TimeRange) ([]query.SensorCounts, error) {
	return read(e, ctx, func(ctx context.Context) ([]query.SensorCounts, error) { return e.querier.Sensors(ctx, r) })
}

func (e *engine) Classes(ctx context.Context, r TimeRange) ([]string, error) {
	return read(e, ctx, func(ctx context.Context) ([]string, error) { return e.querier.Classes(ctx, r) })
}

func (e *engine) Extent(ctx context.Context, k Kind) (Extent, error) {
	return read(e, ctx, func(ctx context.Context) (Extent, error) { return e.querier.Extent(ctx, k) })
}

func (e *engine) ComponentSums(ctx context.Context, q SumQuery) ([]ComponentSums, error) {
	return read(e, ctx, func(ctx context.Context) ([]ComponentSums, error) { return e.querier.ComponentSums(ctx, q) })
}

func (e *engine) Summary(ctx context.Context, q SummaryQuery) (*Summary, error) {
	return read(e, ctx, func(ctx context.Context) (*Summary, error) { return e.querier.Summary(ctx, q) })
}

func (e *engine) Sample(ctx context.Context, q query.SampleQuery) ([]query.ClassSample, error) {
	return read(e, ctx, func(ctx context.Context) ([]query.ClassSample, error) { return e.querier.Sample(ctx, q) })
}

func (e *engine) Annotations(ctx context.Context, q AnnotationQuery) ([]Annotation, error) {
	return read(e, ctx, func(ctx context.Context) ([]Annotation, error) { return e.querier.Annotations(ctx, q) })
}
