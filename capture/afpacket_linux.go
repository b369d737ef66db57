package capture

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/afpacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcap"
	"golang.org/x/net/bpf"
)

// Interface hardware types (ARPHRD_*) whose AF_PACKET frames rtmon
// decodes: Ethernet and loopback frames carry an Ethernet header, a
// tunnel's none.
const (
	arphrdEther    = "1"
	arphrdLoopback = "772"
	arphrdNone     = "65534"
)

// afPacketLinkType is the link type of name's AF_PACKET frames; ok is
// false for an interface AF_PACKET does not serve here ("any", or a link
// type libpcap translates, such as a cooked or 802.11 one).
func afPacketLinkType(name string) (lt layers.LinkType, ok bool) {
	if name == "any" || name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return 0, false
	}
	b, err := os.ReadFile("/sys/class/net/" + name + "/type")
	if err != nil {
		return 0, false
	}
	switch strings.TrimSpace(string(b)) {
	case arphrdEther, arphrdLoopback:
		return layers.LinkTypeEthernet, true
	case arphrdNone:
		return layers.LinkTypeRaw, true
	}
	return 0, false
}

func afPacketApplies(name string) bool {
	_, ok := afPacketLinkType(name)
	return ok
}

// afReader is one TPACKET_V3 socket.
type afReader struct {
	tp *afpacket.TPacket
	lt layers.LinkType
	// since is when the filter was in place and the counters started:
	// the socket takes every frame from its creation, and the ones that
	// came before are neither filtered nor counted.
	since int64
}

func (r *afReader) ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error) {
	for {
		data, ci, err := r.tp.ZeroCopyReadPacketData()
		if errors.Is(err, afpacket.ErrTimeout) {
			err = errReadTimeout
		}
		if err != nil || ci.Timestamp.UnixNano() >= r.since {
			return data, ci, err
		}
	}
}

func (r *afReader) LinkType() layers.LinkType { return r.lt }
func (r *afReader) Close()                    { r.tp.Close() }

// Stats reads PACKET_STATISTICS, which the kernel resets on every read;
// the TPacket keeps the running sums.
func (r *afReader) Stats() (CaptureStats, error) {
	_, v3, err := r.tp.SocketStats()
	if err != nil {
		return CaptureStats{}, err
	}
	return CaptureStats{Received: uint64(v3.Packets()), Dropped: uint64(v3.Drops()), Freezes: uint64(v3.QueueFreezes())}, nil
}

// ringGeometry splits a ring of size bytes into blocks: 1 MiB blocks (a
// 64 KiB offloaded segment fits with room), smaller ones for a small ring
// so it still has 8 blocks to rotate.
func ringGeometry(size int) (blockSize, blocks int) {
	page := os.Getpagesize()
	blockSize = 1 << 20
	if size < 8*blockSize {
		blockSize = max(page, size/8/page*page)
	}
	return blockSize, max(2, size/blockSize)
}

// openAFPacket opens o.Fanout TPACKET_V3 sockets on name, with the BPF
// filter compiled once (its return value cuts packets at SnapLen) and, for
// more than one, joined in a fanout group by flow hash.
func openAFPacket(name string, o LiveOptions) (readers []packetReader, err error) {
	lt, ok := afPacketLinkType(name)
	if !ok {
		return nil, fmt.Errorf("interface %s: AF_PACKET capture needs an Ethernet, loopback or raw-IP interface (use the libpcap reader)", name)
	}
	insns, err := pcap.CompileBPFFilter(lt, o.SnapLen, o.Filter)
	if err != nil {
		return nil, fmt.Errorf("interface %s: filter %q: %w", name, o.Filter, err)
	}
	raw := make([]bpf.RawInstruction, len(insns))
	for i, in := range insns {
		raw[i] = bpf.RawInstruction{Op: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	defer func() {
		if err != nil {
			for _, r := range readers {
				r.Close()
			}
			readers = nil
		}
	}()
	blockSize, blocks := ringGeometry(o.BufferSize)
	for range o.Fanout {
		tp, err := afpacket.NewTPacket(afpacket.OptInterface(name), afpacket.OptTPacketVersion(afpacket.TPacketVersion3),
			afpacket.OptBlockSize(blockSize), afpacket.OptFrameSize(min(blockSize, 1<<11)), afpacket.OptNumBlocks(blocks),
			afpacket.OptBlockTimeout(o.BlockTimeout), afpacket.OptPollTimeout(o.Timeout), afpacket.OptAddVLANHeader(true))
		if err != nil {
			return readers, fmt.Errorf("open interface %s (AF_PACKET): %w", name, err)
		}
		r := &afReader{tp: tp, lt: lt}
		readers = append(readers, r)
		if err := tp.SetBPF(raw); err != nil {
			return readers, fmt.Errorf("interface %s: set filter: %w", name, err)
		}
		if o.Promiscuous {
			if err := tp.SetPromiscuous(true); err != nil {
				return readers, fmt.Errorf("interface %s: set promiscuous mode: %w", name, err)
			}
		}
		// Counting starts now, not at socket creation (before the filter),
		// and the frames the ring took before are skipped: so the counters
		// add up (received = delivered + dropped) and the filter holds.
		r.since = time.Now().UnixNano()
		if err := tp.InitSocketStats(); err != nil {
			return readers, fmt.Errorf("interface %s: socket statistics: %w", name, err)
		}
	}
	if o.Fanout > 1 {
		if err := joinFanout(readers, name); err != nil {
			return readers, err
		}
	}
	return readers, nil
}

// joinFanout puts the sockets in a new fanout group, hashing flows
// symmetrically. Not with the defragment flag: the kernel then holds IPv4
// fragments for reassembly and a fragment that never completes (crafted,
// or its mates lost) reaches no socket and no counter; rtmon counts
// fragments as skipped instead. The group id is host-wide: one another
// process holds fails the first join, and the next id is tried.
func joinFanout(readers []packetReader, name string) error {
	id := uint16(rand.Uint32())
	var err error
	for range 64 {
		if err = readers[0].(*afReader).tp.SetFanout(afpacket.FanoutHash, id); err == nil {
			break
		}
		id++
	}
	if err != nil {
		return fmt.Errorf("interface %s: fanout: %w", name, err)
	}
	for _, r := range readers[1:] {
		if err := r.(*afReader).tp.SetFanout(afpacket.FanoutHash, id); err != nil {
			return fmt.Errorf("interface %s: join fanout group %d: %w", name, id, err)
		}
	}
	return nil
}
