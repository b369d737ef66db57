package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/web"
)

// liveEvery is how many packets apart the loop refreshes the live page's
// counters and looks for capture drops: fresh at any packet rate that
// matters.
const liveEvery = 16

// pump moves packets from src through the shards until the input ends,
// then finishes them (every record reaches the outputs) and fills the
// summary's input counters. The returned error is a read error after which
// everything read before it was processed.
func (p *Pipeline) pump(ctx context.Context, src capture.Source, sh *shards) error {
	start := time.Now()
	every := progressEvery
	if p.cfg.live() {
		every = liveEvery
	}
	idle, _ := src.(idleSource)
	var pkt capture.Packet
	var readErr error
	for i := 1; ; i++ {
		if idle != nil && idle.Idle() {
			sh.sync() // the source would wait: let the workers catch up meanwhile
		}
		if err := src.Next(&pkt); err != nil {
			if !errors.Is(err, io.EOF) {
				readErr = err
			}
			break
		}
		sh.packet(&pkt)
		if i%every == 0 {
			st := src.Stats()
			if p.drops != nil {
				p.drops.observe(st, sh.now)
			}
			p.snap.set(st, sh.trackerStats())
			if p.cfg.Progress != nil {
				p.cfg.Progress(src.Progress())
			}
			if ctx.Err() != nil {
				readErr = fmt.Errorf("interrupted: %w", ctx.Err())
				break
			}
		}
	}
	sh.finish()
	p.snap.set(src.Stats(), sh.trackerStats())
	if p.cfg.Progress != nil {
		p.cfg.Progress(src.Progress()) // the last report: all of it, or where it stopped
	}
	p.fillSummary(src.Stats(), sh.trackerStats(), time.Since(start))
	return readErr
}

// progressEvery is how many packets apart the loop refreshes its counters,
// reports progress and checks for a stop, reading files: rare enough to
// cost nothing, often enough for a progress bar and a prompt Ctrl-C.
const progressEvery = 1 << 16

// idleSource is a source that can tell when its next packet is not there
// yet (live capture).
type idleSource interface{ Idle() bool }

func (p *Pipeline) fillSummary(st capture.Stats, tr reconstruct.Stats, elapsed time.Duration) {
	s := p.summary
	s.Elapsed = elapsed
	s.Tracker = tr
	s.Malformed = st.Decode.Map()
	for _, src := range st.Sources {
		s.Packets += src.Frames
		s.Bytes += src.Bytes
		if src.Live {
			if s.CaptureDrops == nil {
				s.CaptureDrops = map[string]uint64{}
			}
			s.CaptureDrops[src.Name+" dropped"] += src.Capture.Dropped
			s.CaptureDrops[src.Name+" ifdropped"] += src.Capture.IfDropped
			if src.Capture.Freezes > 0 {
				s.CaptureDrops[src.Name+" ring freezes"] += src.Capture.Freezes
			}
		}
	}
}

// snapshot hands the loop's counters to other goroutines (the live feed's,
// Stats callers): the tracker and the source are not safe to read
// concurrently, so the loop copies them here as it goes. The store's
// counters, which take its lock, are read only when asked for.
type snapshot struct {
	mu    sync.Mutex
	src   capture.Stats
	tr    reconstruct.Stats
	store Store
}

func (s *snapshot) setStore(st Store) {
	s.mu.Lock()
	s.store = st
	s.mu.Unlock()
}

// set copies src.Sources into the snapshot's own slice: a source reuses
// its slice on every Stats call, and get runs on other goroutines.
func (s *snapshot) set(src capture.Stats, tr reconstruct.Stats) {
	s.mu.Lock()
	sources := append(s.src.Sources[:0], src.Sources...)
	s.src, s.tr = src, tr
	s.src.Sources = sources
	s.mu.Unlock()
}

func (s *snapshot) get() web.PipelineStats {
	s.mu.Lock()
	src, tr, st := s.src, s.tr, s.store
	src.Sources = slices.Clone(src.Sources)
	s.mu.Unlock()
	var ws store.WriterStats
	if st != nil {
		ws = st.Stats()
	}
	return web.StatsFrom(src, tr, ws)
}
