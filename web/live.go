package web

import (
	"context"
	"encoding/json"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store/query"
)

// PipelineStats are the live pipeline's health counters. They are shown on
// every page and exported on /metrics because an SRE must see when the
// numbers are incomplete (drops, evictions, a store that falls behind).
type PipelineStats struct {
	Packets int64 `json:"packets"` // TCP packets decoded
	Bytes   int64 `json:"bytes"`   // captured bytes read
	// CaptureDrops: packets libpcap or the kernel dropped because rtmon was
	// too slow (pcap_stats ps_drop, or PACKET_STATISTICS tp_drops, summed
	// over interfaces and sockets).
	CaptureDrops int64 `json:"capture_drops"`
	// InterfaceDrops: packets the interface or driver dropped (ps_ifdrop).
	InterfaceDrops int64 `json:"interface_drops"`
	// CaptureFreezes: times an AF_PACKET ring was full and frozen by the
	// kernel (TPACKET_V3), summed over sockets; drops follow each.
	CaptureFreezes int64 `json:"capture_freezes"`
	// Evictions: connections evicted from the tracker's full table.
	Evictions       int64 `json:"evictions"`
	OpenConnections int64 `json:"open_connections"`
	// TrackerMemory: the tracker's state counted against its share of
	// --max-memory; MemoryEvictions: connections shed to stay within it.
	TrackerMemory   int64 `json:"tracker_memory"`
	MemoryEvictions int64 `json:"memory_evictions"`
	// HTTPS: connections that began with a ClientHello, those of them
	// decrypted with the key log, timed keyless, whose key the log
	// lacked, and whose decryption failed (see reconstruct.Stats).
	TLSConnections int64 `json:"tls_connections"`
	TLSDecrypted   int64 `json:"tls_decrypted"`
	TLSKeyLate     int64 `json:"tls_key_late"`
	// TLSEarlyData: TLS 1.3 connections whose request went as 0-RTT early
	// data; TLSEarlyRejected: those whose server refused it.
	TLSEarlyData     int64 `json:"tls_early_data"`
	TLSEarlyRejected int64 `json:"tls_early_rejected"`
	TLSKeyless       int64 `json:"tls_keyless"`
	TLSNoKey         int64 `json:"tls_no_key"`
	TLSDecryptErrors int64 `json:"tls_decrypt_errors"`
	// Store writer: records stored, waiting (the back-log), spill files.
	StoreWritten   int64  `json:"store_written"`
	StoreQueued    int64  `json:"store_queued"`
	StoreSpilled   int64  `json:"store_spilled_files"`
	StoreRetries   int64  `json:"store_retries"`
	StoreLastError string `json:"store_last_error,omitempty"`
	// StoreState is what is wrong with storing now (storeState), "" if
	// nothing: StoreLastError may be an old error.
	StoreState string `json:"store_state,omitempty"`
}

// LivePoint is one record that completed since the previous event.
type LivePoint struct {
	T         int64  `json:"t"` // Start, ns since the epoch (packet time)
	Kind      string `json:"kind"`
	Total     int64  `json:"total"`
	Tconn     int64  `json:"tconn"`
	Tserver   int64  `json:"tserver"`
	Ttransfer int64  `json:"ttransfer"`
}

// LiveClass is one class's cumulative counters and its latest points.
type LiveClass struct {
	Class        string      `json:"class"`
	Transactions int64       `json:"transactions"`
	Pageviews    int64       `json:"pageviews"`
	Connections  int64       `json:"connections"`
	SYNLosses    int64       `json:"syn_losses"`
	SYNACKLosses int64       `json:"synack_losses"`
	RetransBytes int64       `json:"retrans_bytes"`
	Points       []LivePoint `json:"points"`
}

// LiveEvent is what the pipeline publishes, typically once a second.
type LiveEvent struct {
	Time     int64         `json:"time"` // newest packet time seen (ns); 0 if none yet
	Classes  []LiveClass   `json:"classes"`
	Pipeline PipelineStats `json:"pipeline"`
}

