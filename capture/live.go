package capture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcap"
)

// LiveOptions configures OpenLive. Zero values pick the defaults noted.
type LiveOptions struct {
	Filter        string        // BPF expression, e.g. "tcp port 80"; empty captures all
	SnapLen       int           // bytes kept per packet; 0 = 262144 (whole packets)
	BufferSize    int           // kernel ring buffer in bytes; 0 = 32 MiB
	Promiscuous   bool          // also see traffic not addressed to this host
	ImmediateMode bool          // deliver packets at once instead of when the buffer fills
	Timeout       time.Duration // read timeout, bounds cancel latency; 0 = 100 ms
	BatchBytes    int           // bytes per batch handed to the consumer; 0 = 1 MiB
}

func (o *LiveOptions) defaults() {
	if o.SnapLen <= 0 {
		o.SnapLen = 262144
	}
	if o.BufferSize <= 0 {
		o.BufferSize = 32 << 20
	}
	if o.Timeout <= 0 {
		o.Timeout = 100 * time.Millisecond
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = 1 << 20
	}
}

// frameRef locates one frame inside a batch buffer.
type frameRef struct {
	ts       int64
	off, len int32
}

// batch carries frames copied out of libpcap's ring, so the capture
// goroutine can go on reading while the consumer decodes.
type batch struct {
	iface  int
	lt     layers.LinkType
	buf    []byte
	frames []frameRef
}

type liveIface struct {
	name               string
	h                  *pcap.Handle
	lt                 layers.LinkType
	frames, bytes      atomic.Uint64
	recv, drop, ifDrop atomic.Uint64
}

type liveSource struct {
	ifaces []*liveIface
	names  []string
	cancel context.CancelFunc
	ch     chan *batch // filled batches
	free   chan *batch // empty batches for reuse (bounded memory, backpressure)
	done   chan struct{}
	dec    *Decoder
	cur    *batch
	pos    int
	stats  []SourceStats // reused by Stats

	errMu sync.Mutex
	errs  []error
	end   error
}

// OpenLive captures on one or more interfaces with libpcap and merges them
// into one stream. Packets of one interface arrive in capture order; across
// interfaces they arrive in batch order, so timestamps of different
// interfaces may interleave out of order by up to about one read timeout.
// Capture stops when ctx is cancelled or Close is called; Next then returns
// io.EOF after the buffered packets (or the first interface error).
func OpenLive(ctx context.Context, ifaces []string, opts LiveOptions) (Source, error) {
	if len(ifaces) == 0 {
		return nil, errors.New("open live capture: no interfaces given")
	}
	opts.defaults()
	s := &liveSource{dec: NewDecoder(), names: append([]string(nil), ifaces...)}
	for _, name := range ifaces {
		h, err := openHandle(name, opts)
		if err != nil {
			for _, li := range s.ifaces {
				li.h.Close()
			}
			return nil, err
		}
		s.ifaces = append(s.ifaces, &liveIface{name: name, h: h, lt: h.LinkType()})
	}

	ctx, s.cancel = context.WithCancel(ctx)
	nb := 4*len(ifaces) + 2
	s.ch = make(chan *batch, nb)
	s.free = make(chan *batch, nb)
	for range nb {
		s.free <- &batch{buf: make([]byte, 0, opts.BatchBytes), frames: make([]frameRef, 0, 1024)}
	}
	s.done = make(chan struct{})
	var wg sync.WaitGroup
	for i, li := range s.ifaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.run(ctx, i, li, opts); err != nil {
				s.errMu.Lock()
				s.errs = append(s.errs, err)
				s.errMu.Unlock()
			}
		}()
	}
	go func() {
		wg.Wait()
		close(s.ch)
		close(s.done)
	}()
	return s, nil
}

func openHandle(name string, o LiveOptions) (*pcap.Handle, error) {
	ih, err := pcap.NewInactiveHandle(name)
	if err != nil {
		return nil, fmt.Errorf("open interface %s: %w", name, err)
	}
	defer ih.CleanUp()
	for _, step := range []struct {
		what string
		err  error
	}{
		{"snaplen", ih.SetSnapLen(o.SnapLen)},
		{"promiscuous mode", ih.SetPromisc(o.Promiscuous)},
		{"timeout", ih.SetTimeout(o.Timeout)},
		{"buffer size", ih.SetBufferSize(o.BufferSize)},
		{"immediate mode", ih.SetImmediateMode(o.ImmediateMode)},
	} {
		if step.err != nil {
			return nil, fmt.Errorf("interface %s: set %s: %w", name, step.what, step.err)
		}
	}
	// Activate also asks for nanosecond timestamps where the kernel has them.
	h, err := ih.Activate()
	if err != nil {
		return nil, fmt.Errorf("activate interface %s: %w", name, err)
	}
	if o.Filter != "" {
		if err := h.SetBPFFilter(o.Filter); err != nil {
			h.Close()
			return nil, fmt.Errorf("interface %s: filter %q: %w", name, o.Filter, err)
		}
	}
	if !SupportedLinkType(h.LinkType()) {
		h.Close()
		return nil, fmt.Errorf("interface %s: unsupported link type %v", name, h.LinkType())
	}
	return h, nil
}

