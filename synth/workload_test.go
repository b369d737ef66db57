package synth

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// cap is one decoded packet of a generated file.
type capPkt struct {
	ts       int64
	src, dst netip.AddrPort
	seq, ack uint32
	syn, fin bool
	ackFlag  bool
	payload  []byte
}

func generate(t testing.TB, opts Options, wl Workload) ([]byte, []TruthRecord, Summary) {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, opts)
	if err != nil {
		t.Fatal(err)
	}
	var truth []TruthRecord
	sum, err := Generate(w, wl, func(r TruthRecord) { truth = append(truth, r) })
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), truth, sum
}

// decodeFile reads an uncompressed Ethernet pcap produced by generate.
func decodeFile(t *testing.T, raw []byte) []capPkt {
	t.Helper()
	r, err := pcapgo.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var out []capPkt
	for {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
		tcp, _ := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if tcp == nil {
			t.Fatalf("packet %d is not TCP", len(out))
		}
		src, _ := netip.AddrFromSlice(p.NetworkLayer().NetworkFlow().Src().Raw())
		dst, _ := netip.AddrFromSlice(p.NetworkLayer().NetworkFlow().Dst().Raw())
		out = append(out, capPkt{ts: ci.Timestamp.UnixNano(),
			src: netip.AddrPortFrom(src, uint16(tcp.SrcPort)), dst: netip.AddrPortFrom(dst, uint16(tcp.DstPort)),
			seq: tcp.Seq, ack: tcp.Ack, syn: tcp.SYN, fin: tcp.FIN, ackFlag: tcp.ACK, payload: tcp.Payload})
	}
}

func TestWorkloadDeterministic(t *testing.T) {
	wl := Workload{Seed: 7, Clients: 6, Duration: 20 * time.Second, SYNLossRate: 0.1, DataLossRate: 0.01}
	opts := Options{Nanosecond: true}
	a, ta, sa := generate(t, opts, wl)
	b, tb, sb := generate(t, opts, wl)
	if !bytes.Equal(a, b) || !reflect.DeepEqual(ta, tb) {
		t.Fatal("same seed gave different output")
	}
	sa.Elapsed, sb.Elapsed = 0, 0
	if sa != sb {
		t.Fatalf("summaries differ: %+v vs %+v", sa, sb)
	}
	wl.Seed = 8
	c, _, _ := generate(t, opts, wl)
	if bytes.Equal(a, c) {
		t.Fatal("different seeds gave the same file")
	}
}

