package web

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/store/query"
)

// Prometheus histogram buckets (seconds): coarser than the UI's, but with
// edges at 1 s and just below 3 s so SYN-loss delays show as a step. Each
// is the edge of the rollups' grid (query.RollupEdges, 160 a decade) at or
// below a round value, within 1.5% of it, so that the rollups give the
// histograms exactly. The classes' objectives add their edges
// (histogramEdges).
var promBuckets = onRollupGrid(10*time.Millisecond, 25*time.Millisecond, 50*time.Millisecond,
	100*time.Millisecond, 250*time.Millisecond, 500*time.Millisecond, time.Second, 1500*time.Millisecond,
	2500*time.Millisecond, 3*time.Second, 4*time.Second, 6*time.Second, 10*time.Second, 30*time.Second, time.Minute)

// onRollupGrid gives each d's rollup grid edge at or below it.
func onRollupGrid(ds ...time.Duration) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = query.RollupEdges[query.RollupBucket(int64(d))]
	}
	return out
}

type metrics struct {
	reg *prometheus.Registry
}

// newMetrics registers a collector that asks the store at scrape time, so
// the histograms are the store's answers (cumulative over everything
// stored), plus the live pipeline's counters and the classes' objectives.
func newMetrics(st query.Querier, live *LiveFeed, slos []pageview.ClassSLO) *metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(&storeCollector{st: st, live: live, slos: slos, edges: histogramEdges(slos)})
	if live != nil {
		reg.MustRegister(live.addedMetrics()...)
	}
	return &metrics{reg: reg}
}

// liveMetrics are the collectors a live process added to its feed's
// /metrics, by feed: kept beside the feed so the server needs no option.
var liveMetrics = struct {
	sync.Mutex
	m map[*LiveFeed][]prometheus.Collector
}{m: map[*LiveFeed][]prometheus.Collector{}}

// AddMetrics has /metrics served with f (servers built after the call)
// export c's metrics too: rtmon live's RLM rule gauges.
func (f *LiveFeed) AddMetrics(c prometheus.Collector) {
	liveMetrics.Lock()
	defer liveMetrics.Unlock()
	liveMetrics.m[f] = append(liveMetrics.m[f], c)
}

