package pipeline

import (
	"bytes"
	"context"
	"io/fs"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rtmon/rtmon/bench"
	"github.com/rtmon/rtmon/export"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/synth"
)

// invariantSink checks every record that leaves the pipeline.
type invariantSink struct {
	t              *testing.T
	mu             sync.Mutex
	conns, txs, pv int
}

func (s *invariantSink) check(kind, id string, err error) {
	if err != nil {
		s.t.Errorf("%s %s: %v", kind, id, err)
	}
}

func (s *invariantSink) Connection(c *reconstruct.Connection) {
	s.mu.Lock()
	s.conns++
	s.mu.Unlock()
	s.check("connection", c.ID, c.Invariants())
}

func (s *invariantSink) Transaction(x *reconstruct.Transaction) {
	s.mu.Lock()
	s.txs++
	s.mu.Unlock()
	s.check("transaction", x.ID, x.Invariants())
}

func (s *invariantSink) Pageview(p *pageview.Pageview) {
	s.mu.Lock()
	s.pv++
	s.mu.Unlock()
	s.check("pageview", p.ID, p.Invariants())
}

// runWorkers runs the pipeline over files with n workers (connections
// idle for idle expire; 0: the default) into a fresh
// directory of record files (format) and HAR files, and returns it.
func runWorkers(t *testing.T, files []string, n int, format export.Format, idle time.Duration) (string, *invariantSink) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Tracker.IdleTimeout = idle
	cfg.Files = files
	cfg.Workers = n
	cfg.OutDir, cfg.Format = t.TempDir(), format
	cfg.HARDir = filepath.Join(cfg.OutDir, "har")
	sink := &invariantSink{t: t}
	cfg.Sinks = []pageview.Sink{sink}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("%d workers: %v", n, err)
	}
	if got := p.Summary().Tracker.Packets; got == 0 {
		t.Fatalf("%d workers: the trackers counted no packets", n)
	}
	return cfg.OutDir, sink
}

// readTree reads every file under dir by its relative path.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		out[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRecordsSameForAnyWorkerCount runs captures the way real sites load
// (browsers with HTML pages, gzip and chunked bodies, redirects,
// after-load beacons, clients without Referer, SYN, SYN/ACK, data, ACK and
// upstream loss, reordering, several servers, IPv4 and IPv6, real TLS
// sessions timed keyless, three capture files merged) through 1, 2, 3 and 7
// workers: every record file and HAR
// file must be byte-for-byte the same. The CSV pass expires connections
// idle for 3 s, so sweeps end connections of many shards at once.
func TestRecordsSameForAnyWorkerCount(t *testing.T) {
	dir := t.TempDir()
	var files []string
	truthTxs := 0
	for i, wl := range []synth.Workload{
		{Seed: 11, Clients: 40, Servers: 3, Duration: 40 * time.Second, PageviewsPerClient: 4,
			SYNLossRate: 0.05, SYNACKLossRate: 0.03, DataLossRate: 0.02, AckLossRate: 0.02, UpstreamLossRate: 0.01,
			ReorderRate: 0.05, RequestBodies: [2]int{200, 3000}, HTML: true, GzipRate: 0.5, AfterLoad: true,
			NoRefererRate: 0.3, Redirects: 0.2, IPID: synth.IPIDPerConn},
		{Seed: 12, Clients: 25, Servers: 2, Duration: 30 * time.Second, IPv6: true, SYNLossRate: 0.05,
			DataLossRate: 0.02, HTML: true},
	} {
		path := filepath.Join(dir, []string{"a.pcap", "b.pcap"}[i])
		sum, err := synth.GenerateFile(path, synth.Options{Nanosecond: true}, wl)
		if err != nil {
			t.Fatal(err)
		}
		truthTxs += sum.Transactions
		files = append(files, path)
	}
	// Real TLS 1.3 and 1.2 sessions, timed keyless.
	tlsPath := filepath.Join(dir, "tls.pcap")
	if _, err := bench.GenerateHTTPSFile(tlsPath, bench.Params{Version: bench.ParamsVersion, HTTPS: true, Sessions: 12,
		TargetBytes: 2 << 20, Seed: 5, PcapNanosecs: true}); err != nil {
		t.Fatal(err)
	}
	files = append(files, tlsPath)
	for _, c := range []struct {
		format export.Format
		idle   time.Duration
	}{{export.JSONL, 0}, {export.CSV, 3 * time.Second}} {
		format := c.format
		oneDir, one := runWorkers(t, files, 1, format, c.idle)
		if one.txs <= truthTxs || one.pv == 0 {
			t.Fatalf("1 worker: %d transactions and %d pageviews, generated %d cleartext ones and HTTPS", one.txs, one.pv, truthTxs)
		}
		want := readTree(t, oneDir)
		for _, n := range []int{2, 3, 7} {
			gotDir, got := runWorkers(t, files, n, format, c.idle)
			if got.conns != one.conns || got.txs != one.txs || got.pv != one.pv {
				t.Errorf("%s, %d workers: %d connections, %d transactions, %d pageviews; 1 worker: %d, %d, %d",
					format, n, got.conns, got.txs, got.pv, one.conns, one.txs, one.pv)
			}
			have := readTree(t, gotDir)
			if len(have) != len(want) {
				t.Errorf("%s, %d workers: %d files, 1 worker %d", format, n, len(have), len(want))
			}
			for name, b := range want {
				if !bytes.Equal(have[name], b) {
					t.Errorf("%s, %d workers: %s differs from 1 worker's (%d and %d bytes)", format, n, name, len(have[name]), len(b))
				}
			}
		}
	}
}

