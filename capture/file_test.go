package capture

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)

// ethRecs frames every test segment as Ethernet, 1.000001001 s apart, plus a
// UDP frame the source must skip.
func ethRecs(t testing.TB, start time.Time) ([]rec, []Packet) {
	var recs []rec
	var want []Packet
	for i, s := range segs {
		ts := start.Add(time.Duration(i) * 1000001001)
		recs = append(recs, rec{ts: ts, data: ethFrame(t, s.ip(t)), lt: layers.LinkTypeEthernet})
		w := s.want()
		w.Timestamp = ts.UnixNano()
		want = append(want, w)
	}
	recs = append(recs, rec{ts: start.Add(time.Hour), data: udpFrame(t), lt: layers.LinkTypeEthernet})
	return recs, want
}

func TestFilesFormats(t *testing.T) {
	for _, format := range []string{"pcap-us", "pcap-ns", "pcapng"} {
		for _, gz := range []bool{false, true} {
			for _, reader := range []FileReader{ReaderPcapgo, ReaderLibpcap} {
				name := fmt.Sprintf("%s/gz=%v/reader=%d", format, gz, reader)
				t.Run(name, func(t *testing.T) {
					recs, want := ethRecs(t, t0)
					path := tmp(t, "capture.bin") // extension says nothing: magic decides
					switch format {
					case "pcap-us":
						writePcap(t, path, layers.LinkTypeEthernet, false, gz, recs)
						for i := range want { // µs files lose the last three digits
							want[i].Timestamp = want[i].Timestamp / 1000 * 1000
						}
					case "pcap-ns":
						writePcap(t, path, layers.LinkTypeEthernet, true, gz, recs)
					case "pcapng":
						writePcapng(t, path, gz, recs)
					}
					s, err := OpenFiles([]string{path}, FileOptions{Reader: reader})
					if err != nil {
						t.Fatal(err)
					}
					defer s.Close()
					got, err := readAll(t, s)
					if err != io.EOF {
						t.Fatalf("end: %v", err)
					}
					if len(got) != len(want) {
						t.Fatalf("%d packets, want %d", len(got), len(want))
					}
					for i := range got {
						samePacket(t, fmt.Sprint("packet ", i), got[i], want[i])
					}
					st := s.Stats()
					if st.Decode.TCP != uint64(len(want)) || st.Decode.Skipped[ReasonNotTCP] != 1 ||
						len(st.Sources) != 1 || st.Sources[0].Frames != uint64(len(recs)) || st.Sources[0].Name != path {
						t.Errorf("stats %+v", st)
					}
					done, total := s.Progress()
					fi, _ := os.Stat(path)
					if total != fi.Size() || done != total {
						t.Errorf("progress %d/%d, file %d bytes", done, total, fi.Size())
					}
					if err := s.Next(&Packet{}); err != io.EOF {
						t.Errorf("after end: %v", err)
					}
				})
			}
		}
	}
}

