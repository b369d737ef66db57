package capture

import "errors"

// Source is one merged stream of decoded TCP packets from files or live
// interfaces. It is not safe for concurrent use, except Progress, which a
// progress bar may call from another goroutine.
type Source interface {
	// Next decodes the next TCP packet into p, reusing p's storage; p.Payload
	// is valid until the following call. Frames that are not decodable TCP
	// are counted in Stats and skipped. At the end Next returns io.EOF, or,
	// if a file was truncated or unreadable part way, an error wrapping
	// ErrTruncated (or the read error) after every good packet was returned.
	Next(p *Packet) error
	// Names are the file or interface names indexed by Packet.Interface.
	Names() []string
	// Stats returns decode counters, frames/bytes read and capture drops.
	// It neither allocates nor locks, so a packet loop may call it every few
	// packets: the Sources slice is the source's own and is overwritten by
	// the next call; copy it to keep it.
	Stats() Stats
	// Progress is bytes consumed and total bytes for files (compressed
	// bytes for gzip files); total is 0 for live capture.
	Progress() (done, total int64)
	// Close releases files and handles; for live capture it stops capturing.
	Close() error
}

// Stats describes a Source so far.
type Stats struct {
	Decode  DecodeStats   // decoder counters over all sources
	Sources []SourceStats // one per file or interface, indexed like Names
}

// SourceStats is what one file or interface contributed.
type SourceStats struct {
	Name    string
	Frames  uint64 // frames read
	Bytes   uint64 // captured bytes read (not wire length)
	Live    bool   // the counters below are meaningful only for live capture
	Sockets int    // live capture handles on it: AF_PACKET fanout sockets, or 1 for libpcap
	Capture CaptureStats
}

// CaptureStats are the kernel's counters for a live interface (pcap_stats,
// or PACKET_STATISTICS summed over its AF_PACKET sockets); on Linux
// Received counts packets that passed the filter.
type CaptureStats struct {
	Received  uint64 // packets that reached the capture buffer (or were dropped for want of room in it)
	Dropped   uint64 // dropped because the buffer was full (we were too slow)
	IfDropped uint64 // dropped by the interface or driver
	// Freezes counts the times an AF_PACKET ring was full and the kernel
	// froze it, dropping until a block was freed (TPACKET_V3).
	Freezes uint64
}

// Errors callers can test with errors.Is.
var (
	// ErrNotCapture means the file is neither pcap nor pcapng (after gunzip).
	ErrNotCapture = errors.New("not a pcap or pcapng file")
	// ErrTruncated means a file ended in the middle of a header or record:
	// its complete packets were delivered first.
	ErrTruncated = errors.New("capture file truncated")
)
