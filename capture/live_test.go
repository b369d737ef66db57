package capture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// helperEnv makes the test binary act as a tiny TCP client or server inside
// a network namespace (started with "ip netns exec"), so the live test needs
// no tools beyond iproute2.
const helperEnv = "RTMON_CAPTURE_TEST_HELPER"

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(runHelper(h))
	}
	os.Exit(m.Run())
}

// runHelper: "server ADDR" echoes one connection; "client ADDR MSG" sends
// MSG and waits for the echo. Both give up after 10 s.
func runHelper(spec string) int {
	f := strings.Fields(spec)
	deadline := time.Now().Add(10 * time.Second)
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "helper:", err); return 1 }
	switch {
	case len(f) == 2 && f[0] == "server":
		ln, err := net.Listen("tcp4", f[1])
		if err != nil {
			return fail(err)
		}
		ln.(*net.TCPListener).SetDeadline(deadline)
		c, err := ln.Accept()
		if err != nil {
			return fail(err)
		}
		c.SetDeadline(deadline)
		io.Copy(c, c)
		c.Close()
		return 0
	case len(f) == 3 && f[0] == "bulk":
		// Send N bytes and read the echo: thousands of segments at once.
		n, err := strconv.Atoi(f[2])
		if err != nil {
			return fail(err)
		}
		f = []string{"client", f[1], strings.Repeat("b", n)}
		fallthrough
	case len(f) == 3 && f[0] == "client":
		var c net.Conn
		var err error
		for time.Now().Before(deadline) { // the server may still be starting
			if c, err = net.DialTimeout("tcp4", f[1], time.Second); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if c == nil {
			return fail(err)
		}
		c.SetDeadline(deadline)
		if _, err := c.Write([]byte(f[2])); err != nil {
			return fail(err)
		}
		buf := make([]byte, len(f[2]))
		if _, err := io.ReadFull(c, buf); err != nil {
			return fail(err)
		}
		c.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, c)
		c.Close()
		return 0
	}
	return fail(fmt.Errorf("bad spec %q", spec))
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// liveNet builds client and server namespaces joined by a bridge in the
// test's namespace and returns the host-side veths of the client and the
// server. Addresses are 198.51.100.0/24 and exist only inside the
// namespaces.
func liveNet(t *testing.T) (nsC, nsS, hC, hS string) {
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("the live test needs ip(8) from iproute2:", err)
	}
	p := fmt.Sprintf("rtc%d", os.Getpid()%10_000_000)
	nsC, nsS = p+"c", p+"s"
	hC, hS = p+"hc", p+"hs"
	br := p + "br"
	t.Cleanup(func() {
		for _, args := range [][]string{
			{"link", "del", hC}, {"link", "del", hS}, {"link", "del", br},
			{"netns", "del", nsC}, {"netns", "del", nsS},
		} {
			exec.Command("ip", args...).Run() // best effort: some may not exist
		}
	})
	ipCmd(t, "netns", "add", nsC)
	ipCmd(t, "netns", "add", nsS)
	ipCmd(t, "link", "add", br, "type", "bridge")
	ipCmd(t, "link", "set", br, "addrgenmode", "none") // no IPv6 link-local chatter
	ipCmd(t, "link", "set", br, "up")
	for _, x := range []struct{ ns, host, addr string }{{nsC, hC, "198.51.100.1/24"}, {nsS, hS, "198.51.100.2/24"}} {
		ipCmd(t, "link", "add", x.host, "type", "veth", "peer", "name", x.host+"n", "netns", x.ns)
		ipCmd(t, "link", "set", x.host, "addrgenmode", "none")
		ipCmd(t, "-n", x.ns, "link", "set", x.host+"n", "addrgenmode", "none")
		ipCmd(t, "link", "set", x.host, "master", br, "up")
		ipCmd(t, "-n", x.ns, "addr", "add", x.addr, "dev", x.host+"n")
		ipCmd(t, "-n", x.ns, "link", "set", x.host+"n", "up")
		ipCmd(t, "-n", x.ns, "link", "set", "lo", "up")
	}
	return nsC, nsS, hC, hS
}

// startHelper runs the test binary as a helper (see runHelper) in ns.
func startHelper(t *testing.T, ctx context.Context, ns, spec string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+spec)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // only our own children, by PID
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd
}

