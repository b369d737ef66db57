// Package bench holds the pieces of `rtmon bench`: workload parameters and
// their sidecar, the HTTPS capture and its key log, pcap prefix cutting,
// child-process measurement, the result table and the per-connection
// memory measurement.
package bench

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// FileInfo counts the packets and bytes of a classic pcap file.
type FileInfo struct {
	Packets int64
	Bytes   int64 // file size, headers included
}

const (
	pcapHeaderLen = 24
	recHeaderLen  = 16
)

// pcapOrder returns the byte order of a classic pcap global header; pcapng is
// not handled because the benchmark only cuts files synth wrote as pcap.
func pcapOrder(h []byte) (binary.ByteOrder, error) {
	switch binary.LittleEndian.Uint32(h) {
	case 0xa1b2c3d4, 0xa1b23c4d:
		return binary.LittleEndian, nil
	case 0xd4c3b2a1, 0x4d3cb2a1:
		return binary.BigEndian, nil
	}
	return nil, fmt.Errorf("not a classic pcap file (magic %#x)", h[:4])
}

// CutPrefix copies src's global header and its records, whole, while the
// output stays within maxBytes, so the prefix is a valid capture of the first
// packets of the same workload. maxBytes <= 0 copies everything.
func CutPrefix(dst io.Writer, src io.Reader, maxBytes int64) (FileInfo, error) {
	br := bufio.NewReaderSize(src, 1<<20)
	var info FileInfo
	hdr := make([]byte, pcapHeaderLen)
	if _, err := io.ReadFull(br, hdr); err != nil {
		return info, fmt.Errorf("reading pcap header: %w", err)
	}
	order, err := pcapOrder(hdr)
	if err != nil {
		return info, err
	}
	if _, err := dst.Write(hdr); err != nil {
		return info, fmt.Errorf("writing pcap header: %w", err)
	}
	info.Bytes = pcapHeaderLen
	rec := make([]byte, 0, 1<<16)
	for {
		rec = rec[:recHeaderLen]
		if _, err := io.ReadFull(br, rec); err != nil {
			if errors.Is(err, io.EOF) {
				return info, nil
			}
			return info, fmt.Errorf("record %d header: %w", info.Packets, err)
		}
		n := int(order.Uint32(rec[8:12]))
		if maxBytes > 0 && info.Bytes+int64(recHeaderLen+n) > maxBytes {
			return info, nil
		}
		if cap(rec) < recHeaderLen+n {
			rec = append(rec[:cap(rec)], make([]byte, recHeaderLen+n-cap(rec))...)
		}
		rec = rec[:recHeaderLen+n]
		if _, err := io.ReadFull(br, rec[recHeaderLen:]); err != nil {
			return info, fmt.Errorf("record %d data: %w", info.Packets, err)
		}
		if _, err := dst.Write(rec); err != nil {
			return info, fmt.Errorf("writing record %d: %w", info.Packets, err)
		}
		info.Packets++
		info.Bytes += int64(len(rec))
	}
}

// CutPrefixFile writes the prefix of src to a new file dst (see CutPrefix).
func CutPrefixFile(dst, src string, maxBytes int64) (FileInfo, error) {
	in, err := os.Open(src)
	if err != nil {
		return FileInfo{}, fmt.Errorf("cut prefix: %w", err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return FileInfo{}, fmt.Errorf("cut prefix: %w", err)
	}
	bw := bufio.NewWriterSize(out, 1<<20)
	info, err := CutPrefix(bw, in, maxBytes)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return info, fmt.Errorf("cut prefix of %s to %s: %w", src, dst, err)
	}
	return info, nil
}

// ScanFile counts the packets of a pcap file without copying it.
func ScanFile(path string) (FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return FileInfo{}, fmt.Errorf("scan: %w", err)
	}
	defer f.Close()
	info, err := CutPrefix(io.Discard, f, 0)
	if err != nil {
		return info, fmt.Errorf("scan %s: %w", path, err)
	}
	return info, nil
}
