package bench

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/export"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/synth"
)

func smallParams() Params {
	return Params{Version: ParamsVersion, TargetBytes: 2e6, Clients: 50, Seed: 3,
		SYNLoss: 0.01, DataLoss: 0.01, PcapNanosecs: true}
}

func generate(t testing.TB, dir string, p Params) (string, synth.Summary) {
	t.Helper()
	path := filepath.Join(dir, "cap.pcap")
	sum, err := synth.GenerateFile(path, p.Options(), p.Workload())
	if err != nil {
		t.Fatal(err)
	}
	return path, sum
}

func TestSidecarReuse(t *testing.T) {
	dir := t.TempDir()
	p := smallParams()
	path, sum := generate(t, dir, p)
	if _, ok, err := Reusable(path, p); err != nil || ok {
		t.Fatalf("no sidecar yet: reusable=%v err=%v", ok, err)
	}
	if err := WriteSidecar(path, Sidecar{Params: p, Packets: sum.Packets, Bytes: sum.Bytes}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := Reusable(path, p); err != nil || !ok {
		t.Fatalf("same params: reusable=%v err=%v", ok, err)
	}
	q := p
	q.Clients++
	if _, ok, _ := Reusable(path, q); ok {
		t.Error("different clients reused")
	}
	// A file cut short (an interrupted copy, a full disk) is not reused.
	if err := os.Truncate(path, sum.Bytes-1); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := Reusable(path, p); ok {
		t.Error("truncated file reused")
	}
	if err := os.WriteFile(SidecarPath(path), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := Reusable(path, p); ok || err != nil {
		t.Errorf("damaged sidecar: reusable=%v err=%v", ok, err)
	}
}

func TestCutPrefix(t *testing.T) {
	dir := t.TempDir()
	path, sum := generate(t, dir, smallParams())
	all, err := ScanFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if all.Packets != sum.Packets || all.Bytes != sum.Bytes {
		t.Fatalf("scan %+v, generator wrote %d packets %d bytes", all, sum.Packets, sum.Bytes)
	}
	cut := filepath.Join(dir, "cut.pcap")
	info, err := CutPrefixFile(cut, path, sum.Bytes/2)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(cut)
	if info.Bytes != st.Size() || info.Bytes > sum.Bytes/2 || info.Bytes < sum.Bytes/2-70000 {
		t.Fatalf("cut %+v, file %d bytes, asked %d", info, st.Size(), sum.Bytes/2)
	}
	// The prefix is a valid capture holding exactly the first packets.
	src, err := capture.OpenFiles([]string{cut}, capture.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var p capture.Packet
	var n int64
	for {
		if err := src.Next(&p); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("prefix unreadable after %d packets: %v", n, err)
			}
			break
		}
		n++
	}
	if n != info.Packets {
		t.Errorf("read %d packets from the prefix, cut reported %d", n, info.Packets)
	}
	if _, err := CutPrefix(io.Discard, strings.NewReader("not a pcap at all, no"), 0); err == nil {
		t.Error("garbage accepted")
	}
}

func TestTable(t *testing.T) {
	rows := []Row{
		{Tool: "rtmon", Input: "full", Packets: 2_000_000, Bytes: 1e9, Wall: time.Second, MaxRSSKiB: 20480},
		{Tool: "tshark", Input: "full", Packets: 2_000_000, Bytes: 1e9, Wall: 40 * time.Second, MaxRSSKiB: 4 << 20},
		{Tool: "tshark", Input: "prefix", Packets: 10, Bytes: 10, Wall: time.Second},
	}
	FillRatios(rows, "rtmon")
	if rows[1].Ratio != 40 || rows[2].Ratio != 0 || rows[0].Ratio != 0 {
		t.Fatalf("ratios %v %v %v", rows[0].Ratio, rows[1].Ratio, rows[2].Ratio)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("want header and 3 rows:\n%s", b.String())
	}
	for _, want := range []string{"2000000", "1000.0", "40.0x", "4096.0", "20.0"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	// Right alignment: without (empty) notes every line ends in one column.
	for _, l := range lines[1:] {
		if len(strings.TrimRight(l, " ")) != len(lines[0]) {
			t.Errorf("columns not aligned:\n%s", b.String())
		}
	}
}

// TestOpenConnections also holds --max-memory's accounting to the heap it
// stands for, state by state: a state left uncounted (a transaction in
// flight, say) would let the real heap overrun the bound.
func TestOpenConnections(t *testing.T) {
	for _, s := range []ConnState{Handshake, Idle, RequestPending, MidResponse} {
		pkts, err := OpenConnectionPackets(t.TempDir(), 5000, s)
		if err != nil {
			t.Fatal(err)
		}
		m, err := MeasureOpenConnections(pkts, s)
		if err != nil {
			t.Fatal(err)
		}
		if m.Connections != 5000 {
			t.Errorf("%v: %d connections open, want 5000", s, m.Connections)
		}
		t.Logf("%v: %.0f B live, %.0f B counted per connection", s, m.LivePerConn, m.CountedPerConn)
		if m.CountedPerConn < 0.9*m.LivePerConn || m.CountedPerConn > 1.5*m.LivePerConn {
			t.Errorf("%v: counted at %.0f B per connection, holds %.0f B live: want within 0.9x..1.5x", s, m.CountedPerConn, m.LivePerConn)
		}
	}
}

// TestConnMemoryBound holds the live heap per open connection, measured
// after GC with 50,000 open (not timed), under a bound for each state:
// issue 15's 1 KiB in every state, in flight included, and below it what
// each state held when last measured (362 B with a handshake only, 650 B
// idle, 946 B with a request pending, 882 B mid-response: 2,454 B
// mid-response before the rounds), so that none grows back.
func TestConnMemoryBound(t *testing.T) {
	bound := map[ConnState]float64{Handshake: 384, Idle: 672, RequestPending: 968, MidResponse: 904}
	for _, s := range []ConnState{Handshake, Idle, RequestPending, MidResponse} {
		pkts, err := OpenConnectionPackets(t.TempDir(), 50_000, s)
		if err != nil {
			t.Fatal(err)
		}
		m, err := MeasureOpenConnections(pkts, s)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v: %.0f B live, %.0f B counted per connection (bound %.0f B)", s, m.LivePerConn, m.CountedPerConn, bound[s])
		if m.LivePerConn >= bound[s] {
			t.Errorf("%v: %.0f B live per connection, want under %.0f B", s, m.LivePerConn, bound[s])
		}
	}
}

// BenchmarkOpenConnections reports the tracker's heap per open connection
// (the target is under 1 KiB) with 100k connections open.
func BenchmarkOpenConnections(b *testing.B) {
	for _, s := range []ConnState{Handshake, Idle, RequestPending, MidResponse} {
		b.Run(strings.ReplaceAll(s.String(), " ", "-"), func(b *testing.B) {
			pkts, err := OpenConnectionPackets(b.TempDir(), 100_000, s)
			if err != nil {
				b.Fatal(err)
			}
			var m ConnMemory
			for b.Loop() {
				if m, err = MeasureOpenConnections(pkts, s); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(m.LivePerConn, "live-B/conn")
			b.ReportMetric(m.HeapPerConn, "inuse-B/conn")
		})
	}
}

// BenchmarkAnalyze is `rtmon analyze` minus flag parsing and printing: file
// reading, decoding, reconstruction and the summary sink, in one goroutine.
// It reads RTMON_BENCH_FILE when set (profile the real 1 GB capture with
// -cpuprofile), else a generated 100 MB capture.
func BenchmarkAnalyze(b *testing.B) {
	path := os.Getenv("RTMON_BENCH_FILE")
	if path == "" {
		p := smallParams()
		p.TargetBytes, p.Clients = 100e6, 1000
		path, _ = generate(b, b.TempDir(), p)
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	var packets uint64
	b.SetBytes(st.Size())
	for b.Loop() {
		src, err := capture.OpenFiles([]string{path}, capture.FileOptions{})
		if err != nil {
			b.Fatal(err)
		}
		sum := export.NewSummary()
		tr := reconstruct.NewTracker(reconstruct.Config{}, sum)
		if err := tr.ReadFrom(src, nil); err != nil {
			b.Fatal(err)
		}
		packets += tr.Stats().Packets
		src.Close()
	}
	b.ReportMetric(float64(packets)/b.Elapsed().Seconds(), "pkts/s")
}