// LiveFeed fans LiveEvents out to the browsers watching the live page (as
// server-sent events) and to /metrics. Publish never blocks on a slow
// browser: a subscriber that has not taken the previous event gets only the
// newest one.
type LiveFeed struct {
	mu     sync.Mutex
	subs   map[chan []byte]struct{}
	last   LiveEvent
	lastJS []byte
	seq    int64

	agg aggregator
}

// NewLiveFeed makes an empty feed.
func NewLiveFeed() *LiveFeed {
	return &LiveFeed{subs: map[chan []byte]struct{}{}, agg: aggregator{classes: map[string]*LiveClass{}}}
}

// Publish sends ev to every subscriber and keeps it as the latest state.
func (f *LiveFeed) Publish(ev LiveEvent) {
	js, err := json.Marshal(ev)
	if err != nil {
		return // LiveEvent has only plain fields; cannot fail
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	f.last, f.lastJS = ev, js
	for ch := range f.subs {
		select {
		case ch <- js:
		default:
			// Replace the stale event rather than block the pipeline.
			select {
			case <-ch:
			default:
			}
			select {
			case ch <- js:
			default:
			}
		}
	}
}

// Latest returns the last published event and whether there was one.
func (f *LiveFeed) Latest() (LiveEvent, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last, f.seq > 0
}

func (f *LiveFeed) subscribe() (ch chan []byte, first []byte, cancel func()) {
	ch = make(chan []byte, 1)
	f.mu.Lock()
	f.subs[ch] = struct{}{}
	first = f.lastJS
	f.mu.Unlock()
	return ch, first, func() {
		f.mu.Lock()
		delete(f.subs, ch)
		f.mu.Unlock()
	}
}

// Observe returns a pageview.Sink that counts records per class into the
// feed and passes them on to next (the store). Place it after the pageview
// grouper; call Run to publish what it counted. It keeps at most
// maxPointsPerClass points between two events so a burst cannot grow it.
//
// The grouper holds transactions for up to its Settle time (2 s) before
// passing them on; for the live chart to follow traffic within 2 s, also put
// Tap between the tracker and the grouper. Observe then counts only
// pageviews.
func (f *LiveFeed) Observe(next pageview.Sink) pageview.Sink {
	return &observer{f: f, next: next}
}

// Tap returns a reconstruct.Sink for between the tracker and the pageview
// grouper: it counts each transaction and connection into the feed as soon
// as the tracker emits it, classed by classify, or by the record's own
// Class when classify is nil (put pageview.Classify in front of the tap so
// that each record is classified once), and passes it on to next.
func (f *LiveFeed) Tap(next reconstruct.Sink, classify func(netip.Addr) string) reconstruct.Sink {
	f.agg.mu.Lock()
	f.agg.tapped = true
	f.agg.mu.Unlock()
	return &tap{f: f, next: next, classify: classify}
}

type tap struct {
	f        *LiveFeed
	next     reconstruct.Sink
	classify func(netip.Addr) string
}

func (t *tap) Connection(c *reconstruct.Connection) {
	t.f.agg.connection(t.class(c.Class, c.Client), c)
	t.next.Connection(c)
}

func (t *tap) Transaction(x *reconstruct.Transaction) {
	t.f.agg.point(t.class(x.Class, x.Client), txPoint(x))
	t.next.Transaction(x)
}

func (t *tap) class(stamped string, client netip.Addr) string {
	if t.classify == nil {
		return stamped
	}
	return t.classify(client)
}

// Run publishes what Observe counted every interval (1 s if <= 0), with
// the pipeline stats from stats (may be nil), until ctx ends.
func (f *LiveFeed) Run(ctx context.Context, interval time.Duration, stats func() PipelineStats) {
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.PublishObserved(stats)
		}
	}
}

// PublishObserved publishes one event from Observe's counters now.
func (f *LiveFeed) PublishObserved(stats func() PipelineStats) {
	ev := f.agg.take()
	if stats != nil {
		ev.Pipeline = stats()
	}
	f.Publish(ev)
}

const maxPointsPerClass = 2000

type aggregator struct {
	mu      sync.Mutex
	newest  int64
	classes map[string]*LiveClass
	tapped  bool // a Tap counts transactions and connections
}