// A pcapng file may hold interfaces of different link types.
func TestFilesPcapngMixedLinkTypes(t *testing.T) {
	var recs []rec
	var want []Packet
	for i, fr := range framings {
		s := segs[i%len(segs)]
		ts := t0.Add(time.Duration(i) * time.Millisecond)
		lt := fr.lt
		recs = append(recs, rec{ts: ts, data: fr.f(t, s.ip(t)), lt: lt})
		w := s.want()
		w.Timestamp = ts.UnixNano()
		want = append(want, w)
	}
	path := tmp(t, "mixed.pcapng")
	writePcapng(t, path, false, recs)
	s, err := OpenFiles([]string{path}, FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := readAll(t, s)
	if err != io.EOF || len(got) != len(want) {
		t.Fatalf("%d packets, end %v; stats %v", len(got), err, s.Stats().Decode)
	}
	for i := range got {
		samePacket(t, framings[i].name, got[i], want[i])
	}
}

func TestFilesMerge(t *testing.T) {
	dir := t.TempDir()
	// Three files whose packets interleave; file 2 has a tie with file 0.
	starts := []time.Time{t0, t0.Add(300 * time.Millisecond), t0.Add(2000002002)}
	var paths []string
	for i, st := range starts {
		recs, _ := ethRecs(t, st)
		p := fmt.Sprintf("%s/f%d", dir, i)
		switch i {
		case 0:
			writePcap(t, p, layers.LinkTypeEthernet, true, false, recs)
		case 1:
			writePcapng(t, p, true, recs)
		case 2:
			writePcap(t, p, layers.LinkTypeEthernet, true, true, recs)
		}
		paths = append(paths, p)
	}
	s, err := OpenFiles(paths, FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := s.Names(); len(n) != 3 || n[1] != paths[1] {
		t.Errorf("Names %v", n)
	}
	got, err := readAll(t, s)
	if err != io.EOF {
		t.Fatal(err)
	}
	if len(got) != 3*len(segs) {
		t.Fatalf("%d packets", len(got))
	}
	perFile := map[int]int{}
	for i, p := range got {
		if i > 0 {
			prev := got[i-1]
			if p.Timestamp < prev.Timestamp || p.Timestamp == prev.Timestamp && p.Interface < prev.Interface {
				t.Errorf("packet %d (file %d, %d) before packet %d (file %d, %d)", i, p.Interface, p.Timestamp, i-1, prev.Interface, prev.Timestamp)
			}
		}
		// Each file's packets keep their order: they are segs in sequence.
		samePacket(t, fmt.Sprintf("file %d packet %d", p.Interface, perFile[p.Interface]), withoutTime(p), withoutTime(segs[perFile[p.Interface]].want()))
		perFile[p.Interface]++
	}
	if got[0].Interface != 0 || got[1].Interface != 1 {
		t.Errorf("first packets from files %d, %d", got[0].Interface, got[1].Interface)
	}
}

func withoutTime(p Packet) Packet { p.Timestamp, p.Interface = 0, 0; return p }

// truncate cuts the file n bytes short, leaving a partial last record.
func truncate(t testing.TB, path string, n int64) {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()-n); err != nil {
		t.Fatal(err)
	}
}

func TestFilesTruncated(t *testing.T) {
	recs, want := ethRecs(t, t0)
	recs = recs[:len(segs)] // no UDP: the last record is a TCP packet
	cases := []struct {
		name   string
		write  func(path string)
		cut    int64
		reader FileReader
		good   int
	}{
		{"pcap mid data", func(p string) { writePcap(t, p, layers.LinkTypeEthernet, true, false, recs) }, 5, ReaderPcapgo, len(recs) - 1},
		{"pcap mid header", func(p string) {
			writePcap(t, p, layers.LinkTypeEthernet, true, false, recs)
		}, int64(len(recs[len(recs)-1].data) + 8), ReaderPcapgo, len(recs) - 1},
		{"pcapng", func(p string) { writePcapng(t, p, false, recs) }, 7, ReaderPcapgo, len(recs) - 1},
		{"pcap gzip", func(p string) { writePcap(t, p, layers.LinkTypeEthernet, true, true, recs) }, 3, ReaderPcapgo, -1},
		{"pcapng gzip", func(p string) { writePcapng(t, p, true, recs) }, 3, ReaderPcapgo, -1},
		{"libpcap pcap", func(p string) { writePcap(t, p, layers.LinkTypeEthernet, true, false, recs) }, 5, ReaderLibpcap, len(recs) - 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := tmp(t, "cut.pcap")
			c.write(path)
			truncate(t, path, c.cut)
			s, err := OpenFiles([]string{path}, FileOptions{Reader: c.reader})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			got, err := readAll(t, s)
			if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), path) {
				t.Fatalf("end error %v, want ErrTruncated naming the file", err)
			}
			if c.good >= 0 && len(got) != c.good {
				t.Fatalf("%d packets before the error, want %d", len(got), c.good)
			}
			// gzip cuts the trailer: every packet may survive, never more.
			if c.good < 0 && len(got) < len(recs)-1 {
				t.Fatalf("%d packets before the error, want >= %d", len(got), len(recs)-1)
			}
			for i := range got {
				samePacket(t, fmt.Sprint("packet ", i), got[i], want[i])
			}
			if err2 := s.Next(&Packet{}); !errors.Is(err2, ErrTruncated) {
				t.Errorf("error not sticky: %v", err2)
			}
		})
	}
}