// TestWorkloadTruthMatchesCapture checks every truth record against the
// packets actually in the file, and the truth's internal arithmetic.
func TestWorkloadTruthMatchesCapture(t *testing.T) {
	wl := Workload{Seed: 3, Clients: 12, Servers: 2, Duration: 40 * time.Second, ConnsPerClient: 4,
		SYNLossRate: 0.15, SYNACKLossRate: 0.1, DataLossRate: 0.02}
	raw, truth, sum := generate(t, Options{Nanosecond: true}, wl)
	pkts := decodeFile(t, raw)
	if int64(len(pkts)) != sum.Packets || int64(len(raw)) != sum.Bytes {
		t.Fatalf("summary says %d packets %d bytes, file has %d, %d", sum.Packets, sum.Bytes, len(pkts), len(raw))
	}
	if len(truth) != sum.Transactions || sum.Transactions < 50 || sum.Pageviews < 20 {
		t.Fatalf("truth %d, summary %+v", len(truth), sum)
	}
	if sum.SYNRetrans == 0 || sum.DataRetrans == 0 || sum.SYNACKs <= sum.Connections {
		t.Fatalf("losses not exercised: %+v", sum)
	}
	type key struct {
		ts  int64
		src netip.AddrPort
	}
	at := map[key][]capPkt{}
	gets := 0
	syns := map[netip.AddrPort][]int64{}
	synacks := map[netip.AddrPort][]int64{}
	for i, p := range pkts {
		if i > 0 && p.ts < pkts[i-1].ts {
			t.Fatalf("packet %d goes back in time", i)
		}
		at[key{p.ts, p.src}] = append(at[key{p.ts, p.src}], p)
		if bytes.HasPrefix(p.payload, []byte("GET ")) {
			gets++
		}
		switch {
		case p.syn && !p.ackFlag:
			syns[p.src] = append(syns[p.src], p.ts)
		case p.syn:
			synacks[p.dst] = append(synacks[p.dst], p.ts)
		}
	}
	if gets != len(truth) {
		t.Fatalf("%d requests in the file, %d truth records", gets, len(truth))
	}
	find := func(ts int64, src netip.AddrPort, prefix string, pure bool) bool {
		for _, p := range at[key{ts, src}] {
			if pure && len(p.payload) == 0 || !pure && strings.HasPrefix(string(p.payload), prefix) {
				return true
			}
		}
		return false
	}
	containers, retrans := 0, 0
	for i, tr := range truth {
		half := tr.RTT / 2
		if got := tr.Tconn + tr.Trequest + tr.Tserver + tr.Ttransfer; got != tr.End-tr.Start {
			t.Errorf("%d: components %d != total %d", i, got, tr.End-tr.Start)
		}
		if tr.Tserver != tr.ServerTime+tr.RTT || tr.End != tr.RespLastCap+half || tr.RespFirstCap != tr.ReqLastCap+tr.ServerTime {
			t.Errorf("%d: timing model broken: %+v", i, tr)
		}
		if !find(tr.ReqFirstCap, tr.Client, "GET "+tr.URL+" HTTP/1.1\r\nHost: "+tr.Host, false) {
			t.Errorf("%d: no request for %s at %d", i, tr.URL, tr.ReqFirstCap)
		}
		if !find(tr.RespFirstCap, tr.Server, "HTTP/1.1 200 OK\r\nContent-Type: "+tr.ContentType, false) {
			t.Errorf("%d: no response at %d", i, tr.RespFirstCap)
		}
		if !find(tr.AckCap, tr.Client, "", true) {
			t.Errorf("%d: no final client ACK at %d", i, tr.AckCap)
		}
		if tr.NewConn {
			s, sa := syns[tr.Client], synacks[tr.Client]
			if len(s) != tr.SYNs || len(sa) != tr.SYNACKs || s[0] != tr.SYNCap || tr.Start != tr.SYNCap-half {
				t.Errorf("%d: SYNs %v SYN/ACKs %v, truth %+v", i, s, sa, tr)
			} else if tr.Tconn != sa[len(sa)-1]+half-tr.Start {
				t.Errorf("%d: Tconn %d, capture says %d", i, tr.Tconn, sa[len(sa)-1]+half-tr.Start)
			}
			if tr.ReqFirstCap != tr.Start+tr.Tconn+half {
				t.Errorf("%d: request not sent at handshake completion", i)
			}
		} else if tr.Tconn != 0 || tr.ReqFirstCap != tr.Start+half {
			t.Errorf("%d: reused connection truth %+v", i, tr)
		}
		if tr.Container {
			containers++
			if !strings.HasPrefix(tr.ContentType, "text/html") || tr.Referer != "" {
				t.Errorf("%d: container %+v", i, tr)
			}
		} else if !strings.HasPrefix(tr.Referer, "http://"+tr.Host+"/") {
			t.Errorf("%d: object without Referer: %+v", i, tr)
		}
		retrans += tr.RetransBytes
	}
	if containers != sum.Pageviews || retrans == 0 {
		t.Errorf("containers %d pageviews %d retrans bytes %d", containers, sum.Pageviews, retrans)
	}
}

// TestWorkloadHandshakeLoss pins the Linux SYN back-off: with every loss
// forced, the client connects on its fourth SYN, 1+2+4 s after the first.
func TestWorkloadHandshakeLoss(t *testing.T) {
	for _, tc := range []struct {
		name          string
		wl            Workload
		syns, synacks int
		extra         time.Duration
	}{
		{"none", Workload{}, 1, 1, 0},
		{"syn", Workload{SYNLossRate: 1}, 4, 1, 7 * time.Second},
		{"synack", Workload{SYNACKLossRate: 1}, 4, 4, 7 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wl := tc.wl
			wl.Seed, wl.Clients, wl.Duration = 1, 3, 10*time.Second
			_, truth, _ := generate(t, Options{}, wl)
			n := 0
			for _, tr := range truth {
				if !tr.NewConn {
					continue
				}
				n++
				if want := int64(tc.extra) + tr.RTT + int64(synackDelay); tr.Tconn != want || tr.SYNs != tc.syns || tr.SYNACKs != tc.synacks {
					t.Fatalf("Tconn %v SYNs %d SYN/ACKs %d, want %v %d %d", time.Duration(tr.Tconn), tr.SYNs, tr.SYNACKs, time.Duration(want), tc.syns, tc.synacks)
				}
			}
			if n == 0 {
				t.Fatal("no new connections")
			}
		})
	}
}

