package testbed

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcap"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/rtmon/rtmon/synth"
)

// soakBudget is rtmon's --max-memory in the soak; soakOverhead what the
// process may hold of its own beyond it (the Go runtime's room,
// libpcap's 32 MiB ring, the summary sketches, the pipeline's channels).
const (
	soakBudget   = 64 << 20
	soakOverhead = 96 << 20
)

// TestLiveSoak runs rtmon live on one end of a veth pair for a bounded
// time while the other end sends a replay of web traffic with a SYN flood
// (300,000 SYNs from random clients, never answered: each a half-open
// connection) and garbage frames mixed in. Without a bound the flood alone
// would hold about 600 MB of connection state. rtmon's resident memory
// (anonymous and shared pages: its own) must stay within its budget plus
// a fixed overhead and stop growing once
// the budget is reached, and every frame sent must be accounted for: read
// (decoded or skipped as malformed, by reason) or dropped by the capture,
// counted.
func TestLiveSoak(t *testing.T) {
	bin, err := buildRtmon()
	if err != nil {
		t.Fatalf("rtmon is not buildable: %v", err)
	}
	tx, rx := fmt.Sprintf("rtsk%d", os.Getpid()%10000), fmt.Sprintf("rtsr%d", os.Getpid()%10000)
	if out, err := exec.Command("ip", "link", "add", tx, "type", "veth", "peer", "name", rx).CombinedOutput(); err != nil {
		t.Fatalf("veth: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", tx).Run() })
	for _, dev := range []string{tx, rx} {
		// No IPv6 on the pair: the kernel's own router solicitations would
		// be frames nobody sent.
		// (A kernel without IPv6 has no such file and sends none.)
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+dev+"/disable_ipv6", []byte("1"), 0o644); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("disable IPv6 on %s: %v", dev, err)
		}
		// The replay has segments beyond an Ethernet MTU (the capture
		// point saw offloaded ones).
		if out, err := exec.Command("ip", "link", "set", dev, "mtu", "65535", "up").CombinedOutput(); err != nil {
			t.Fatalf("link up %s: %v: %s", dev, err, out)
		}
	}
	frames := soakFrames(t)

	ctx := testContext(t)
	live := exec.CommandContext(ctx, bin, "live", "-i", rx, "--filter", "", "--no-ui",
		"--max-memory", strconv.Itoa(soakBudget), "--duration", "60s", "--idle-timeout", "10m")
	var out strings.Builder
	live.Stdout, live.Stderr = &out, &out
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	rss := &rssSampler{pid: live.Process.Pid}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); rss.run(stop) }()
	time.Sleep(2 * time.Second) // the capture opens

	sent, err := sendPaced(tx, frames, 40*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := live.Wait(); err != nil {
		t.Fatalf("rtmon live: %v\n%s", err, out.String())
	}
	close(stop)
	wg.Wait()
	summary := out.String()
	t.Logf("rtmon live summary:\n%s", summary)

	read, drops, skipped, evicted := soakCounts(t, summary)
	t.Logf("sent %d frames; rtmon read %d (%d skipped as malformed), capture dropped %d, evicted %d connections; RSS peak %d MiB, first half %d MiB, second half %d MiB",
		sent, read, skipped, drops, evicted, rss.peak()>>20, rss.peakIn(0, 0.5)>>20, rss.peakIn(0.5, 1)>>20)
	if read+drops != sent {
		t.Errorf("sent %d frames, rtmon read %d and counted %d capture drops: %d unaccounted", sent, read, drops, sent-read-drops)
	}
	if skipped == 0 {
		t.Errorf("no frame skipped as malformed, yet garbage was sent")
	}
	if evicted == 0 {
		t.Errorf("no connection evicted: the flood should have met the budget")
	}
	if p := rss.peak(); p > soakBudget+soakOverhead {
		t.Errorf("RSS peaked at %d MiB, over the %d MiB budget plus %d MiB overhead", p>>20, soakBudget>>20, soakOverhead>>20)
	}
	if first, second := rss.peakIn(0, 0.5), rss.peakIn(0.5, 1); second > first+first/4+8<<20 {
		t.Errorf("RSS still growing: peak %d MiB in the first half, %d MiB in the second", first>>20, second>>20)
	}
}