// run reads one interface until ctx ends, handing batches to the
// consumer when full, when a read times out, or when they span a read
// timeout of capture time (see batchDue).
func (s *liveSource) run(ctx context.Context, idx int, li *liveIface, o LiveOptions) (err error) {
	defer func() {
		li.updateStats()
		li.h.Close()
	}()
	var b *batch
	send := func() bool {
		if b == nil || len(b.frames) == 0 {
			return true
		}
		select {
		case s.ch <- b:
			b = nil
			return true
		case <-ctx.Done():
			return false
		}
	}
	defer send()
	lastStats := time.Now()
	for ctx.Err() == nil {
		data, ci, rerr := li.h.ZeroCopyReadPacketData()
		if rerr != nil {
			if errors.Is(rerr, pcap.NextErrorTimeoutExpired) {
				if !send() {
					return nil
				}
				li.updateStats()
				lastStats = time.Now()
				continue
			}
			if rerr == io.EOF {
				return nil
			}
			return fmt.Errorf("read interface %s: %w", li.name, rerr)
		}
		if b != nil && len(b.buf)+len(data) > cap(b.buf) {
			if !send() {
				return nil
			}
		}
		if b == nil {
			select {
			case b = <-s.free:
			case <-ctx.Done():
				return nil
			}
			b.iface, b.lt = idx, li.lt
			b.buf, b.frames = b.buf[:0], b.frames[:0]
		}
		off := len(b.buf)
		b.buf = append(b.buf, data...) // grows once if a frame exceeds the batch size
		b.frames = append(b.frames, frameRef{ts: ci.Timestamp.UnixNano(), off: int32(off), len: int32(len(data))})
		if b.due(o.Timeout) && !send() {
			return nil
		}
		n := li.frames.Add(1)
		li.bytes.Add(uint64(len(data)))
		// Under load reads never time out; refresh drop counters about once a
		// second without reading the clock per packet.
		if n%4096 == 0 && time.Since(lastStats) > time.Second {
			li.updateStats()
			lastStats = time.Now()
		}
	}
	return nil
}

// due reports whether b spans timeout of capture time: a trickle of
// packets never lets a read time out, and a batch that waited to fill
// held them back (seen: about a second behind on loopback), late for the
// live view and for key log lines read meanwhile. Frame times, not the
// clock, so no clock is read per packet.
func (b *batch) due(timeout time.Duration) bool {
	n := len(b.frames)
	return n > 1 && b.frames[n-1].ts-b.frames[0].ts >= int64(timeout)
}

func (li *liveIface) updateStats() {
	st, err := li.h.Stats()
	if err != nil {
		return
	}
	li.recv.Store(uint64(st.PacketsReceived))
	li.drop.Store(uint64(st.PacketsDropped))
	li.ifDrop.Store(uint64(st.PacketsIfDropped))
}

func (s *liveSource) Next(p *Packet) error {
	for {
		if b := s.cur; b != nil {
			for s.pos < len(b.frames) {
				f := b.frames[s.pos]
				s.pos++
				if s.dec.Decode(b.lt, b.buf[f.off:f.off+f.len], p) {
					p.Timestamp = f.ts
					p.Interface = b.iface
					return nil
				}
			}
			// p.Payload from this batch was only valid until this call.
			s.cur = nil
			s.free <- b
		}
		b, ok := <-s.ch
		if !ok {
			if s.end == nil {
				s.errMu.Lock()
				s.end = io.EOF
				if len(s.errs) > 0 {
					s.end = errors.Join(s.errs...)
				}
				s.errMu.Unlock()
			}
			return s.end
		}
		s.cur, s.pos = b, 0
	}
}

// Idle reports whether Next would wait for the capture goroutines: no
// packet is left in the batch at hand, and none is queued.
func (s *liveSource) Idle() bool {
	return (s.cur == nil || s.pos >= len(s.cur.frames)) && len(s.ch) == 0
}

func (s *liveSource) Names() []string { return s.names }

func (s *liveSource) Stats() Stats {
	s.stats = s.stats[:0]
	for _, li := range s.ifaces {
		s.stats = append(s.stats, SourceStats{
			Name: li.name, Frames: li.frames.Load(), Bytes: li.bytes.Load(), Live: true,
			Capture: CaptureStats{Received: li.recv.Load(), Dropped: li.drop.Load(), IfDropped: li.ifDrop.Load()},
		})
	}
	return Stats{Decode: s.dec.Stats(), Sources: s.stats}
}

func (s *liveSource) Progress() (done, total int64) {
	for _, li := range s.ifaces {
		done += int64(li.bytes.Load())
	}
	return done, 0
}

// Close stops capturing, waits for the capture goroutines and closes the
// handles. Packets still buffered are discarded.
func (s *liveSource) Close() error {
	s.cancel()
	for {
		select {
		case b, ok := <-s.ch:
			if ok {
				s.free <- b
				continue
			}
		case <-s.done:
		}
		break
	}
	<-s.done
	return nil
}
