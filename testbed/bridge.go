package testbed

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rtmon/rtmon/internal/minheap"
)

// Direction of a frame through the bridge.
type Direction int

const (
	ToServer Direction = iota // client side -> server side
	ToClient                  // server side -> client side
)

func (d Direction) String() string {
	if d == ToServer {
		return "to-server"
	}
	return "to-client"
}

// LinkOptions describe the emulated link between clients and the server.
type LinkOptions struct {
	// RTT per client address: each direction adds RTT/2 to that client's
	// frames. Addresses listed here are also added to the client's veth.
	RTT map[netip.Addr]time.Duration
	// DefaultRTT applies to other frames (other addresses, ARP).
	DefaultRTT time.Duration
	// Loss is the probability of dropping a frame, per direction, drawn
	// from a generator seeded with Seed, so a run is repeatable for the
	// same frame sequence.
	Loss float64
	Seed uint64
	// LossSparesSYN exempts SYN and SYN/ACK frames from Loss. A SYN lost
	// between client and capture point leaves no trace at the server (the
	// client's retransmission a second later looks like its first try), so
	// a data-loss experiment that should stay checkable against the
	// client's truth spares them; handshake losses have their own,
	// server-side scenarios.
	LossSparesSYN bool
	// LossToClientOnly applies Loss only to frames going to the client, that
	// is after the server-side capture point. A request segment lost on the
	// client's side arrives only as its retransmission, which looks exactly
	// like a late first send (a browser's spare socket); a lost client ACK
	// makes the server resend data the client already has. Neither leaves
	// evidence at the server, so an accuracy experiment that must be
	// checkable against the client's truth keeps its losses downstream.
	LossToClientOnly bool
	// RateBytes limits each direction to this many bytes per second (0: no
	// limit). Frames are serialized one after another at this rate before
	// their propagation delay, as on a real link; a frame that would wait
	// longer than MaxQueue is dropped (tail drop).
	RateBytes int64
	MaxQueue  time.Duration
	// Hook, if set, sees every frame after the loss decision and before it
	// is queued and decides whether it is forwarded. It may also schedule
	// extra frames with Bridge.Inject. This is the place for a later FAST
	// SYN emulation: remember a client SYN, and if no SYN/ACK was seen
	// within the gap, Inject a copy towards the server.
	Hook func(b *Bridge, f *Frame) (forward bool)
}

// Frame is one Ethernet frame seen by the bridge.
type Frame struct {
	Dir    Direction
	At     time.Time // when the bridge read it
	Data   []byte    // the whole frame; owned by the bridge, copy to keep
	Client netip.Addr
	// IPv4/TCP fields when the frame is one (zero otherwise).
	TCP              bool
	SYN, ACK, RST    bool
	SrcPort, DstPort uint16
}

// BridgeStats count frames per direction.
type BridgeStats struct {
	Forwarded, Lost, QueueDrops, HookDrops, Injected, SendErrors [2]int64
	// LateReads count frames read more than a millisecond after the
	// kernel received them, LateSends frames written more than a
	// millisecond after their release time; MaxReadLag and MaxSendLag are
	// the largest such delays (ns). A late read does not delay a frame
	// (its release counts from the kernel's time); a late send does.
	LateReads, LateSends   [2]int64
	MaxReadLag, MaxSendLag [2]int64
	// Stalls are the spans, per direction, during which the link held a
	// frame over a millisecond past its release time: from the release to
	// the send, overlapping spans merged, in time order. A load that ran
	// during a stall may have been delayed by up to the stall's length,
	// which neither a monitor nor a model could know of.
	Stalls [2][]Stall
}

// Stall is a span of wall-clock time (Unix ns) in which the link was late.
type Stall struct{ From, To int64 }

// maxStalls bounds each direction's stall log; past it the last span
// grows to cover later stalls, which overstates them but never hides one.
const maxStalls = 1 << 16

