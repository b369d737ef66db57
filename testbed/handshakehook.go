package testbed

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"time"
)

// HandshakeHook: the emulated link's view of handshakes, which the FAST SYN,
// FAST SYN/ACK and SPLICE rules act on.

// handshakeIdle is the quiet time after which an address's next connection
// counts as its pageview's first (drop and loss rules).
const handshakeIdle = 2 * time.Second

// fastMaxCopies bounds the copies the bridge injects per handshake: it
// copies every gap until the handshake is answered, as the what-if's FAST
// SYN replays it, and 40 copies outlast a Linux client's 7 s of SYNs at
// the 200 ms gap the validations use (with 5, behind a full accept queue
// the copies stopped after 1 s and the clients' own SYNs took over).
const fastMaxCopies = 40

// HandshakeHook is the link's hook for the handshake experiments: SYN/ACK
// loss as a scenario condition, FAST SYN and FAST SYN/ACK as real actions.
type HandshakeHook struct {
	SYNACKLoss          bool
	FastSYN, FastSYNACK time.Duration

	mu         sync.Mutex
	lastSYNACK map[netip.Addr]time.Time
	syns       map[hsKey]*pending // client SYNs by client, port and ISN
	synacks    map[hsKey]*pending // SYN/ACKs by client, port and server ISN
	lost       int
	injected   [2]int
}

type hsKey struct {
	client netip.Addr
	port   uint16
	isn    uint32
}

type pending struct {
	frame  []byte
	done   bool // answered (SYN) or acknowledged (SYN/ACK)
	copies int
}

func (h *HandshakeHook) active() bool { return h.SYNACKLoss || h.FastSYN > 0 || h.FastSYNACK > 0 }

// Counts returns SYN/ACKs lost and copies injected towards the server
// (FAST SYN) and the client (FAST SYN/ACK).
func (h *HandshakeHook) Counts() (lost, fastSYN, fastSYNACK int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost, h.injected[ToServer], h.injected[ToClient]
}

// tcpSeqAck returns a TCP frame's sequence and acknowledgement numbers.
func tcpSeqAck(f *Frame) (seq, ack uint32, ok bool) {
	if !f.TCP {
		return 0, 0, false
	}
	ihl := int(f.Data[14]&0x0f) * 4
	tcp := f.Data[14+ihl:]
	if len(tcp) < 12 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(tcp[4:8]), binary.BigEndian.Uint32(tcp[8:12]), true
}

// Hook is LinkOptions.Hook. It runs on the bridge's two reader goroutines
// and on the retransmission timers, hence the lock.
func (h *HandshakeHook) Hook(b *Bridge, f *Frame) bool {
	seq, ack, ok := tcpSeqAck(f)
	if !ok || f.RST {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.syns == nil {
		h.syns, h.synacks, h.lastSYNACK = map[hsKey]*pending{}, map[hsKey]*pending{}, map[netip.Addr]time.Time{}
	}
	switch {
	case f.Dir == ToServer && f.SYN && !f.ACK:
		if h.FastSYN > 0 {
			h.watch(b, ToServer, hsKey{f.Client, f.SrcPort, seq}, f, h.FastSYN)
		}
	case f.Dir == ToClient && f.SYN && f.ACK:
		h.answered(ToServer, hsKey{f.Client, f.DstPort, ack - 1})
		if h.FastSYNACK > 0 {
			h.watch(b, ToClient, hsKey{f.Client, f.DstPort, seq}, f, h.FastSYNACK)
		}
		if h.SYNACKLoss {
			last, seen := h.lastSYNACK[f.Client]
			h.lastSYNACK[f.Client] = f.At
			if !seen || f.At.Sub(last) > handshakeIdle {
				h.lost++
				return false
			}
		}
	case f.Dir == ToServer && f.ACK && !f.SYN:
		h.answered(ToClient, hsKey{f.Client, f.SrcPort, ack - 1})
	}
	return true
}

// watching is the handshake frames going in direction d that wait for
// their answer: client SYNs (ToServer) or SYN/ACKs (ToClient).
func (h *HandshakeHook) watching(d Direction) map[hsKey]*pending {
	if d == ToClient {
		return h.synacks
	}
	return h.syns
}

// watch remembers frame f going in direction d and arms its copy, unless
// its handshake is watched already (f is a retransmission); called with
// h.mu held.
func (h *HandshakeHook) watch(b *Bridge, d Direction, k hsKey, f *Frame, gap time.Duration) {
	m := h.watching(d)
	if m[k] == nil {
		p := &pending{frame: append([]byte(nil), f.Data...)}
		m[k] = p
		h.arm(b, d, k, p, gap)
	}
}

// answered marks the frame watched under k in direction d as answered;
// called with h.mu held.
func (h *HandshakeHook) answered(d Direction, k hsKey) {
	if p := h.watching(d)[k]; p != nil {
		p.done = true
	}
}

// arm schedules a copy of p's frame gap from now unless it is answered
// meanwhile; called with h.mu held. Entries are dropped once settled, so
// the maps hold only handshakes in progress.
func (h *HandshakeHook) arm(b *Bridge, d Direction, k hsKey, p *pending, gap time.Duration) {
	time.AfterFunc(gap, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		m := h.watching(d)
		if p.done || p.copies >= fastMaxCopies {
			delete(m, k)
			return
		}
		p.copies++
		h.injected[d]++
		b.Inject(d, p.frame, time.Now())
		h.arm(b, d, k, p, gap)
	})
}