// TestLive captures a connection between two namespaces on both host-side
// veths (so every packet is seen twice, once per interface), with libpcap,
// with one AF_PACKET socket per interface and with three in a fanout
// group, and checks packets and the kernel's counters.
func TestLive(t *testing.T) {
	for _, c := range []struct {
		name   string
		reader string
		fanout int
	}{{"libpcap", LiveLibpcap, 0}, {"afpacket", LiveAFPacket, 1}, {"afpacket-fanout", LiveAFPacket, 3}} {
		t.Run(c.name, func(t *testing.T) { testLive(t, c.reader, c.fanout) })
	}
}

func testLive(t *testing.T, reader string, fanout int) {
	nsC, nsS, hC, hS := liveNet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	src, err := OpenLive(ctx, []string{hC, hS}, LiveOptions{
		Filter: "tcp and net 198.51.100.0/24", ImmediateMode: true, Timeout: 50 * time.Millisecond,
		SnapLen: 128, // also exercises Payload < PayloadLen
		Reader:  reader, Fanout: fanout,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if n := src.Names(); len(n) != 2 || n[0] != hC || n[1] != hS {
		t.Fatalf("Names %v", n)
	}

	start := time.Now()
	msg := "hello-" + strings.Repeat("x", 200)
	server := startHelper(t, ctx, nsS, "server 198.51.100.2:8080")
	client := startHelper(t, ctx, nsC, "client 198.51.100.2:8080 "+msg)
	clientErr := make(chan error, 1)
	go func() {
		// Once the client is done, give the capture a moment to deliver the
		// last packets (batches flush on the 50 ms read timeout), then stop.
		clientErr <- client.Wait()
		time.Sleep(500 * time.Millisecond)
		cancel()
	}()

	type key struct {
		iface int
		flags uint8
	}
	seen := map[key]int{}
	dataSeen := [2]bool{}
	var pk Packet
	for {
		err := src.Next(&pk)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if pk.Interface < 0 || pk.Interface > 1 {
			t.Fatalf("interface %d", pk.Interface)
		}
		ts := time.Unix(0, pk.Timestamp)
		if ts.Before(start.Add(-time.Second)) || ts.After(time.Now().Add(time.Second)) {
			t.Errorf("timestamp %v outside the test's run", ts)
		}
		if !pk.SrcIP.Is4() || !strings.HasPrefix(pk.SrcIP.String(), "198.51.100.") {
			t.Errorf("unexpected source %v", pk.SrcIP)
		}
		seen[key{pk.Interface, pk.Flags &^ FlagPSH}]++
		if pk.PayloadLen == len(msg) {
			// 128-byte snap length: 14+20+32 bytes of headers, the rest payload.
			if len(pk.Payload) >= len(msg) || !bytes.HasPrefix([]byte(msg), pk.Payload) || len(pk.Payload) == 0 {
				t.Errorf("payload %q of %d", pk.Payload, pk.PayloadLen)
			}
			dataSeen[pk.Interface] = true
		}
		if pk.Has(FlagSYN) && (pk.MSS == 0 || pk.WindowScale < 0 || !pk.SACKPermitted) {
			t.Errorf("SYN without the options Linux sends: %+v", pk)
		}
	}
	server.Wait()
	if err := <-clientErr; err != nil {
		t.Errorf("client: %v", err)
	}
	if ctx.Err() == context.DeadlineExceeded {
		t.Fatalf("timed out; seen %v", seen)
	}
	for i := 0; i < 2; i++ {
		// The client may retry its SYN (RST) until the server listens.
		if seen[key{i, FlagSYN}] < 1 || seen[key{i, FlagSYN | FlagACK}] != 1 || !dataSeen[i] {
			t.Errorf("interface %d: seen %v, data %v", i, seen, dataSeen[i])
		}
	}
	st := src.Stats()
	if len(st.Sources) != 2 {
		t.Fatalf("stats %+v", st)
	}
	for i, ss := range st.Sources {
		if !ss.Live || ss.Frames < 8 || ss.Bytes == 0 || ss.Capture.Received < ss.Frames || ss.Capture.Dropped != 0 || ss.Sockets != max(fanout, 1) {
			t.Errorf("interface %d stats %+v", i, ss)
		}
	}
	if st.Decode.TCP != st.Sources[0].Frames+st.Sources[1].Frames {
		t.Errorf("decode %v vs frames %d+%d", st.Decode, st.Sources[0].Frames, st.Sources[1].Frames)
	}
	t.Logf("seen %v; stats %+v", seen, st)
}

func TestLiveErrors(t *testing.T) {
	if _, err := OpenLive(context.Background(), []string{"rtcnosuchif0"}, LiveOptions{}); err == nil || !strings.Contains(err.Error(), "rtcnosuchif0") {
		t.Errorf("missing interface: %v", err)
	}
	if _, err := OpenLive(context.Background(), []string{"lo"}, LiveOptions{Filter: "tcp and and"}); err == nil || !strings.Contains(err.Error(), "filter") {
		t.Errorf("bad filter: %v", err)
	}
	if _, err := OpenLive(context.Background(), nil, LiveOptions{}); err == nil {
		t.Error("no interfaces: no error")
	}
	if _, err := OpenLive(context.Background(), []string{"lo"}, LiveOptions{Reader: "netmap"}); err == nil || !strings.Contains(err.Error(), "netmap") {
		t.Errorf("unknown reader: %v", err)
	}
	if _, err := OpenLive(context.Background(), []string{"any"}, LiveOptions{Reader: LiveAFPacket}); err == nil || !strings.Contains(err.Error(), "libpcap") {
		t.Errorf("AF_PACKET on any: %v", err)
	}
	// By default "any" falls back to libpcap, which serves it.
	src, err := OpenLive(context.Background(), []string{"any"}, LiveOptions{Filter: "tcp port 9"})
	if err != nil {
		t.Fatalf("any: %v", err)
	}
	if n := src.Stats().Sources[0].Sockets; n != 1 {
		t.Errorf("any: %d handles", n)
	}
	src.Close()
}

// A batch is handed on once its frames span a read timeout of capture
// time, not only when it fills or a read times out: packets that trickle
// in more often than the timeout never let a read time out, and waited
// for 1 MiB (about a second behind on loopback).
func TestBatchDueBySpan(t *testing.T) {
	const timeout = 100 * time.Millisecond
	b := &batch{}
	for i, ms := range []int64{0, 30, 60, 90, 120} {
		b.frames = append(b.frames, frameRef{ts: 5e9 + ms*int64(time.Millisecond)})
		if got, want := b.due(timeout), ms >= 100; got != want {
			t.Errorf("frame %d at %d ms: due %v, want %v", i, ms, got, want)
		}
	}
}

// TestLiveDropAccounting makes an AF_PACKET ring tiny on purpose and stalls
// the consumer while a 4 MB echo crosses the bridge: the kernel must drop,
// and the counters must account for every packet that passed the filter,
// delivered or dropped.
func TestLiveDropAccounting(t *testing.T) {
	nsC, nsS, hC, _ := liveNet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, err := OpenLive(ctx, []string{hC}, LiveOptions{
		Filter: "tcp and net 198.51.100.0/24", Timeout: 20 * time.Millisecond, Reader: LiveAFPacket,
		BufferSize: 8 * os.Getpagesize(), // 8 one-page blocks
		BatchBytes: 4096,                 // and the batches between capture and consumer hold little
	})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	server := startHelper(t, ctx, nsS, "server 198.51.100.2:8080")
	client := startHelper(t, ctx, nsC, "bulk 198.51.100.2:8080 4000000")
	// Nothing reads until the echo is over: the ring overflows.
	if err := client.Wait(); err != nil {
		t.Fatalf("client: %v", err)
	}
	server.Wait()
	go func() {
		time.Sleep(time.Second) // drain what the ring still holds, then stop
		cancel()
	}()
	var pk Packet
	for {
		if err := src.Next(&pk); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
	}
	ss := src.Stats().Sources[0]
	c := ss.Capture
	if c.Dropped == 0 || c.Freezes == 0 {
		t.Errorf("a stalled 8-page ring under a 4 MB echo: dropped %d, freezes %d", c.Dropped, c.Freezes)
	}
	if c.Received != ss.Frames+c.Dropped {
		t.Errorf("received %d, but delivered %d + dropped %d = %d", c.Received, ss.Frames, c.Dropped, ss.Frames+c.Dropped)
	}
	t.Logf("%+v", ss)
}