// soakFrames is the soak's traffic: a synthetic capture of browsers (the
// replay), 300,000 SYNs from random clients and 20,000 garbage frames,
// interleaved.
func soakFrames(t *testing.T) [][]byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "replay.pcap")
	if _, err := synth.GenerateFile(path, synth.Options{}, synth.Workload{Seed: 9, Clients: 20, Duration: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var replay [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		replay = append(replay, append([]byte(nil), data...))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	const syns, garbage = 300_000, 20_000
	out := make([][]byte, 0, len(replay)+syns+garbage)
	out = append(out, replay...)
	for range syns {
		out = append(out, synFrame(t, rng))
	}
	for range garbage {
		g := make([]byte, 14+rng.IntN(120))
		for i := range g {
			g[i] = byte(rng.Uint32())
		}
		copy(g[0:6], []byte{0x02, 0, 0, 0, 0, 1}) // not for this host
		if rng.IntN(2) == 0 {
			// Claims IPv4, then a header cut short or nonsense.
			g[12], g[13] = 0x08, 0x00
		}
		out = append(out, g)
	}
	// The replay keeps its order; flood and garbage fall between its frames.
	rng.Shuffle(len(out)-len(replay), func(i, j int) {
		out[len(replay)+i], out[len(replay)+j] = out[len(replay)+j], out[len(replay)+i]
	})
	mixed := make([][]byte, 0, len(out))
	rest := out[len(replay):]
	per := len(rest)/max(len(replay), 1) + 1
	for _, fr := range replay {
		mixed = append(mixed, fr)
		n := min(per, len(rest))
		mixed = append(mixed, rest[:n]...)
		rest = rest[n:]
	}
	return append(mixed, rest...)
}

// synFrame is a SYN from a random documentation-range client port to the
// server, never to be answered.
func synFrame(t *testing.T, rng *rand.Rand) []byte {
	eth := layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, EthernetType: layers.EthernetTypeIPv4}
	ip := layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, Id: uint16(rng.Uint32()),
		SrcIP: net.IP{198, 51, byte(100 + rng.IntN(2)), byte(rng.IntN(256))}, DstIP: net.IP{203, 0, 113, 2}}
	tcp := layers.TCP{SrcPort: layers.TCPPort(1024 + rng.IntN(60000)), DstPort: 80, Seq: rng.Uint32(), SYN: true, Window: 64240}
	if err := tcp.SetNetworkLayerForChecksum(&ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, &eth, &ip, &tcp); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// sendPaced writes the frames on dev evenly over about d, in small bursts
// the veth's queue takes whole.
func sendPaced(dev string, frames [][]byte, d time.Duration) (int, error) {
	h, err := pcap.OpenLive(dev, 65535, false, pcap.BlockForever)
	if err != nil {
		return 0, fmt.Errorf("open %s for sending: %w", dev, err)
	}
	defer h.Close()
	const burst = 100
	gap := d / time.Duration(len(frames)/burst+1)
	next := time.Now()
	for i, f := range frames {
		if err := h.WritePacketData(f); err != nil {
			return i, fmt.Errorf("send frame %d: %w", i, err)
		}
		if (i+1)%burst == 0 {
			next = next.Add(gap)
			time.Sleep(time.Until(next))
		}
	}
	return len(frames), nil
}

// rssSampler reads a process's resident set twice a second.
type rssSampler struct {
	pid     int
	mu      sync.Mutex
	samples []int64
}

func (r *rssSampler) run(stop <-chan struct{}) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if v, err := residentBytes(r.pid); err == nil {
				r.mu.Lock()
				r.samples = append(r.samples, v)
				r.mu.Unlock()
			}
		}
	}
}

func (r *rssSampler) peak() int64 { return r.peakIn(0, 1) }

// peakIn is the largest sample in the fraction [from, to) of the run.
func (r *rssSampler) peakIn(from, to float64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var p int64
	n := float64(len(r.samples))
	for i, v := range r.samples {
		if f := float64(i) / n; f >= from && f < to {
			p = max(p, v)
		}
	}
	return p
}

// residentBytes is the memory pid holds of its own: its resident
// anonymous and shared pages (RssAnon + RssShmem). File-backed pages, the
// binary's text above all (115 MB of an idle rtmon, DuckDB linked in), are
// clean and the kernel takes them back when it needs them.
func residentBytes(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var total int64
	found := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		for _, k := range []string{"RssAnon:", "RssShmem:"} {
			if rest, ok := strings.CutPrefix(sc.Text(), k); ok {
				kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
				if err != nil {
					return 0, err
				}
				total += kb << 10
				found++
			}
		}
	}
	if found != 2 {
		return 0, fmt.Errorf("no RssAnon/RssShmem for %d", pid)
	}
	return total, nil
}

var (
	readLine    = regexp.MustCompile(`read (\d+) packets`)
	evictedLine = regexp.MustCompile(`evicted (\d+)`)
	countsIn    = regexp.MustCompile(`=(\d+)`)
	// dropsIn: the socket's and the interface's drops; the line also
	// counts the ring's freezes, which are episodes, not frames.
	dropsIn = regexp.MustCompile(`\b(?:if)?dropped=(\d+)`)
)

// soakCounts reads rtmon's summary: frames read, capture drops (the
// socket's and the interface's), frames skipped as malformed, connections
// evicted.
func soakCounts(t *testing.T, summary string) (read, drops, skipped, evicted int) {
	t.Helper()
	m := readLine.FindStringSubmatch(summary)
	e := evictedLine.FindStringSubmatch(summary)
	if m == nil || e == nil {
		t.Fatalf("summary lacks the packets read or the evictions:\n%s", summary)
	}
	read, _ = strconv.Atoi(m[1])
	evicted, _ = strconv.Atoi(e[1])
	sum := func(re *regexp.Regexp, line string) int {
		n := 0
		for _, c := range re.FindAllStringSubmatch(line, -1) {
			v, _ := strconv.Atoi(c[1])
			n += v
		}
		return n
	}
	for _, line := range strings.Split(summary, "\n") {
		switch {
		case strings.HasPrefix(line, "capture drops:"):
			drops += sum(dropsIn, line)
		case strings.HasPrefix(line, "skipped packets:"):
			skipped += sum(countsIn, line)
		}
	}
	return read, drops, skipped, evicted
}

// TestSoakCountsDropsOnly: the soak's accounting adds the socket's and the
// interface's drops, not the ring's freezes on the same line (a busy run
// once counted 2 freezes as frames).
func TestSoakCountsDropsOnly(t *testing.T) {
	summary := "tcp: packets 325680  evicted 208456  retransmitted segments 0\n" +
		"skipped packets: bad IP header length=429 bad IP version=7735 fragment=38\n" +
		"capture drops: rtsr4391 dropped=1876 rtsr4391 ifdropped=3 rtsr4391 ring freezes=2\n" +
		"read 345517 packets, 45.1 MB in 60.55s\n"
	read, drops, skipped, evicted := soakCounts(t, summary)
	if read != 345517 || drops != 1879 || skipped != 429+7735+38 || evicted != 208456 {
		t.Errorf("read %d drops %d skipped %d evicted %d; want 345517 1879 %d 208456", read, drops, skipped, evicted, 429+7735+38)
	}
}