func TestSharderKeepsAClientTogether(t *testing.T) {
	s := newSharder(reconstruct.Config{})
	r := rand.New(rand.NewPCG(1, 2))
	addr := func() netip.Addr {
		if r.IntN(2) == 0 {
			return netip.AddrFrom4([4]byte{byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())})
		}
		var b [16]byte
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return netip.AddrFrom16(b)
	}
	for range 10000 {
		a, b := addr(), addr()
		ap, bp := uint16(r.Uint32()), uint16(r.Uint32())
		if x, y := s.of(a, ap, b, bp), s.of(b, bp, a, ap); x != y || x < 0 || x >= clientShards {
			t.Fatalf("%v:%d <-> %v:%d: shard %d one way, %d the other", a, ap, b, bp, x, y)
		}
	}
	client := netip.MustParseAddr("198.51.100.7")
	want := addrShard(client)
	for _, srv := range []netip.AddrPort{netip.MustParseAddrPort("203.0.113.1:80"), netip.MustParseAddrPort("203.0.113.2:443"),
		netip.MustParseAddrPort("203.0.113.3:8080"), netip.MustParseAddrPort("[2001:db8::1]:443")} {
		for _, port := range []uint16{1025, 33000, 60999} {
			if got := s.of(client, port, srv.Addr(), srv.Port()); got != want {
				t.Errorf("client port %d to %v: shard %d, the client's other connections %d", port, srv, got, want)
			}
		}
	}
	// A server on a high port, told by --server-port, beats the port order.
	s = newSharder(reconstruct.Config{ServerPorts: []uint16{61000}})
	if got := s.of(client, 40000, netip.MustParseAddr("203.0.113.9"), 61000); got != want {
		t.Errorf("server port 61000: shard %d, want the client's %d", got, want)
	}
	s = newSharder(reconstruct.Config{ServerNets: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}})
	if got := s.of(netip.MustParseAddr("203.0.113.9"), 50000, client, 40000); got != want {
		t.Errorf("server net: shard %d, want the client's %d", got, want)
	}
}

// TestAddrShardIsFNVOverSixteenBytes: the IPv4 shortcut in addrShard
// deals every address to the shard the plain hash over its 16-byte form
// names, so the records of a capture keep their order across versions.
func TestAddrShardIsFNVOverSixteenBytes(t *testing.T) {
	plain := func(a netip.Addr) int {
		b := a.As16()
		h := uint32(2166136261)
		for _, c := range b {
			h ^= uint32(c)
			h *= 16777619
		}
		return int(h % clientShards)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		var b [16]byte
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		v4 := netip.AddrFrom4([4]byte(b[:4]))
		for _, a := range []netip.Addr{v4, netip.AddrFrom16(v4.As16()), netip.AddrFrom16(b), netip.IPv6Unspecified(), netip.IPv4Unspecified()} {
			if got, want := addrShard(a), plain(a); got != want {
				t.Fatalf("%v: shard %d, the hash over 16 bytes gives %d", a, got, want)
			}
		}
	}
}

// endTurns lets the workers end their shards one at a time, in shard
// order, however their goroutines are scheduled.
func TestEndTurnsEndShardsInOrder(t *testing.T) {
	for _, n := range []int{2, 3, 8} {
		turns := newEndTurns()
		var mu sync.Mutex
		var ended []int
		inTurn := 0 // workers between wait and pass: at most one
		var wg sync.WaitGroup
		for w := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(n), uint64(w)))
				for s := w; s < clientShards; s += n {
					if r.IntN(4) == 0 {
						time.Sleep(time.Duration(r.IntN(200)) * time.Microsecond)
					}
					turns.wait(s)
					mu.Lock()
					inTurn++
					if inTurn > 1 {
						t.Errorf("%d workers: shard %d ended beside another", n, s)
					}
					ended = append(ended, s)
					mu.Unlock()
					if r.IntN(4) == 0 { // another worker would end a shard now
						time.Sleep(time.Duration(r.IntN(200)) * time.Microsecond)
					}
					mu.Lock()
					inTurn--
					mu.Unlock()
					turns.pass(s)
				}
			}()
		}
		wg.Wait()
		for i, s := range ended {
			if s != i {
				t.Fatalf("%d workers: shards ended in the order %v, want 0 to %d", n, ended, clientShards-1)
			}
		}
		if len(ended) != clientShards {
			t.Fatalf("%d workers: %d shards ended, want %d", n, len(ended), clientShards)
		}
	}
}