// A truncated file does not stop the merge: the other files' packets come
// first, the error last.
func TestFilesMergeWithTruncated(t *testing.T) {
	recs, _ := ethRecs(t, t0)
	recs = recs[:len(segs)]
	good, bad := tmp(t, "good"), tmp(t, "bad")
	writePcap(t, good, layers.LinkTypeEthernet, true, false, recs)
	writePcap(t, bad, layers.LinkTypeEthernet, true, false, recs)
	truncate(t, bad, 5)
	s, err := OpenFiles([]string{bad, good}, FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := readAll(t, s)
	if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("end: %v", err)
	}
	if len(got) != 2*len(recs)-1 {
		t.Fatalf("%d packets, want %d", len(got), 2*len(recs)-1)
	}
}

func TestFilesErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("hello, this is text and not a capture"))
	zw.Close()
	recs, _ := ethRecs(t, t0)
	good := dir + "/good.pcap"
	writePcap(t, good, layers.LinkTypeEthernet, false, false, recs)
	full, _ := os.ReadFile(good)

	for _, c := range []struct {
		name string
		path string
		is   error
	}{
		{"missing", dir + "/nope.pcap", fs.ErrNotExist},
		{"text", write("text.pcap", []byte("hello, this is text and not a capture")), ErrNotCapture},
		{"empty", write("empty.pcap", nil), ErrNotCapture},
		{"gzip text", write("text.pcap.gz", gz.Bytes()), ErrNotCapture},
		{"directory", dir, ErrNotCapture},
		{"header cut", write("hdr.pcap", full[:12]), ErrTruncated},
		{"magic cut", write("magic.pcap", full[:3]), ErrTruncated},
	} {
		for _, reader := range []FileReader{ReaderPcapgo, ReaderLibpcap} {
			// The good file first: a later failure must close it and fail the call.
			s, err := OpenFiles([]string{good, c.path}, FileOptions{Reader: reader})
			if err == nil {
				s.Close()
				t.Errorf("%s: opened", c.name)
				continue
			}
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.path) {
				t.Errorf("%s (reader %d): %v, want %v naming the file", c.name, reader, err, c.is)
			}
		}
	}
	if _, err := OpenFiles(nil, FileOptions{}); err == nil {
		t.Error("no files: no error")
	}
}

// A corrupt record is an error but not a truncation, whichever library reads
// it: libpcap's reason is only text, so the type must come from elsewhere.
func TestFilesCorruptRecordNotTruncated(t *testing.T) {
	recs, want := ethRecs(t, t0)
	recs = recs[:len(segs)]
	path := tmp(t, "corrupt.pcap")
	writePcap(t, path, layers.LinkTypeEthernet, true, false, recs)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The second record's capture length (file header 24, record header 16).
	off := 24 + 16 + len(recs[0].data) + 8
	binary.LittleEndian.PutUint32(b[off:], 0x7fffffff)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, reader := range []FileReader{ReaderPcapgo, ReaderLibpcap} {
		s, err := OpenFiles([]string{path}, FileOptions{Reader: reader})
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(t, s)
		s.Close()
		if err == nil || err == io.EOF || errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), path) {
			t.Errorf("reader %d: end %v, want a non-truncation error naming the file", reader, err)
		}
		if len(got) != 1 {
			t.Fatalf("reader %d: %d packets, want 1", reader, len(got))
		}
		samePacket(t, "packet 0", got[0], want[0])
	}
}

// Live dashboards poll Stats every few packets from the packet loop.
func TestFilesStatsAllocFree(t *testing.T) {
	recs, _ := ethRecs(t, t0)
	a, b := tmp(t, "a.pcap"), tmp(t, "b.pcap")
	writePcap(t, a, layers.LinkTypeEthernet, true, false, recs)
	writePcap(t, b, layers.LinkTypeEthernet, true, false, recs)
	s, err := OpenFiles([]string{a, b}, FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var p Packet
	if err := s.Next(&p); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = s.Stats() }); n != 0 {
		t.Errorf("Stats allocates %v times per call", n)
	}
	if st := s.Stats(); len(st.Sources) != 2 || st.Sources[1].Name != b {
		t.Errorf("stats %+v", st)
	}
}