// StallWithin is how long, in total, the link stalled (either direction)
// within [from, to] (Unix ns).
func (s BridgeStats) StallWithin(from, to int64) time.Duration {
	var spans []Stall
	for d := range 2 {
		for _, st := range s.Stalls[d] {
			if st.To > from && st.From < to {
				spans = append(spans, Stall{max(st.From, from), min(st.To, to)})
			}
		}
	}
	slices.SortFunc(spans, func(a, b Stall) int { return cmp.Compare(a.From, b.From) })
	var total, end int64
	for _, sp := range spans {
		if sp.From < end {
			sp.From = end
		}
		if sp.To > sp.From {
			total += sp.To - sp.From
			end = sp.To
		}
	}
	return time.Duration(total)
}

// Bridge forwards Ethernet frames between two interfaces of the link
// namespace through AF_PACKET sockets, delaying, dropping and pacing them as
// LinkOptions say. Per direction and client address frames keep their order:
// their release times never decrease (constant delay on a monotonic
// serialization clock), and ties are broken by arrival order.
type Bridge struct {
	opts  LinkOptions
	fds   [2]int // [ToServer] reads the client side, writes the server side's fd
	names [2]string

	// lk guards q, txEnd and seq of one direction, so a direction's
	// reader and sender are the only ones to contend for it.
	lk [2]sync.Mutex
	q  [2]minheap.Heap[queued]
	// wake: an eventfd per direction, written when a frame is queued. The
	// sender blocks in the kernel on it (ppoll), never on a Go channel:
	// a locked real-time goroutine woken through the Go scheduler waited
	// for a P's hand-off, seen up to 33 ms when the queue had been empty.
	wake  [2]int
	txEnd [2]time.Time  // end of the last frame's serialization
	rnd   [2]*rand.Rand // per direction, used by that direction's reader only
	seq   [2]uint64

	stats  [6][2]atomic.Int64
	lags   [4][2]atomic.Int64 // late reads, late sends, max read lag, max send lag
	stalls [2][]Stall         // guarded by lk[d]
	cancel context.CancelFunc
	done   sync.WaitGroup
}

const (
	stFwd = iota
	stLost
	stQueue
	stHook
	stInj
	stSendErr
)

// maxFrame is larger than any frame that can arrive: offloads are off on the
// veths, but a frame that still exceeds the MTU is read whole and then fails
// to send (counted in SendErrors) rather than being silently cut.
const maxFrame = 64<<10 + 64

// rcvTimeout bounds each blocking read so the readers notice Close.
const rcvTimeout = 50 * time.Millisecond

// StartBridge opens one AF_PACKET socket on each interface inside namespace
// ns (clientSide faces the client, serverSide the server), both promiscuous,
// and forwards frames until Close.
func StartBridge(ns, clientSide, serverSide string, opts LinkOptions) (*Bridge, error) {
	if opts.Loss < 0 || opts.Loss >= 1 {
		return nil, fmt.Errorf("bridge: loss %v not in [0,1)", opts.Loss)
	}
	if opts.MaxQueue == 0 {
		opts.MaxQueue = time.Second
	}
	b := &Bridge{opts: opts, fds: [2]int{-1, -1}, wake: [2]int{-1, -1}, names: [2]string{clientSide, serverSide}}
	for d := range 2 {
		b.rnd[d] = rand.New(rand.NewPCG(opts.Seed, uint64(d)+1))
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			b.closeFDs()
			return nil, fmt.Errorf("bridge eventfd: %w", err)
		}
		b.wake[d] = fd
	}
	err := inNS(ns, func() error {
		for i, name := range b.names {
			fd, err := openPacket(name)
			if err != nil {
				return err
			}
			b.fds[i] = fd
		}
		return nil
	})
	if err != nil {
		b.closeFDs()
		return nil, fmt.Errorf("bridge in %s: %w", ns, err)
	}
	ensureSpareProcs()
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	for _, d := range []Direction{ToServer, ToClient} {
		b.done.Add(2)
		go b.read(ctx, d)
		go b.send(ctx, d)
	}
	return b, nil
}

