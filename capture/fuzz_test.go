package capture

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket/layers"
)

func FuzzDecode(f *testing.F) {
	for _, fr := range framings {
		for _, s := range segs {
			f.Add(fr.f(f, s.ip(f)), uint16(fr.lt))
		}
	}
	for _, c := range malformedFrames(f) {
		f.Add(c.frame, uint16(c.lt))
	}
	f.Add(ipv4Frag(f, segs[2], 0, true), uint16(layers.LinkTypeRaw))
	f.Add(ipv6Frag(f, segs[4], 0, true), uint16(layers.LinkTypeRaw))
	d := NewDecoder() // shared, like in production: state must not leak between frames
	f.Fuzz(func(t *testing.T, frame []byte, lt uint16) {
		before := d.Stats()
		var p Packet
		ok := d.Decode(layers.LinkType(lt), frame, &p)
		after := d.Stats()
		if after.Frames != before.Frames+1 || after.TCP+after.SkippedTotal() != after.Frames {
			t.Fatalf("counters inconsistent: before %v after %v", before, after)
		}
		if ok != (after.TCP == before.TCP+1) {
			t.Fatalf("returned %v but TCP %d -> %d", ok, before.TCP, after.TCP)
		}
		if !ok {
			return
		}
		if p.PayloadLen < len(p.Payload) || p.NumSACK < 0 || p.NumSACK > MaxSACKBlocks ||
			p.WindowScale < -1 || p.WindowScale > 14 || !p.SrcIP.IsValid() || !p.DstIP.IsValid() {
			t.Fatalf("bad packet %+v", p)
		}
		if len(p.Payload) > 0 && !bytes.Contains(frame, p.Payload) {
			t.Fatal("payload not from the frame")
		}
	})
}

func FuzzOpenFile(f *testing.F) {
	dir := f.TempDir()
	recs, _ := ethRecs(f, t0)
	for i, w := range []func(string){
		func(p string) { writePcap(f, p, layers.LinkTypeEthernet, true, false, recs[:3]) },
		func(p string) { writePcap(f, p, layers.LinkTypeEthernet, false, true, recs[:2]) },
		func(p string) { writePcapng(f, p, false, recs[:3]) },
		func(p string) { writePcapng(f, p, true, recs[:2]) },
	} {
		p := filepath.Join(dir, "seed"+string(rune('a'+i)))
		w(p)
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-3])
	}
	f.Add([]byte("not a capture"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := OpenFiles([]string{path}, FileOptions{BufferSize: 4096})
		if err != nil {
			return
		}
		defer s.Close()
		var p Packet
		// A packet takes at least a record header of the (possibly
		// gzip-inflated) input, so more packets than that many bytes means
		// the reader is not advancing; counted, not timed, so a busy
		// machine cannot fail it.
		for n := 0; ; n++ {
			err := s.Next(&p)
			if err == io.EOF {
				break
			}
			if err != nil {
				if s.Next(&p) == io.EOF {
					t.Fatal("error not sticky")
				}
				break
			}
			if n > 1_000_000 {
				t.Fatalf("no end after %d packets", n)
			}
		}
		st := s.Stats()
		if st.Decode.Frames != st.Sources[0].Frames || st.Decode.TCP+st.Decode.SkippedTotal() != st.Decode.Frames {
			t.Fatalf("stats inconsistent %+v", st)
		}
	})
}
