package capture

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"
	"testing/iotest"

	"github.com/gopacket/gopacket/layers"
)

// What is read ahead comes out byte for byte, whatever the sizes of the
// source's reads and of the caller's, and ends as the source ended.
func TestReadAheadSameBytes(t *testing.T) {
	data := make([]byte, 3<<20+17)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for _, tc := range []struct {
		name string
		src  func() io.Reader
	}{
		{"whole reads", func() io.Reader { return bytes.NewReader(data) }},
		{"half reads", func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) }},
		{"data with EOF", func() io.Reader { return iotest.DataErrReader(bytes.NewReader(data)) }},
	} {
		ra := newReadAhead(tc.src(), 64<<10, 3)
		var got bytes.Buffer
		buf := make([]byte, 7001)
		for {
			n, err := ra.Read(buf[:1+r.IntN(len(buf))])
			got.Write(buf[:n])
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		ra.close()
		if !bytes.Equal(got.Bytes(), data) {
			t.Errorf("%s: %d bytes read, not the %d of the source", tc.name, got.Len(), len(data))
		}
	}
}

// The source's error comes after all it read, as it gave it (a
// decompressor's unexpected end is not a clean one), and stays.
func TestReadAheadError(t *testing.T) {
	for _, want := range []error{io.ErrUnexpectedEOF, errors.New("disk on fire")} {
		src := io.MultiReader(bytes.NewReader(make([]byte, 100000)), iotest.ErrReader(want))
		ra := newReadAhead(src, 4096, 2)
		n, err := io.Copy(io.Discard, ra)
		if n != 100000 || !errors.Is(err, want) {
			t.Errorf("read %d bytes, error %v; want 100000 and %v", n, err, want)
		}
		if _, err := ra.Read(make([]byte, 10)); !errors.Is(err, want) {
			t.Errorf("read after the error: %v, want %v", err, want)
		}
		ra.close()
	}
}

// endless never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) { return len(p), nil }

// close stops a reader ahead of an endless source, mid-stream, and its
// goroutine has left when close returns; a second close is harmless.
func TestReadAheadCloseMidStream(t *testing.T) {
	ra := newReadAhead(endless{}, 4096, 4)
	if _, err := io.ReadFull(ra, make([]byte, 10000)); err != nil {
		t.Fatal(err)
	}
	ra.close()
	select {
	case <-ra.exited:
	default:
		t.Fatal("the goroutine is still running after close")
	}
	ra.close()
}

// Opening and closing capture files leaves no reader ahead running:
// gzip'd files read to their end, read halfway, cut short, next to
// plain ones, read by libpcap, and a set whose second file, gzip'd,
// fails to open.
func TestFilesLeaveNoGoroutine(t *testing.T) {
	recs, _ := ethRecs(t, t0)
	plain, gz, cut, bad := tmp(t, "a.pcap"), tmp(t, "b.pcap.gz"), tmp(t, "c.pcap"), tmp(t, "d.txt.gz")
	writePcap(t, plain, layers.LinkTypeEthernet, true, false, recs)
	writePcap(t, gz, layers.LinkTypeEthernet, true, true, recs)
	writePcap(t, cut, layers.LinkTypeEthernet, true, true, recs)
	truncate(t, cut, 3)
	// gzip'd, and larger than the chunks read ahead: its reader waits,
	// not ends.
	writeMaybeGz(t, bad, bytes.Repeat([]byte("not a capture "), 300000), true)
	before := runtime.NumGoroutine()
	for _, tc := range []struct {
		paths  []string
		reader FileReader
		whole  bool
	}{
		{[]string{plain, gz, cut}, ReaderPcapgo, true},
		{[]string{plain, gz}, ReaderPcapgo, false},
		{[]string{plain}, ReaderLibpcap, true},
	} {
		s, err := OpenFiles(tc.paths, FileOptions{Reader: tc.reader})
		if err != nil {
			t.Fatal(err)
		}
		if tc.whole {
			readAll(t, s)
		} else if err := s.Next(&Packet{}); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	if _, err := OpenFiles([]string{plain, bad}, FileOptions{}); err == nil {
		t.Fatal("a file that is no capture opened")
	}
	// close waits for each reader's goroutine, which may still be
	// leaving the scheduler as close returns.
	for range 1000 {
		if runtime.NumGoroutine() <= before {
			return
		}
		runtime.Gosched()
	}
	t.Errorf("%d goroutines after closing every file, %d before", runtime.NumGoroutine(), before)
}