// openPacket opens a raw packet socket bound to the named interface (looked
// up in the calling thread's namespace), promiscuous, not looping back its
// own transmissions.
func openPacket(name string) (int, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return -1, fmt.Errorf("interface %s: %w", name, err)
	}
	proto := htons(unix.ETH_P_ALL)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		return -1, fmt.Errorf("packet socket on %s: %w", name, err)
	}
	fail := func(what string, err error) (int, error) {
		unix.Close(fd)
		return -1, fmt.Errorf("%s on %s: %w", what, name, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index}); err != nil {
		return fail("bind", err)
	}
	// The frames are addressed to the far host's MAC, not to this veth.
	mr := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_PROMISC}
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mr); err != nil {
		return fail("promiscuous", err)
	}
	// Without this every frame we send would come back to our own reader.
	// Older kernels lack it; the reader also checks the packet type.
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
	tv := unix.NsecToTimeval(rcvTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fail("receive timeout", err)
	}
	// Room for bursts while the sender goroutine is scheduled late.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
	// The kernel's receive time of each frame (see frameTime).
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	return fd, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Close stops forwarding and closes the sockets; frames still queued are
// discarded.
func (b *Bridge) Close() error {
	if b.cancel != nil {
		b.cancel()
	}
	b.done.Wait()
	b.closeFDs()
	return nil
}

func (b *Bridge) closeFDs() {
	for i, fd := range b.fds {
		if fd >= 0 {
			unix.Close(fd)
			b.fds[i] = -1
		}
	}
	for i, fd := range b.wake {
		if fd >= 0 {
			unix.Close(fd)
			b.wake[i] = -1
		}
	}
}

// Stats returns the counters so far.
func (b *Bridge) Stats() BridgeStats {
	var s BridgeStats
	for d := range 2 {
		s.Forwarded[d] = b.stats[stFwd][d].Load()
		s.Lost[d] = b.stats[stLost][d].Load()
		s.QueueDrops[d] = b.stats[stQueue][d].Load()
		s.HookDrops[d] = b.stats[stHook][d].Load()
		s.Injected[d] = b.stats[stInj][d].Load()
		s.SendErrors[d] = b.stats[stSendErr][d].Load()
		s.LateReads[d], s.LateSends[d] = b.lags[0][d].Load(), b.lags[1][d].Load()
		s.MaxReadLag[d], s.MaxSendLag[d] = b.lags[2][d].Load(), b.lags[3][d].Load()
		b.lk[d].Lock()
		s.Stalls[d] = slices.Clone(b.stalls[d])
		b.lk[d].Unlock()
	}
	return s
}

// oneWay is the propagation delay of a frame for client c.
func (b *Bridge) oneWay(c netip.Addr) time.Duration {
	if rtt, ok := b.opts.RTT[c]; ok {
		return rtt / 2
	}
	return b.opts.DefaultRTT / 2
}

// realtime runs the calling goroutine on its own thread under SCHED_FIFO
// until the returned function undoes both. The link must keep its delays
// while Chromium, nginx and tcpdump share two cores: at normal priority the
// bridge was seen scheduled tens of milliseconds late, jitter that the
// clients see but that a monitor can only take for a longer RTT. The thread
// is unlocked (not left to exit) because the testbed's processes die with
// the thread that forked them (Pdeathsig), which may have been this one.
func realtime() (undo func()) {
	runtime.LockOSThread()
	// Reset on fork: the Go runtime starts new threads from whichever
	// thread needs one, and a thread cloned from this one must not run
	// ordinary goroutines at the bridge's priority.
	err := unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: bridgeRTPriority,
		Flags: unix.SCHED_FLAG_RESET_ON_FORK}, 0)
	return func() {
		if err == nil {
			_ = unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_NORMAL}, 0)
		}
		runtime.UnlockOSThread()
	}
}

// minProcs is the GOMAXPROCS the bridge needs. Its threads run Go code,
// so besides the CPU (SCHED_FIFO gets them that) each needs one of the
// runtime's Ps whenever it returns from a blocking read or a sleep. With
// GOMAXPROCS at the machine's 2 cores, the Go clients, the analysis and
// the garbage collector of the same process held both Ps often enough that
// a frame left the bridge up to 50 ms late (measured with MeasureLink: p95
// 7 ms): network delay the clients saw and the server could not. 16 were
// not enough for the overloaded scenario's burst of two dozen clients
// (sends up to 20 ms late). With spare Ps a woken bridge thread finds one,
// and the kernel's real-time scheduling alone decides when it runs.
const minProcs = 64

