package capture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcap"
)

// LiveOptions configures OpenLive. Zero values pick the defaults noted.
type LiveOptions struct {
	Filter        string        // BPF expression, e.g. "tcp port 80"; empty captures all
	SnapLen       int           // bytes kept per packet; 0 = 262144 (whole packets)
	BufferSize    int           // kernel ring buffer in bytes, per socket; 0 = 32 MiB
	Promiscuous   bool          // also see traffic not addressed to this host
	ImmediateMode bool          // AF_PACKET: hand over ring blocks after 1 ms, not 10 (libpcap: latency <= Timeout either way, see openHandle)
	Timeout       time.Duration // read timeout, bounds cancel latency; 0 = 100 ms
	BatchBytes    int           // bytes per batch handed to the consumer; 0 = 1 MiB
	// Reader picks the capture mechanism: LiveAFPacket (Linux
	// TPACKET_V3 rings), LiveLibpcap, or "" for AF_PACKET where it
	// applies (Linux, an Ethernet, loopback or raw-IP interface, not
	// "any") and libpcap elsewhere.
	Reader string
	// Fanout is how many AF_PACKET sockets share each interface's traffic
	// in a fanout group (by a symmetric flow hash, so both directions of a
	// connection reach the same socket), each read by its own goroutine
	// into its own ring; 0 = 1. Ignored with libpcap.
	Fanout int
	// BlockTimeout is how long the kernel fills an AF_PACKET ring block
	// before handing it over part full: the latency floor under a trickle
	// of packets; 0 = 10 ms (1 ms with ImmediateMode).
	BlockTimeout time.Duration
}

// Live capture readers (LiveOptions.Reader).
const (
	LiveAFPacket = "afpacket"
	LiveLibpcap  = "libpcap"
)

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
	if o.Fanout <= 0 {
		o.Fanout = 1
	}
	if o.BlockTimeout <= 0 {
		o.BlockTimeout = 10 * time.Millisecond
		if o.ImmediateMode {
			o.BlockTimeout = time.Millisecond
		}
	}
}

// errReadTimeout is what a packetReader returns when a read timed out
// with no packet.
var errReadTimeout = errors.New("read timeout")

// packetReader is one capture handle: a libpcap handle or an AF_PACKET
// socket.
type packetReader interface {
	// ZeroCopyReadPacketData returns the next frame, valid until the next
	// call, or errReadTimeout.
	ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error)
	LinkType() layers.LinkType
	// Stats are the kernel's counters for this handle so far.
	Stats() (CaptureStats, error)
	Close()
}

// pcapReader is a libpcap handle as a packetReader.
type pcapReader struct{ h *pcap.Handle }

func (r pcapReader) ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error) {
	data, ci, err := r.h.ZeroCopyReadPacketData()
	if errors.Is(err, pcap.NextErrorTimeoutExpired) {
		err = errReadTimeout
	}
	return data, ci, err
}

func (r pcapReader) LinkType() layers.LinkType { return r.h.LinkType() }
func (r pcapReader) Close()                    { r.h.Close() }

func (r pcapReader) Stats() (CaptureStats, error) {
	st, err := r.h.Stats()
	if err != nil {
		return CaptureStats{}, err
	}
	return CaptureStats{Received: uint64(st.PacketsReceived), Dropped: uint64(st.PacketsDropped), IfDropped: uint64(st.PacketsIfDropped)}, nil
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

// liveIface is one capture handle: an interface's libpcap handle, or one
// of its AF_PACKET fanout sockets.
type liveIface struct {
	name                        string
	iface                       int // index in Names
	h                           packetReader
	lt                          layers.LinkType
	frames, bytes               atomic.Uint64
	recv, drop, ifDrop, freezes atomic.Uint64
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
	for i, name := range ifaces {
		hs, err := openReaders(name, opts)
		if err != nil {
			for _, li := range s.ifaces {
				li.h.Close()
			}
			return nil, err
		}
		for _, h := range hs {
			s.ifaces = append(s.ifaces, &liveIface{name: name, iface: i, h: h, lt: h.LinkType()})
		}
	}

	ctx, s.cancel = context.WithCancel(ctx)
	nb := 4*len(s.ifaces) + 2
	s.ch = make(chan *batch, nb)
	s.free = make(chan *batch, nb)
	for range nb {
		s.free <- &batch{buf: make([]byte, 0, opts.BatchBytes), frames: make([]frameRef, 0, 1024)}
	}
	s.done = make(chan struct{})
	var wg sync.WaitGroup
	for _, li := range s.ifaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.run(ctx, li, opts); err != nil {
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

// openReaders opens the capture handles of one interface: Fanout
// AF_PACKET sockets, or one libpcap handle.
func openReaders(name string, o LiveOptions) ([]packetReader, error) {
	switch o.Reader {
	case LiveLibpcap:
	case LiveAFPacket:
		return openAFPacket(name, o)
	case "":
		if afPacketApplies(name) {
			return openAFPacket(name, o)
		}
	default:
		return nil, fmt.Errorf("interface %s: unknown capture reader %q (want %s or %s)", name, o.Reader, LiveAFPacket, LiveLibpcap)
	}
	h, err := openHandle(name, o)
	if err != nil {
		return nil, err
	}
	return []packetReader{pcapReader{h}}, nil
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
		// Never immediate mode: on Linux it makes libpcap fall back to
		// TPACKET_V2, whose fixed slots are snaplen-sized, so a 32 MiB
		// ring held 127 whole-packet slots and dropped a third of a 20k
		// pps replay on a busy machine. TPACKET_V3 packs packets into
		// blocks handed over at the timeout: latency <= Timeout.
		{"immediate mode", ih.SetImmediateMode(false)},
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
func (s *liveSource) run(ctx context.Context, li *liveIface, o LiveOptions) (err error) {
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
			if errors.Is(rerr, errReadTimeout) {
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
			b.iface, b.lt = li.iface, li.lt
			b.buf, b.frames = b.buf[:0], b.frames[:0]
		}
		off := len(b.buf)
		b.buf = append(b.buf, data...) // grows once if a frame exceeds the batch size
		b.frames = append(b.frames, frameRef{ts: ci.Timestamp.UnixNano(), off: int32(off), len: int32(len(data))})
		// Counted before a send that a stop may cut short: every frame
		// taken from the handle is in Frames, so Received = Frames +
		// Dropped once the ring is drained.
		n := li.frames.Add(1)
		li.bytes.Add(uint64(len(data)))
		if b.due(o.Timeout) && !send() {
			return nil
		}
		// Under load reads never time out; refresh drop counters about once a
		// second without reading the clock per packet.
		if n%256 == 0 && time.Since(lastStats) > time.Second {
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
	li.recv.Store(st.Received)
	li.drop.Store(st.Dropped)
	li.ifDrop.Store(st.IfDropped)
	li.freezes.Store(st.Freezes)
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

// Stats sums each interface's handles (its fanout sockets).
func (s *liveSource) Stats() Stats {
	s.stats = s.stats[:0]
	for _, name := range s.names {
		s.stats = append(s.stats, SourceStats{Name: name, Live: true})
	}
	for _, li := range s.ifaces {
		st := &s.stats[li.iface]
		st.Frames += li.frames.Load()
		st.Bytes += li.bytes.Load()
		st.Sockets++
		st.Capture.Received += li.recv.Load()
		st.Capture.Dropped += li.drop.Load()
		st.Capture.IfDropped += li.ifDrop.Load()
		st.Capture.Freezes += li.freezes.Load()
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