func (f *LiveFeed) addedMetrics() []prometheus.Collector {
	liveMetrics.Lock()
	defer liveMetrics.Unlock()
	return liveMetrics.m[f]
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

type storeCollector struct {
	st    query.Querier
	live  *LiveFeed
	slos  []pageview.ClassSLO
	edges []int64 // the histograms' (histogramEdges); nil: promBuckets
	// The store's histograms and counters come from the rollups (or, when
	// the writer does not keep them, from the records): they are read at
	// most once per storeMetricsTTL and unchanged stores are not read
	// again, whoever scrapes how often.
	mu      sync.Mutex
	at      time.Time
	written int64
	stored  []prometheus.Metric
}

// storeMetricsTTL is how stale the store's metrics may be: less than the
// usual scrape interval, so a normal scrape sees fresh numbers and a
// scraper gone wild costs one scan per period.
const storeMetricsTTL = 10 * time.Second

var descRT = prometheus.NewDesc("rtmon_response_time_seconds",
	"Client-perceived response time of stored records, per class and kind (transaction or pageview).",
	[]string{"class", "kind"}, nil)

// metric is one Prometheus value read from a source S: the store's
// counters of a class, the writer's stats, the live pipeline's.
type metric[S any] struct {
	desc  *prometheus.Desc
	vt    prometheus.ValueType
	value func(S) int64
}

// counter and gauge are the value types of the metrics below.
const (
	counter = prometheus.CounterValue
	gauge   = prometheus.GaugeValue
)

func newMetric[S any](vt prometheus.ValueType, name, help string, labels []string, value func(S) int64) metric[S] {
	return metric[S]{prometheus.NewDesc("rtmon_"+name, help, labels, nil), vt, value}
}

// emit sends each of ms's values read from src.
func emit[S any](ch chan<- prometheus.Metric, ms []metric[S], src S, labels ...string) {
	for _, m := range ms {
		ch <- prometheus.MustNewConstMetric(m.desc, m.vt, float64(m.value(src)), labels...)
	}
}

// classCounter is a per-class counter of the store's.
func classCounter(name, help string, value func(query.Counters) int64) metric[query.Counters] {
	return newMetric(counter, name, help, []string{"class"}, value)
}

var classMetrics = []metric[query.Counters]{
	classCounter("connections_total", "Stored connections.", func(k query.Counters) int64 { return k.Connections }),
	classCounter("syn_losses_total", "Client SYN retransmissions with no SYN/ACK in between (dropped SYNs).", func(k query.Counters) int64 { return k.SYNLosses }),
	classCounter("synack_losses_total", "SYN/ACKs that never reached the client.", func(k query.Counters) int64 { return k.SYNACKLosses }),
	classCounter("retransmitted_bytes_total", "Retransmitted bytes on stored connections.", func(k query.Counters) int64 { return k.ConnRetransBytes }),
	classCounter("server_errors_total", "Transactions with status >= 500.", func(k query.Counters) int64 { return k.ServerErrors }),
	classCounter("incomplete_transactions_total", "Transactions still open at end of input or eviction.", func(k query.Counters) int64 { return k.IncompleteTx }),
}

var writerMetrics = []metric[query.WriterStats]{
	newMetric(counter, "store_written_total", "Records stored by this process's writer.", nil, func(s query.WriterStats) int64 { return s.Written }),
	newMetric(gauge, "store_backlog_records", "Records waiting to be stored (memory and spill files).", nil, func(s query.WriterStats) int64 { return s.Queued }),
	newMetric(gauge, "store_spill_files", "Spill files waiting to be stored.", nil, func(s query.WriterStats) int64 { return int64(s.SpilledFiles) }),
	newMetric(counter, "store_retries_total", "Failed store insert attempts.", nil, func(s query.WriterStats) int64 { return s.Retries }),
	newMetric(gauge, "store_insert_failing", "1 while the oldest queued batch fails to store and is retried (the last error is on /healthz and in the UI).", nil, func(s query.WriterStats) int64 { return b2i(s.Failing) }),
	newMetric(gauge, "store_shards_down", "ClickHouse cluster shards none of whose replicas accept connections: their records wait to be stored and the UI's answers leave them out.", nil, func(s query.WriterStats) int64 { return int64(len(s.ShardsDown)) }),
	newMetric(gauge, "store_held_records", "Records of ClickHouse cluster shards that failed to take them while the others took theirs: held in memory and spill files (within store_backlog_records) until their shard is back.", nil, func(s query.WriterStats) int64 { return s.HeldRecords }),
	newMetric(gauge, "store_disk_full", "1 while storing or spilling fails for lack of disk space.", nil, func(s query.WriterStats) int64 { return b2i(s.DiskFull) }),
	newMetric(gauge, "store_spill_failing", "1 while spilling fails: a full memory buffer then holds writers back (backpressure).", nil, func(s query.WriterStats) int64 { return b2i(s.SpillFailing) }),
	newMetric(counter, "store_spill_failures_total", "Batches that could not be written to a spill file.", nil, func(s query.WriterStats) int64 { return s.SpillFailures }),
	newMetric(counter, "store_reopens_total", "Reopenings of the embedded database after it invalidated itself on a failed write.", nil, func(s query.WriterStats) int64 { return s.Reopens }),
	newMetric(gauge, "store_spill_bytes", "Size of the spill files waiting to be stored.", nil, func(s query.WriterStats) int64 { return s.SpillBytes }),
	newMetric(counter, "store_corrupt_spill_files_total", "Spill files that could not be read back (set aside as *.corrupt).", nil, func(s query.WriterStats) int64 { return s.CorruptSpillFiles }),
	newMetric(counter, "store_lost_records_total", "Records lost: in spill files that could not be read back, or neither stored nor spilled at close.", nil, func(s query.WriterStats) int64 { return s.LostRecords }),
	newMetric(counter, "store_duplicates_total", "Records dropped because their id was already stored.", nil, func(s query.WriterStats) int64 { return s.Duplicates }),
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// storeState names what is wrong with storing now ("" when nothing), for
// the UI's status strip and the overview.
func storeState(s query.WriterStats) string {
	switch {
	case s.DiskFull:
		return "disk full"
	case len(s.ShardsDown) > 0:
		return shardsText(s.ShardsDown) + " down"
	case len(s.HeldShards) > 0:
		// Reachable but refusing inserts (a replica read-only, a full disk).
		return shardsText(s.HeldShards) + " not taking records"
	case s.Failing:
		return "failing"
	case s.SpillFailing:
		return "writers held back"
	}
	return ""
}

var pipelineMetrics = []metric[PipelineStats]{
	newMetric(counter, "packets_total", "TCP packets decoded by the live pipeline.", nil, func(p PipelineStats) int64 { return p.Packets }),
	newMetric(counter, "capture_bytes_total", "Captured bytes read by the live pipeline.", nil, func(p PipelineStats) int64 { return p.Bytes }),
	newMetric(counter, "capture_drops_total", "Packets dropped by libpcap or the kernel (rtmon too slow).", nil, func(p PipelineStats) int64 { return p.CaptureDrops }),
	newMetric(counter, "interface_drops_total", "Packets dropped by the interface or driver.", nil, func(p PipelineStats) int64 { return p.InterfaceDrops }),
	newMetric(counter, "capture_ring_freezes_total", "Times an AF_PACKET capture ring was full and frozen by the kernel.", nil, func(p PipelineStats) int64 { return p.CaptureFreezes }),
	newMetric(counter, "evictions_total", "Connections evicted from the tracker's full table.", nil, func(p PipelineStats) int64 { return p.Evictions }),
	newMetric(gauge, "open_connections", "Connections being tracked.", nil, func(p PipelineStats) int64 { return p.OpenConnections }),
	newMetric(gauge, "tracker_memory_bytes", "The tracker's state counted against its share of --max-memory.", nil, func(p PipelineStats) int64 { return p.TrackerMemory }),
	newMetric(counter, "memory_evictions_total", "Connections shed (least recently active first) to stay within --max-memory.", nil, func(p PipelineStats) int64 { return p.MemoryEvictions }),
	newMetric(counter, "tls_connections_total", "Connections that began with a TLS ClientHello.", nil, func(p PipelineStats) int64 { return p.TLSConnections }),
	newMetric(counter, "tls_decrypted_total", "TLS connections decrypted with the key log (--keylog).", nil, func(p PipelineStats) int64 { return p.TLSDecrypted }),
	newMetric(counter, "tls_key_late_total", "Decrypted TLS connections whose key log line came after their ServerHello (held for it).", nil, func(p PipelineStats) int64 { return p.TLSKeyLate }),
	newMetric(counter, "tls_early_data_total", "TLS 1.3 connections whose client sent its request as 0-RTT early data.", nil, func(p PipelineStats) int64 { return p.TLSEarlyData }),
	newMetric(counter, "tls_early_rejected_total", "TLS 1.3 connections whose server refused the client's 0-RTT early data.", nil, func(p PipelineStats) int64 { return p.TLSEarlyRejected }),
	newMetric(counter, "tls_keyless_total", "TLS connections timed without keys while a key log was given.", nil, func(p PipelineStats) int64 { return p.TLSKeyless }),
	newMetric(counter, "tls_no_key_total", "TLS connections whose client random the key log lacked.", nil, func(p PipelineStats) int64 { return p.TLSNoKey }),
	newMetric(counter, "tls_decrypt_errors_total", "TLS connections with a key that could not be decrypted, or not to the end.", nil, func(p PipelineStats) int64 { return p.TLSDecryptErrors }),
}

var descScrapeErr = prometheus.NewDesc("rtmon_store_query_errors", "1 if the last scrape's store queries failed.", nil, nil)

// Describe sends nothing: an unchecked collector, because describing by
// collecting would query the whole store when the server starts.
func (c *storeCollector) Describe(chan<- *prometheus.Desc) {}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.storeMetrics() {
		ch <- m
	}
	emit(ch, writerMetrics, c.st.Stats())
	emitSLOs(ch, c.slos)
	if c.live == nil {
		return
	}
	ev, _ := c.live.Latest()
	emit(ch, pipelineMetrics, ev.Pipeline)
}

// storeMetrics returns the store's metrics, read again only when the last
// read is storeMetricsTTL old and the store has written since.
func (c *storeCollector) storeMetrics() []prometheus.Metric {
	c.mu.Lock()
	defer c.mu.Unlock()
	written := c.st.Stats().Written
	if c.stored != nil && (time.Since(c.at) < storeMetricsTTL || written == c.written) {
		return c.stored
	}
	out := make(chan prometheus.Metric, 64)
	go func() {
		c.scanStore(out)
		close(out)
	}()
	var ms []prometheus.Metric
	for m := range out {
		ms = append(ms, m)
	}
	c.stored, c.at, c.written = ms, time.Now(), written
	return ms
}

func (c *storeCollector) scanStore(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var ok bool
	if c.st.Stats().Rollups {
		ok = c.fromRollups(ctx, ch)
	} else {
		ok = c.fromRecords(ctx, ch)
	}
	slo, err := sloMetrics(ctx, c.st, c.slos)
	if err != nil {
		slog.Warn("metrics: objectives", "err", err)
		ok = false
	}
	for _, m := range slo {
		ch <- m
	}
	ch <- prometheus.MustNewConstMetric(descScrapeErr, prometheus.GaugeValue, float64(b2i(!ok)))
}

// storedKinds are the record kinds the store's metrics cover.
var storedKinds = []query.Kind{query.Transactions, query.Pageviews}

// eachKind calls read for each stored kind; a kind whose read fails is
// logged and skipped, and the scrape reported failing (false).
func eachKind(what string, read func(query.Kind) error) bool {
	ok := true
	for _, kind := range storedKinds {
		if err := read(kind); err != nil {
			slog.Warn("metrics: "+what, "kind", kind, "err", err)
			ok = false
		}
	}
	return ok
}

func (c *storeCollector) histogramEdges() []int64 {
	if c.edges == nil {
		return promBuckets
	}
	return c.edges
}

// fromRollups sends the histograms and the per-class counters of
// everything stored from one Summary per kind: rollup rows and the
// records of the minutes the writer has not rolled up yet, however many
// records are stored. The histograms' sums are exact.
func (c *storeCollector) fromRollups(ctx context.Context, ch chan<- prometheus.Metric) bool {
	counted := false
	return eachKind("summary", func(kind query.Kind) error {
		s, err := c.st.Summary(ctx, query.SummaryQuery{Kind: kind, Edges: c.histogramEdges()})
		if err != nil {
			return err
		}
		total := map[string]int64{}
		for _, cs := range s.Sums {
			total[cs.Class] = cs.Sums["total"]
		}
		for _, h := range s.Histograms {
			ch <- constHistogram(h, string(kind), float64(total[h.Class])/1e9)
		}
		if !counted { // every Summary has every kind's counters
			for _, k := range s.ByClass {
				emit(ch, classMetrics, k.Counters, k.Class)
			}
			counted = true
		}
		return nil
	})
}

// fromRecords sends the same read from the records; the histograms' sums
// are approximated with bucket lower edges (the store returns counts).
func (c *storeCollector) fromRecords(ctx context.Context, ch chan<- prometheus.Metric) bool {
	ok := eachKind("histogram", func(kind query.Kind) error {
		hs, err := c.st.Histogram(ctx, query.HistogramQuery{Kind: kind, Edges: c.histogramEdges()})
		if err != nil {
			return err
		}
		for _, h := range hs {
			var sum float64
			for i, n := range h.Counts {
				sum += float64(n) * float64(h.Edges[i]) / 1e9
			}
			ch <- constHistogram(h, string(kind), sum)
		}
		return nil
	})
	classes, err := c.st.Classes(ctx, query.TimeRange{})
	if err != nil {
		slog.Warn("metrics: classes", "err", err)
		ok = false
	}
	for _, class := range classes {
		k, err := c.st.Counters(ctx, query.TimeRange{}, class)
		if err != nil {
			slog.Warn("metrics: counters", "class", class, "err", err)
			ok = false
			continue
		}
		emit(ch, classMetrics, k, class)
	}
	return ok
}

// constHistogram converts a store histogram (bucket i = [e_i, e_i+1), the
// first also holding values below e_0, the last open above) with the sum
// of its values (seconds) into Prometheus's cumulative "le" buckets. A
// value equal to an edge counts in the bucket above it, so "le" is the
// next edge minus 1 ns.
func constHistogram(h query.ClassHistogram, kind string, sum float64) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Edges))
	var cum uint64
	for i, n := range h.Counts {
		cum += uint64(n)
		if i+1 < len(h.Edges) {
			buckets[leSeconds(h.Edges[i+1])] = cum
		}
	}
	return prometheus.MustNewConstHistogram(descRT, uint64(h.Total), sum, buckets, h.Class, kind)
}