var procsOnce sync.Once

func ensureSpareProcs() {
	procsOnce.Do(func() {
		if runtime.GOMAXPROCS(0) < minProcs {
			runtime.GOMAXPROCS(minProcs)
		}
	})
}

// bridgeRTPriority is above curl's (10) so the network stays ahead of the
// programs measuring it, and far below the kernel's own real-time threads.
const bridgeRTPriority = 20

// maxSleep bounds each sleep of a sender, so a frame queued meanwhile with
// an earlier release time (a client with a shorter delay) is late by at
// most this much.
const maxSleep = 300 * time.Microsecond

func (b *Bridge) read(ctx context.Context, d Direction) {
	defer b.done.Done()
	defer realtime()()
	fd := b.fds[d]
	buf := make([]byte, maxFrame)
	oob := make([]byte, 256)
	var lastAt time.Time
	for ctx.Err() == nil {
		n, oobn, _, from, err := unix.Recvmsg(fd, buf, oob, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			// A closed socket or vanished interface ends forwarding.
			return
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		f := &Frame{Dir: d, At: frameTime(oob[:oobn]), Data: append([]byte(nil), buf[:n]...)}
		// Frames leave in the order they came: a stamp never goes back
		// (a frame with no usable stamp takes the time it was read, which
		// may be later than the next one's).
		if f.At.Before(lastAt) {
			f.At = lastAt
		}
		lastAt = f.At
		b.noteLag(0, d, time.Since(f.At))
		parseFrame(f)
		lost := b.opts.Loss > 0 && !(b.opts.LossSparesSYN && f.SYN) && !(b.opts.LossToClientOnly && d == ToServer) &&
			b.rnd[d].Float64() < b.opts.Loss
		if lost {
			b.stats[stLost][d].Add(1)
			continue
		}
		if b.opts.Hook != nil && !b.opts.Hook(b, f) {
			b.stats[stHook][d].Add(1)
			continue
		}
		b.enqueue(f, f.At)
	}
}

// Inject schedules a frame as if it had arrived at `at` (not before now),
// subject to rate and delay but not to loss or the hook. For hooks.
func (b *Bridge) Inject(d Direction, data []byte, at time.Time) {
	f := &Frame{Dir: d, At: at, Data: append([]byte(nil), data...)}
	parseFrame(f)
	if now := time.Now(); f.At.Before(now) {
		f.At = now
	}
	b.stats[stInj][d].Add(1)
	b.enqueue(f, f.At)
}

func (b *Bridge) enqueue(f *Frame, at time.Time) {
	d := f.Dir
	b.lk[d].Lock()
	start := at
	if b.opts.RateBytes > 0 {
		if b.txEnd[d].After(start) {
			start = b.txEnd[d]
		}
		if start.Sub(at) > b.opts.MaxQueue {
			b.lk[d].Unlock()
			b.stats[stQueue][d].Add(1)
			return
		}
		ser := time.Duration(float64(len(f.Data)) / float64(b.opts.RateBytes) * float64(time.Second))
		start = start.Add(ser)
		b.txEnd[d] = start
	}
	b.seq[d]++
	b.q[d].Push(queued{f: f, release: start.Add(b.oneWay(f.Client)), seq: b.seq[d]})
	b.lk[d].Unlock()
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(b.wake[d], one[:])
}

// frameTime is when the kernel received a frame (SO_TIMESTAMPNS), so a
// reader thread scheduled late does not delay the frame; time.Now() if the
// stamp is missing or implausible.
func frameTime(oob []byte) time.Time {
	now := time.Now()
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return now
	}
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_SOCKET || m.Header.Type != unix.SO_TIMESTAMPNS || len(m.Data) < 16 {
			continue
		}
		ts := time.Unix(int64(binary.NativeEndian.Uint64(m.Data[0:8])), int64(binary.NativeEndian.Uint64(m.Data[8:16])))
		// A reader the VM stalled may be seconds behind; only a stamp
		// from the future or from long ago is implausible.
		if d := now.Sub(ts); d >= 0 && d < 10*time.Second {
			return ts
		}
	}
	return now
}

