package capture

import (
	"io"
	"sync"
)

// readAhead reads its source in a goroutine of its own, a few chunks
// ahead of the caller, so that a gzip'd capture's decompression overlaps
// with decoding and tracking instead of taking turns with them on one
// core. Memory is bounded: the chunks are allocated once and recycled.
type readAhead struct {
	full chan readChunk // filled chunks, in order
	free chan []byte    // empty buffers for the goroutine to fill
	cur  []byte         // the rest of the chunk being read
	buf  []byte         // that chunk's buffer, to recycle
	err  error          // the source's error, once its last chunk is read

	stop     chan struct{} // closed by close: the goroutine leaves
	exited   chan struct{} // closed by the goroutine as it leaves
	stopOnce sync.Once
}

type readChunk struct {
	b   []byte
	err error // after b: the source's error (io.EOF at its end)
}

const (
	readAheadChunk  = 128 << 10
	readAheadChunks = 4
)

func newReadAhead(src io.Reader, chunkSize, chunks int) *readAhead {
	ra := &readAhead{
		full:   make(chan readChunk, chunks),
		free:   make(chan []byte, chunks),
		stop:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	for range chunks {
		ra.free <- make([]byte, chunkSize)
	}
	go ra.fill(src)
	return ra
}

// fill reads src into free buffers until it fails or ends, or close.
func (ra *readAhead) fill(src io.Reader) {
	defer close(ra.exited)
	for {
		var buf []byte
		select {
		case buf = <-ra.free:
		case <-ra.stop:
			return
		}
		n, err := readFull(src, buf)
		select {
		case ra.full <- readChunk{buf[:n], err}:
		case <-ra.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// readFull fills b from r, stopping early only on an error (io.EOF
// included), which it returns as r gave it: unlike io.ReadFull it keeps
// a decompressor's io.ErrUnexpectedEOF apart from a clean end.
func readFull(r io.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (ra *readAhead) Read(p []byte) (int, error) {
	for len(ra.cur) == 0 {
		if ra.buf != nil {
			ra.free <- ra.buf[:cap(ra.buf)] // never blocks: as many slots as buffers
			ra.buf = nil
		}
		if ra.err != nil {
			return 0, ra.err
		}
		c := <-ra.full
		ra.cur, ra.buf, ra.err = c.b, c.b, c.err
	}
	n := copy(p, ra.cur)
	ra.cur = ra.cur[n:]
	return n, nil
}

// close stops the goroutine and waits for it, so that the source (a
// file, a gzip reader) can be closed without a read under way.
func (ra *readAhead) close() {
	ra.stopOnce.Do(func() { close(ra.stop) })
	<-ra.exited
}