func (a *aggregator) connection(class string, c *reconstruct.Connection) {
	a.mu.Lock()
	defer a.mu.Unlock()
	lc := a.class(class)
	lc.Connections++
	lc.SYNLosses += int64(c.SYNLosses)
	lc.SYNACKLosses += int64(c.SYNACKLosses)
	lc.RetransBytes += c.RetransBytes
	a.newest = max(a.newest, c.LastSeen)
}

func (a *aggregator) isTapped() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tapped
}

func (a *aggregator) class(name string) *LiveClass {
	c := a.classes[name]
	if c == nil {
		c = &LiveClass{Class: name}
		a.classes[name] = c
	}
	return c
}

func (a *aggregator) point(class string, p LivePoint) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.class(class)
	if p.Kind == "pageview" {
		c.Pageviews++
	} else {
		c.Transactions++
	}
	if len(c.Points) < maxPointsPerClass {
		c.Points = append(c.Points, p)
	}
	a.newest = max(a.newest, p.T+p.Total)
}

func (a *aggregator) take() LiveEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	ev := LiveEvent{Time: a.newest}
	names := make([]string, 0, len(a.classes))
	for n := range a.classes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := a.classes[n]
		ev.Classes = append(ev.Classes, *c)
		c.Points = nil
	}
	return ev
}

type observer struct {
	f    *LiveFeed
	next pageview.Sink
}

func txPoint(t *reconstruct.Transaction) LivePoint {
	return LivePoint{T: t.Start, Kind: "transaction", Total: t.Total, Tconn: t.Tconn, Tserver: t.Tserver, Ttransfer: t.Ttransfer}
}

func (o *observer) Connection(c *reconstruct.Connection) {
	if !o.f.agg.isTapped() {
		o.f.agg.connection(c.Class, c)
	}
	o.next.Connection(c)
}

// Transaction counts t under the class the grouper stamped on it.
func (o *observer) Transaction(t *reconstruct.Transaction) {
	if !o.f.agg.isTapped() {
		o.f.agg.point(t.Class, txPoint(t))
	}
	o.next.Transaction(t)
}

func (o *observer) Pageview(p *pageview.Pageview) {
	o.f.agg.point(p.Class, LivePoint{T: p.Start, Kind: "pageview", Total: p.Total, Tconn: p.Tconn, Tserver: p.Tserver, Ttransfer: p.Ttransfer})
	o.next.Pageview(p)
}

// StatsFrom assembles PipelineStats from the stages' own counters, for the
// stats function of Run: capture drops are summed over live interfaces.
func StatsFrom(src capture.Stats, tr reconstruct.Stats, ws query.WriterStats) PipelineStats {
	p := PipelineStats{Packets: int64(tr.Packets), Evictions: int64(tr.Evicted), OpenConnections: int64(tr.OpenConnections),
		TrackerMemory: tr.MemoryInUse, MemoryEvictions: int64(tr.MemoryEvictions),
		TLSConnections: int64(tr.TLSConnections), TLSDecrypted: int64(tr.TLSDecrypted), TLSKeyless: int64(tr.TLSKeyless),
		TLSKeyLate: int64(tr.TLSKeyLate), TLSEarlyData: int64(tr.TLSEarlyData), TLSEarlyRejected: int64(tr.TLSEarlyRejected),
		TLSNoKey: int64(tr.TLSNoKey), TLSDecryptErrors: int64(tr.TLSDecryptErrors),
		StoreWritten: ws.Written, StoreQueued: ws.Queued, StoreSpilled: int64(ws.SpilledFiles), StoreRetries: ws.Retries,
		StoreLastError: ws.LastError, StoreState: storeState(ws)}
	for _, s := range src.Sources {
		p.Bytes += int64(s.Bytes)
		if s.Live {
			p.CaptureDrops += int64(s.Capture.Dropped)
			p.InterfaceDrops += int64(s.Capture.IfDropped)
			p.CaptureFreezes += int64(s.Capture.Freezes)
		}
	}
	return p
}
