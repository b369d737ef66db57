// Package capture turns capture files and live interfaces into decoded TCP
// segments. It owns everything below TCP: link types, IP versions, TCP
// options, capture statistics and malformed-packet accounting.
//
// # Sources
//
// A Source is one stream of decoded packets. OpenFiles reads pcap and pcapng
// files, gzip'd or not (the format comes from the magic bytes, never the
// name), and merges several files by timestamp; OpenLive captures on
// interfaces with libpcap. Both are read the same way:
//
//	src, err := capture.OpenFiles([]string{"a.pcap", "b.pcapng.gz"}, capture.FileOptions{})
//	if err != nil {
//		return err
//	}
//	defer src.Close()
//	var p capture.Packet
//	for {
//		err := src.Next(&p)
//		if err == io.EOF {
//			break
//		}
//		if err != nil {
//			return err // errors.Is(err, capture.ErrTruncated): every good packet came first
//		}
//		use(&p) // p.Payload is valid until the next call
//	}
//
// # Zero copy
//
// Next fills a Packet the caller owns and p.Payload aliases the source's
// buffer, so the packet loop allocates nothing; copy what you keep. Stats
// neither allocates nor locks, so the loop may poll it every few packets.
//
// # Decoding
//
// A Decoder turns one frame of a given link type (Ethernet with VLAN tags,
// Linux cooked v1 and v2, BSD loopback, raw IPv4/IPv6) into a Packet. A
// frame that is not a decodable TCP segment is skipped and counted under a
// Reason (DecodeStats), never silently dropped: fragments, truncated
// headers, bad lengths and non-TCP traffic each have their own counter.
//
// What the packets are used for is in docs/timing.md and docs/pageviews.md
// in the repository.
package capture