// send releases frames when due. It sleeps in the kernel on its real-time
// thread (nanosleep, or ppoll on the wake eventfd while the queue is
// empty) rather than on a Go timer or channel, so waking up does not
// depend on the Go scheduler.
func (b *Bridge) send(ctx context.Context, d Direction) {
	defer b.done.Done()
	defer realtime()()
	out := b.fds[1-d]
	var drain [8]byte
	for ctx.Err() == nil {
		b.lk[d].Lock()
		if len(b.q[d]) == 0 {
			b.lk[d].Unlock()
			pfd := []unix.PollFd{{Fd: int32(b.wake[d]), Events: unix.POLLIN}}
			// A fresh timeout each time: the ppoll system call writes
			// the time left back into it (once zero, it would spin).
			idle := unix.NsecToTimespec(rcvTimeout.Nanoseconds())
			_, _ = unix.Ppoll(pfd, &idle, nil)
			_, _ = unix.Read(b.wake[d], drain[:])
			continue
		}
		wait := time.Until(b.q[d][0].release)
		if wait <= 0 {
			b.noteLag(1, d, -wait)
			b.noteStall(d, b.q[d][0].release, -wait)
			f := b.q[d].Pop().f
			b.lk[d].Unlock()
			if _, err := unix.Write(out, f.Data); err != nil {
				b.stats[stSendErr][d].Add(1)
			} else {
				b.stats[stFwd][d].Add(1)
			}
			continue
		}
		b.lk[d].Unlock()
		ts := unix.NsecToTimespec(min(wait, maxSleep).Nanoseconds())
		_ = unix.Nanosleep(&ts, nil)
	}
}

// noteLag counts a late read (kind 0) or send (kind 1).
func (b *Bridge) noteLag(kind int, d Direction, lag time.Duration) {
	if lag <= time.Millisecond {
		return
	}
	b.lags[kind][d].Add(1)
	m := &b.lags[2+kind][d]
	for old := m.Load(); int64(lag) > old && !m.CompareAndSwap(old, int64(lag)); old = m.Load() {
	}
}

// noteStall logs that a frame released at release left lag late. The
// caller holds lk[d].
func (b *Bridge) noteStall(d Direction, release time.Time, lag time.Duration) {
	if lag <= time.Millisecond {
		return
	}
	st := Stall{release.UnixNano(), release.Add(lag).UnixNano()}
	log := b.stalls[d]
	if n := len(log); n > 0 && (st.From <= log[n-1].To || n == maxStalls) {
		log[n-1].From = min(log[n-1].From, st.From)
		log[n-1].To = max(log[n-1].To, st.To)
		return
	}
	b.stalls[d] = append(log, st)
}

// parseFrame fills the client address and TCP flags of an IPv4 frame; the
// client is the source towards the server and the destination back.
func parseFrame(f *Frame) {
	p := f.Data
	if len(p) < 14+20 || binary.BigEndian.Uint16(p[12:14]) != 0x0800 {
		return
	}
	ip := p[14:]
	ihl := int(ip[0]&0x0f) * 4
	if ip[0]>>4 != 4 || ihl < 20 || len(ip) < ihl {
		return
	}
	src, _ := netip.AddrFromSlice(ip[12:16])
	dst, _ := netip.AddrFromSlice(ip[16:20])
	f.Client = src
	if f.Dir == ToClient {
		f.Client = dst
	}
	if ip[9] != 6 || len(ip) < ihl+14 {
		return
	}
	tcp := ip[ihl:]
	f.TCP = true
	f.SrcPort = binary.BigEndian.Uint16(tcp[0:2])
	f.DstPort = binary.BigEndian.Uint16(tcp[2:4])
	flags := tcp[13]
	f.SYN, f.ACK, f.RST = flags&0x02 != 0, flags&0x10 != 0, flags&0x04 != 0
}

type queued struct {
	f       *Frame
	release time.Time
	seq     uint64
}

// Before orders frames by release time, then arrival: with per-client constant
// delays this keeps each client's frames in order per direction.
func (a queued) Before(b queued) bool {
	if !a.release.Equal(b.release) {
		return a.release.Before(b.release)
	}
	return a.seq < b.seq
}
