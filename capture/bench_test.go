package capture

import (
	"io"
	"os"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
)

func benchDecode(b *testing.B, lt layers.LinkType, frames [][]byte) {
	d := NewDecoder()
	var p Packet
	for _, f := range frames {
		d.Decode(lt, f, &p)
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		if !d.Decode(lt, frames[n%len(frames)], &p) {
			b.Fatal("not decoded")
		}
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "pkts/s")
}

func BenchmarkDecode(b *testing.B) {
	data := segs[2]
	data.payload = make([]byte, 1448)
	ack := segs[3]
	ack.sack = nil
	b.Run("eth-ipv4-data", func(b *testing.B) { benchDecode(b, layers.LinkTypeEthernet, [][]byte{ethFrame(b, data.ip(b))}) })
	b.Run("eth-ipv4-ack", func(b *testing.B) { benchDecode(b, layers.LinkTypeEthernet, [][]byte{ethFrame(b, ack.ip(b))}) })
	b.Run("eth-ipv4-syn-options", func(b *testing.B) { benchDecode(b, layers.LinkTypeEthernet, [][]byte{ethFrame(b, segs[0].ip(b))}) })
	b.Run("vlan-ipv4", func(b *testing.B) { benchDecode(b, layers.LinkTypeEthernet, [][]byte{vlanFrame(b, data.ip(b))}) })
	b.Run("sll2-ipv6", func(b *testing.B) { benchDecode(b, layers.LinkTypeLinuxSLL2, [][]byte{sll2Frame(b, segs[4].ip(b))}) })
	b.Run("raw-ipv6-ext", func(b *testing.B) { benchDecode(b, layers.LinkTypeRaw, [][]byte{segs[6].ip(b)}) })
	b.Run("eth-mixed", func(b *testing.B) {
		var fs [][]byte
		for _, s := range segs {
			if !s.v6ext {
				fs = append(fs, ethFrame(b, s.ip(b)))
			}
		}
		benchDecode(b, layers.LinkTypeEthernet, fs)
	})
}

const benchPackets = 100_000

// benchFile writes ~100k Ethernet frames: per request, one 1514-byte data
// segment and one 66-byte ACK, like a download (mean ~790 bytes).
func benchFile(b *testing.B, gz bool) (string, int64) {
	b.Helper()
	data := segs[2]
	data.payload = make([]byte, 1448)
	ack := segs[3]
	ack.sack = nil
	frames := [][]byte{ethFrame(b, data.ip(b)), ethFrame(b, ack.ip(b))}
	recs := make([]rec, benchPackets)
	for i := range recs {
		recs[i] = rec{ts: t0.Add(time.Duration(i) * time.Microsecond), data: frames[i%2], lt: layers.LinkTypeEthernet}
	}
	path := tmp(b, "bench.pcap")
	writePcap(b, path, layers.LinkTypeEthernet, true, gz, recs)
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return path, fi.Size()
}

func benchRead(b *testing.B, reader FileReader, gz bool) {
	path, size := benchFile(b, gz)
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	var total int
	for b.Loop() {
		s, err := OpenFiles([]string{path}, FileOptions{Reader: reader})
		if err != nil {
			b.Fatal(err)
		}
		var p Packet
		n := 0
		for {
			if err := s.Next(&p); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
			n++
		}
		s.Close()
		if n != benchPackets {
			b.Fatalf("%d packets", n)
		}
		total += n
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "pkts/s")
	b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(total), "ns/pkt")
}

// End to end: open, read, decode every packet of a 100k-packet file.
func BenchmarkReadFile_pcapgo(b *testing.B)      { benchRead(b, ReaderPcapgo, false) }
func BenchmarkReadFile_libpcap(b *testing.B)     { benchRead(b, ReaderLibpcap, false) }
func BenchmarkReadFile_pcapgo_gzip(b *testing.B) { benchRead(b, ReaderPcapgo, true) }
