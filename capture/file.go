package capture

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcap"
	"github.com/gopacket/gopacket/pcapgo"
)

// FileReader selects the library that parses capture files.
type FileReader int

const (
	// ReaderPcapgo is gopacket's pure-Go reader. It is the default because it
	// measured faster than libpcap here (see BenchmarkReadFile_*: no cgo call
	// per packet) and it reads gzip'd files.
	ReaderPcapgo FileReader = iota
	// ReaderLibpcap is libpcap's offline reader (pcap_open_offline). Gzip'd
	// files still go through pcapgo, since libpcap cannot read them.
	ReaderLibpcap
)

// FileOptions configures OpenFiles. The zero value is ready to use.
type FileOptions struct {
	Reader FileReader
	// BufferSize is the read buffer per file; 0 means 1 MiB.
	BufferSize int
}

// Magic numbers, read little-endian from the first four bytes.
const (
	magicPcapMicro    = 0xa1b2c3d4
	magicPcapNano     = 0xa1b23c4d
	magicPcapMicroBE  = 0xd4c3b2a1
	magicPcapNanoBE   = 0x4d3cb2a1
	magicPcapNG       = 0x0a0d0d0a
	gzipMagic0, gzip1 = 0x1f, 0x8b
)

// countingReader counts bytes read from the file for Progress.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// errRecorder remembers a decompression error: pcapgo's pcapng reader
// turns a stream cut at a block boundary into a clean io.EOF, and a gzip
// stream missing its trailer is exactly that.
type errRecorder struct {
	r   io.Reader
	err error
}

func (e *errRecorder) Read(b []byte) (int, error) {
	n, err := e.r.Read(b)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

// fileReader reads raw frames from one file, holding the next one ("head")
// so the merge can compare timestamps before decoding.
type fileReader struct {
	idx   int
	name  string
	f     *os.File
	cr    *countingReader
	gz    *gzip.Reader
	gzErr *errRecorder
	// gzAhead decompresses a gzip'd file ahead of decoding.
	gzAhead *readAhead
	size    int64
	pcap    *pcapgo.Reader
	ng      *pcapgo.NgReader
	lp      *pcap.Handle
	lt      layers.LinkType
	ngLT    []layers.LinkType // pcapng link type per interface id
	lpRead  atomic.Int64      // approximate bytes consumed by libpcap

	// head frame; data is owned by the reader until the next read
	data []byte
	ts   int64
	hlt  layers.LinkType

	frames, bytes atomic.Uint64
}

func openFile(idx int, path string, opts FileOptions) (*fileReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	fr := &fileReader{idx: idx, name: path, f: f}
	if err := fr.init(opts); err != nil {
		fr.close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return fr, nil
}

func (fr *fileReader) init(opts FileOptions) error {
	st, err := fr.f.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("is a directory: %w", ErrNotCapture)
	}
	fr.size = st.Size()
	size := opts.BufferSize
	if size <= 0 {
		size = 1 << 20
	}
	fr.cr = &countingReader{r: fr.f}
	br := bufio.NewReaderSize(fr.cr, size)
	var magic []byte
	if magic, err = br.Peek(2); err == nil && magic[0] == gzipMagic0 && magic[1] == gzip1 {
		if fr.gz, err = gzip.NewReader(br); err != nil {
			return truncErr(fmt.Errorf("gzip: %w", err))
		}
		// A second buffer of the same size: pcapgo's readers reuse a
		// *bufio.Reader that is big enough instead of wrapping it again.
		fr.gzErr = &errRecorder{r: fr.gz}
		// Decompression runs in a goroutine of its own, ahead of
		// decoding (see readAhead). A plain file is not read ahead: its
		// reads are copies from the page cache, and one more copy cost
		// more than the overlap gave (5% slower end to end).
		fr.gzAhead = newReadAhead(fr.gzErr, readAheadChunk, readAheadChunks)
		br = bufio.NewReaderSize(fr.gzAhead, size)
	}
	magic, err = br.Peek(4)
	if err != nil {
		if len(magic) == 0 && errors.Is(err, io.EOF) {
			return fmt.Errorf("empty file: %w", ErrNotCapture)
		}
		if isCaptureMagicPrefix(magic) {
			return truncErr(err)
		}
		return ErrNotCapture
	}
	m := binary.LittleEndian.Uint32(magic)
	switch m {
	case magicPcapMicro, magicPcapNano, magicPcapMicroBE, magicPcapNanoBE, magicPcapNG:
	default:
		return ErrNotCapture
	}

	// pcapgo parses the file header even when libpcap reads the packets: its
	// errors are typed, libpcap's are text.
	if m == magicPcapNG {
		ngOpts := pcapgo.DefaultNgReaderOptions
		// Keep packets of every interface even when link types differ
		// (e.g. Wireshark on eth0 and "any"); we look the type up per id.
		ngOpts.WantMixedLinkType = true
		if fr.ng, err = pcapgo.NewNgReader(br, ngOpts); err != nil {
			return truncErr(err)
		}
		fr.refreshNgLinkTypes()
	} else {
		if fr.pcap, err = pcapgo.NewReader(br); err != nil {
			return truncErr(err)
		}
		fr.lt = fr.pcap.LinkType()
	}
	if opts.Reader == ReaderLibpcap && fr.gz == nil {
		// libpcap reads the file itself; pcapgo only vetted its header.
		fr.pcap, fr.ng = nil, nil
		if fr.lp, err = pcap.OpenOffline(fr.name); err != nil {
			return fmt.Errorf("libpcap: %w", err)
		}
		fr.lt = fr.lp.LinkType()
	}
	return nil
}

func isCaptureMagicPrefix(b []byte) bool {
	var full [4]byte
	for _, m := range []uint32{magicPcapMicro, magicPcapNano, magicPcapMicroBE, magicPcapNanoBE, magicPcapNG} {
		binary.LittleEndian.PutUint32(full[:], m)
		if len(b) > 0 && bytes.HasPrefix(full[:], b) {
			return true
		}
	}
	return false
}

// truncErr marks end-of-data in the middle of a structure as ErrTruncated.
func truncErr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %w", ErrTruncated, err)
	}
	return err
}