func TestWorkloadTargetBytes(t *testing.T) {
	const target = 8 << 20
	path := filepath.Join(t.TempDir(), "big.pcap")
	sum, err := GenerateFile(path, Options{}, Workload{Seed: 5, Clients: 50, TargetBytes: target})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != sum.Bytes || sum.Bytes < target || sum.Bytes > target+target/20 {
		t.Fatalf("file %d bytes, summary %d, target %d", st.Size(), sum.Bytes, target)
	}
}

// TestTshark proves third-party tools read the files: tshark must see every
// packet with our timestamps and raw sequence numbers, and every request.
func TestTshark(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Fatal("tshark not installed (Debian package tshark); it is required for this test")
	}
	for _, tc := range []struct {
		opts Options
		v6   bool
	}{
		{Options{Nanosecond: true}, false},
		{Options{Format: PCAPNG, LinkType: LinuxSLL2}, false},
		{Options{Nanosecond: true, VLANs: []uint16{10, 20}, Gzip: true}, false},
		{Options{Format: PCAPNG, Nanosecond: true, LinkType: Null}, true},
		{Options{LinkType: RawIP, Nanosecond: true}, true},
		{Options{LinkType: LinuxSLL}, false},
	} {
		name := fmt.Sprintf("f%d-%v-ns%v-vlan%d-gz%v-v6%v", tc.opts.Format, tc.opts.LinkType, tc.opts.Nanosecond, len(tc.opts.VLANs), tc.opts.Gzip, tc.v6)
		t.Run(name, func(t *testing.T) {
			raw, truth, sum := generate(t, tc.opts, Workload{Seed: 11, Clients: 4, Duration: 15 * time.Second, DataLossRate: 0.01, IPv6: tc.v6})
			path := filepath.Join(t.TempDir(), "w.cap")
			if err := os.WriteFile(path, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			_, pkts := readAll(t, raw, tc.opts)
			cmd := exec.Command(tshark, "-n", "-r", path, "-T", "fields", "-e", "frame.time_epoch", "-e", "tcp.seq_raw", "-e", "http.request.method")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("tshark: %v: %s", err, stderr.String())
			}
			lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
			if len(lines) != len(pkts) || int64(len(lines)) != sum.Packets {
				t.Fatalf("tshark saw %d packets, file has %d", len(lines), len(pkts))
			}
			gets := 0
			for i, l := range lines {
				f := strings.Split(l, "\t")
				if len(f) != 3 {
					t.Fatalf("line %d: %q", i, l)
				}
				if ns := parseEpoch(t, f[0]); ns != pkts[i].ci.Timestamp.UnixNano() {
					t.Fatalf("frame %d: tshark time %d, ours %d", i+1, ns, pkts[i].ci.Timestamp.UnixNano())
				}
				tcp, _ := gopacket.NewPacket(pkts[i].data, mustLT(tc.opts.LinkType), gopacket.Default).Layer(layers.LayerTypeTCP).(*layers.TCP)
				if tcp == nil || f[1] != strconv.FormatUint(uint64(tcp.Seq), 10) {
					t.Fatalf("frame %d: tshark seq_raw %s", i+1, f[1])
				}
				if f[2] == "GET" {
					gets++
				}
			}
			if gets != len(truth) {
				t.Fatalf("tshark found %d GET requests, truth has %d", gets, len(truth))
			}
		})
	}
}

func mustLT(l LinkType) layers.LinkType {
	lt, err := l.layersType()
	if err != nil {
		panic(err)
	}
	return lt
}

// parseEpoch turns tshark's "sec.fraction" into ns without float rounding.
func parseEpoch(t *testing.T, s string) int64 {
	t.Helper()
	sec, frac, _ := strings.Cut(s, ".")
	frac = (frac + "000000000")[:9]
	a, err1 := strconv.ParseInt(sec, 10, 64)
	b, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("bad epoch %q", s)
	}
	return a*1e9 + b
}

// BenchmarkGenerate reports generation speed in MB/s of (uncompressed) file.
func BenchmarkGenerate(b *testing.B) {
	const target = 128 << 20
	var total int64
	for i := 0; b.Loop(); i++ {
		w, err := NewWriter(io.Discard, Options{Nanosecond: true})
		if err != nil {
			b.Fatal(err)
		}
		sum, err := Generate(w, Workload{Seed: int64(i), Clients: 2000, TargetBytes: target, SYNLossRate: 0.02, DataLossRate: 0.01}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		total += sum.Bytes
	}
	b.ReportMetric(float64(total)/1e6/b.Elapsed().Seconds(), "MB/s")
}
