package web

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rtmon/rtmon/store"
)

// Prometheus histogram buckets (seconds): coarser than the UI's, but with
// edges just past 1 s and 3 s so SYN-loss delays show as a step.
var promBuckets = []int64{
	int64(10 * time.Millisecond), int64(25 * time.Millisecond), int64(50 * time.Millisecond),
	int64(100 * time.Millisecond), int64(250 * time.Millisecond), int64(500 * time.Millisecond),
	int64(time.Second), int64(1500 * time.Millisecond), int64(2500 * time.Millisecond),
	int64(3 * time.Second), int64(4 * time.Second), int64(6 * time.Second), int64(10 * time.Second),
	int64(30 * time.Second), int64(60 * time.Second),
}

type metrics struct {
	reg *prometheus.Registry
}

// newMetrics registers a collector that asks the store at scrape time, so
// the histograms are the store's answers (cumulative over everything
// stored), plus the live pipeline's counters.
func newMetrics(st store.Querier, live *LiveFeed) *metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(&storeCollector{st: st, live: live})
	return &metrics{reg: reg}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

type storeCollector struct {
	st   store.Querier
	live *LiveFeed
}

var (
	descRT = prometheus.NewDesc("rtmon_response_time_seconds",
		"Client-perceived response time of stored records, per class and kind (transaction or pageview).",
		[]string{"class", "kind"}, nil)
	descCounter = func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("rtmon_"+name, help, []string{"class"}, nil)
	}
	descConns        = descCounter("connections_total", "Stored connections.")
	descSYNLoss      = descCounter("syn_losses_total", "Client SYN retransmissions with no SYN/ACK in between (dropped SYNs).")
	descSYNACKLoss   = descCounter("synack_losses_total", "SYN/ACKs that never reached the client.")
	descRetransBytes = descCounter("retransmitted_bytes_total", "Retransmitted bytes on stored connections.")
	descServerErrors = descCounter("server_errors_total", "Transactions with status >= 500.")
	descIncomplete   = descCounter("incomplete_transactions_total", "Transactions still open at end of input or eviction.")

	descPipeline = func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("rtmon_"+name, help, nil, nil)
	}
	descPackets      = descPipeline("packets_total", "TCP packets decoded by the live pipeline.")
	descBytes        = descPipeline("capture_bytes_total", "Captured bytes read by the live pipeline.")
	descDrops        = descPipeline("capture_drops_total", "Packets dropped by libpcap or the kernel (rtmon too slow).")
	descIfDrops      = descPipeline("interface_drops_total", "Packets dropped by the interface or driver.")
	descEvictions    = descPipeline("evictions_total", "Connections evicted from the tracker's full table.")
	descOpenConns    = descPipeline("open_connections", "Connections being tracked.")
	descStoreWritten = descPipeline("store_written_total", "Records stored by this process's writer.")
	descStoreQueued  = descPipeline("store_backlog_records", "Records waiting to be stored (memory and spill files).")
	descStoreSpilled = descPipeline("store_spill_files", "Spill files waiting to be stored.")
	descStoreRetries = descPipeline("store_retries_total", "Failed store insert attempts.")
	descStoreDup     = descPipeline("store_duplicates_total", "Records dropped because their id was already stored.")
	descScrapeErr    = descPipeline("store_query_errors", "1 if the last scrape's store queries failed.")
)

// Describe sends nothing: an unchecked collector, because describing by
// collecting would query the whole store when the server starts.
func (c *storeCollector) Describe(chan<- *prometheus.Desc) {}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	failed := 0.0
	for _, kind := range []store.Kind{store.Transactions, store.Pageviews} {
		hs, err := c.st.Histogram(ctx, store.HistogramQuery{Kind: kind, Edges: promBuckets})
		if err != nil {
			slog.Warn("metrics: histogram", "kind", kind, "err", err)
			failed = 1
			continue
		}
		for _, h := range hs {
			ch <- constHistogram(h, string(kind))
		}
	}
	classes, err := c.st.Classes(ctx, store.TimeRange{})
	if err != nil {
		slog.Warn("metrics: classes", "err", err)
		failed = 1
	}
	for _, class := range classes {
		k, err := c.st.Counters(ctx, store.TimeRange{}, class)
		if err != nil {
			slog.Warn("metrics: counters", "class", class, "err", err)
			failed = 1
			continue
		}
		cv := func(d *prometheus.Desc, v int64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), class)
		}
		cv(descConns, k.Connections)
		cv(descSYNLoss, k.SYNLosses)
		cv(descSYNACKLoss, k.SYNACKLosses)
		cv(descRetransBytes, k.ConnRetransBytes)
		cv(descServerErrors, k.ServerErrors)
		cv(descIncomplete, k.IncompleteTx)
	}
	ch <- prometheus.MustNewConstMetric(descScrapeErr, prometheus.GaugeValue, failed)

	ws := c.st.Stats()
	ch <- prometheus.MustNewConstMetric(descStoreWritten, prometheus.CounterValue, float64(ws.Written))
	ch <- prometheus.MustNewConstMetric(descStoreQueued, prometheus.GaugeValue, float64(ws.Queued))
	ch <- prometheus.MustNewConstMetric(descStoreSpilled, prometheus.GaugeValue, float64(ws.SpilledFiles))
	ch <- prometheus.MustNewConstMetric(descStoreRetries, prometheus.CounterValue, float64(ws.Retries))
	ch <- prometheus.MustNewConstMetric(descStoreDup, prometheus.CounterValue, float64(ws.Duplicates))

	if c.live == nil {
		return
	}
	ev, _ := c.live.Latest()
	p := ev.Pipeline
	cv := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	cv(descPackets, p.Packets)
	cv(descBytes, p.Bytes)
	cv(descDrops, p.CaptureDrops)
	cv(descIfDrops, p.InterfaceDrops)
	cv(descEvictions, p.Evictions)
	ch <- prometheus.MustNewConstMetric(descOpenConns, prometheus.GaugeValue, float64(p.OpenConnections))
}

// constHistogram converts a store histogram (bucket i = [e_i, e_i+1), the
// first also holding values below e_0, the last open above) into
// Prometheus's cumulative "le" buckets. A value equal to an edge counts in
// the bucket above it, so "le" is the next edge minus 1 ns; the sum is
// approximated with bucket lower edges since the store returns counts only.
func constHistogram(h store.ClassHistogram, kind string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Edges))
	var cum uint64
	var sum float64
	for i, n := range h.Counts {
		cum += uint64(n)
		if i+1 < len(h.Edges) {
			buckets[float64(h.Edges[i+1]-1)/1e9] = cum
		}
		sum += float64(n) * float64(h.Edges[min(i, len(h.Edges)-1)]) / 1e9
	}
	return prometheus.MustNewConstHistogram(descRT, uint64(h.Total), sum, buckets, h.Class, kind)
}