// libpcapReadErr types a libpcap read failure. gopacket returns only a
// return code and libpcap's reason is text, so pcapgo reads the file again
// up to the frame libpcap failed on: if the data ends inside that frame, the
// file is truncated. The second pass happens only on this error path of the
// non-default reader.
func (fr *fileReader) libpcapReadErr(code error) error {
	err := fmt.Errorf("%w: %v", code, fr.lp.Error())
	if endsWithin(fr.name, fr.frames.Load()) {
		return fmt.Errorf("%w: %w", ErrTruncated, err)
	}
	return err
}

// endsWithin reports whether pcapgo finds the file at path cut off within
// its first frames+1 frames.
func endsWithin(path string, frames uint64) bool {
	g, err := openFile(0, path, FileOptions{Reader: ReaderPcapgo, BufferSize: 64 << 10})
	if err != nil {
		return errors.Is(err, ErrTruncated)
	}
	defer g.close()
	for range frames + 1 {
		if err := g.read(); err != nil {
			return errors.Is(err, ErrTruncated)
		}
	}
	return false
}

func (fr *fileReader) refreshNgLinkTypes() {
	n := fr.ng.NInterfaces()
	fr.ngLT = fr.ngLT[:0]
	for i := 0; i < n; i++ {
		ifc, err := fr.ng.Interface(i)
		if err != nil {
			break
		}
		fr.ngLT = append(fr.ngLT, ifc.LinkType)
	}
}

// read advances to the next frame. It returns io.EOF at a clean end and a
// wrapped error (ErrTruncated for a cut-off record) otherwise.
func (fr *fileReader) read() error {
	var err error
	switch {
	case fr.pcap != nil:
		data, ci, e := fr.pcap.ZeroCopyReadPacketData()
		fr.data, fr.ts, fr.hlt, err = data, ci.Timestamp.UnixNano(), fr.lt, e
	case fr.ng != nil:
		data, ci, e := fr.ng.ZeroCopyReadPacketData()
		if e == nil {
			id := ci.InterfaceIndex
			if id >= len(fr.ngLT) || fr.ng.NInterfaces() != len(fr.ngLT) {
				fr.refreshNgLinkTypes()
			}
			fr.hlt = layers.LinkType(0xffff) // unknown: counted as unsupported
			if id < len(fr.ngLT) {
				fr.hlt = fr.ngLT[id]
			}
		}
		fr.data, fr.ts, err = data, ci.Timestamp.UnixNano(), e
	default:
		data, ci, e := fr.lp.ZeroCopyReadPacketData()
		fr.data, fr.ts, fr.hlt, err = data, ci.Timestamp.UnixNano(), fr.lt, e
		switch {
		case e == nil:
			fr.lpRead.Add(int64(16 + ci.CaptureLength)) // record header + data
		case e == io.EOF:
			fr.lpRead.Store(fr.size)
		default:
			err = fr.libpcapReadErr(e)
		}
	}
	if err == io.EOF && fr.gzErr != nil && fr.gzErr.err != nil {
		err = fr.gzErr.err
	}
	switch {
	case err == nil:
		fr.frames.Add(1)
		fr.bytes.Add(uint64(len(fr.data)))
		return nil
	case err == io.EOF:
		return io.EOF
	}
	return fmt.Errorf("read %s after %d frames: %w", fr.name, fr.frames.Load(), truncErr(err))
}

func (fr *fileReader) done() int64 {
	if fr.lp != nil {
		return min(fr.lpRead.Load(), fr.size)
	}
	return fr.cr.n.Load()
}

func (fr *fileReader) close() error {
	if fr.lp != nil {
		fr.lp.Close()
	}
	// The reader ahead stops before what it reads from is closed.
	if fr.gzAhead != nil {
		fr.gzAhead.close()
	}
	if fr.gz != nil {
		fr.gz.Close()
	}
	return fr.f.Close()
}

// fileSource merges several files by timestamp.
type fileSource struct {
	files []*fileReader
	heap  []*fileReader // min-heap on (ts, idx) of files with a head frame
	stale *fileReader   // file whose head was returned last; advance lazily
	dec   *Decoder
	errs  []error
	end   error // sticky final result
	names []string
	total int64
	stats []SourceStats // reused by Stats
}

// OpenFiles opens capture files (pcap or pcapng, optionally gzip'd; the
// format is detected from magic bytes) and merges them into one stream in
// timestamp order, ties broken by file order. Packet.Interface is the index
// in paths. A file that cannot be opened fails the whole call.
func OpenFiles(paths []string, opts FileOptions) (Source, error) {
	if len(paths) == 0 {
		return nil, errors.New("open capture files: no files given")
	}
	s := &fileSource{dec: NewDecoder()}
	for i, p := range paths {
		fr, err := openFile(i, p, opts)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.files = append(s.files, fr)
		s.names = append(s.names, p)
		s.total += fr.size
	}
	for _, fr := range s.files {
		s.pull(fr)
	}
	return s, nil
}

// pull reads fr's next frame and puts it on the heap, or records why not.
func (s *fileSource) pull(fr *fileReader) {
	if err := fr.read(); err != nil {
		if err != io.EOF {
			s.errs = append(s.errs, err)
		}
		return
	}
	s.heap = append(s.heap, fr)
	s.up(len(s.heap) - 1)
}

func less(a, b *fileReader) bool {
	return a.ts < b.ts || (a.ts == b.ts && a.idx < b.idx)
}

func (s *fileSource) up(i int) {
	h := s.heap
	for i > 0 {
		parent := (i - 1) / 2
		if !less(h[i], h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (s *fileSource) down(i int) {
	h := s.heap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && less(h[r], h[l]) {
			m = r
		}
		if !less(h[m], h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// advanceTop replaces the heap top's frame by its next one.
func (s *fileSource) advanceTop() {
	fr := s.heap[0]
	if err := fr.read(); err != nil {
		if err != io.EOF {
			s.errs = append(s.errs, err)
		}
		last := len(s.heap) - 1
		s.heap[0] = s.heap[last]
		s.heap[last] = nil
		s.heap = s.heap[:last]
	}
	if len(s.heap) > 0 {
		s.down(0)
	}
}

func (s *fileSource) Next(p *Packet) error {
	for {
		if s.stale != nil {
			s.stale = nil
			s.advanceTop() // the stale file is still the top: nothing moved since
		}
		if len(s.heap) == 0 {
			if s.end == nil {
				s.end = io.EOF
				if len(s.errs) > 0 {
					s.end = errors.Join(s.errs...)
				}
			}
			return s.end
		}
		fr := s.heap[0]
		s.stale = fr
		if s.dec.Decode(fr.hlt, fr.data, p) {
			p.Timestamp = fr.ts
			p.Interface = fr.idx
			return nil
		}
	}
}

func (s *fileSource) Names() []string { return s.names }

func (s *fileSource) Stats() Stats {
	s.stats = s.stats[:0]
	for _, fr := range s.files {
		s.stats = append(s.stats, SourceStats{Name: fr.name, Frames: fr.frames.Load(), Bytes: fr.bytes.Load()})
	}
	return Stats{Decode: s.dec.Stats(), Sources: s.stats}
}

func (s *fileSource) Progress() (done, total int64) {
	for _, fr := range s.files {
		done += fr.done()
	}
	return done, s.total
}

func (s *fileSource) Close() error {
	var errs []error
	for _, fr := range s.files {
		if err := fr.close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", fr.name, err))
		}
	}
	s.heap = nil // Stats still works after Close
	return errors.Join(errs...)
}
