package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/rtmon/rtmon/capture"
)

// defaultLiveSize is --size with --live: tcpreplay sends the capture once
// per rate and reader, so a smaller one keeps the ladder to minutes.
const defaultLiveSize = "300MB"

// liveRates is the replay ladder in packets/s; 0 is tcpreplay --topspeed.
var liveRates = []int{25_000, 50_000, 100_000, 200_000, 400_000, 0}

// liveRun is one replay of the capture into the veth at one rate, with
// rtmon live capturing on the peer.
type liveRun struct {
	reader       string
	rate         int   // requested packets/s; 0 top speed
	sentPPS      int64 // what tcpreplay reports it achieved
	sent         int64 // packets tcpreplay sent
	drops        int64 // kernel drops (ps_drop / tp_drops) reported by rtmon
	transactions int64
}

// runBenchLive replays the bench capture with tcpreplay into one end of a
// veth pair whose other end rtmon live captures, for each reader at each
// rate of the ladder: the highest rate with no kernel drop, and the drops
// at top speed, side by side.
func runBenchLive(ctx context.Context, stdout io.Writer, o benchOptions) error {
	for _, tool := range []string{"tcpreplay", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("bench --live needs %s (Debian packages tcpreplay, iproute2): %w", tool, err)
		}
	}
	self, path, side, cleanup, err := benchSelfAndCapture(ctx, stdout, o)
	if err != nil {
		return err
	}
	defer cleanup()
	sendIf, capIf, ns, cleanup, err := liveBenchNet()
	defer cleanup()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "replaying %s (%d packets) with tcpreplay in netns %s on %s; rtmon live captures on %s (--workers %d)\n",
		path, side.Packets, ns, sendIf, capIf, max(o.workers, 1))
	var runs []liveRun
	rates := o.rates
	if len(rates) == 0 {
		rates = liveRates
	}
	for _, reader := range []string{capture.LiveAFPacket, capture.LiveLibpcap} {
		for _, rate := range rates {
			r, err := liveReplay(ctx, o, self, path, ns, sendIf, capIf, reader, rate)
			if err != nil {
				return err
			}
			runs = append(runs, r)
			fmt.Fprintf(os.Stderr, "%s at %s: %d packets/s sent, %d dropped\n", reader, rateLabel(rate), r.sentPPS, r.drops)
			if r.drops > 0 && rate != 0 {
				// Faster rates drop too: go straight to top speed.
				if r, err = liveReplay(ctx, o, self, path, ns, sendIf, capIf, reader, 0); err != nil {
					return err
				}
				runs = append(runs, r)
				break
			}
		}
	}
	return writeLiveReport(stdout, runs, side.Packets)
}

func rateLabel(rate int) string {
	if rate == 0 {
		return "top speed"
	}
	return fmt.Sprintf("%dk pps", rate/1000)
}

// liveBenchNet makes a network namespace holding one end of a veth pair;
// the other end stays here for rtmon.
func liveBenchNet() (sendIf, capIf, ns string, cleanup func(), err error) {
	id := os.Getpid() % 1_000_000
	ns, sendIf, capIf = fmt.Sprintf("rtbl%d", id), fmt.Sprintf("rtbls%d", id), fmt.Sprintf("rtblc%d", id)
	cleanup = func() {
		exec.Command("ip", "link", "del", capIf).Run() // best effort: deletes the pair
		exec.Command("ip", "netns", "del", ns).Run()
	}
	for _, args := range [][]string{
		{"netns", "add", ns},
		{"link", "add", capIf, "type", "veth", "peer", "name", sendIf, "netns", ns},
		{"link", "set", capIf, "addrgenmode", "none"},
		{"-n", ns, "link", "set", sendIf, "addrgenmode", "none"},
		// The synthetic capture's segments exceed 1500 bytes (as offloaded
		// segments do on real captures): a veth takes up to 64 KiB.
		{"link", "set", capIf, "mtu", "65535"},
		{"-n", ns, "link", "set", sendIf, "mtu", "65535"},
		{"link", "set", capIf, "up"},
		{"-n", ns, "link", "set", sendIf, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return "", "", "", cleanup, fmt.Errorf("bench --live: ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return sendIf, capIf, ns, cleanup, nil
}

var (
	sentRe  = regexp.MustCompile(`Actual: (\d+) packets`)
	ratedRe = regexp.MustCompile(`Rated: [0-9.]+ Bps, [0-9.]+ Mbps, ([0-9.]+) pps`)
	dropRe  = regexp.MustCompile(` \S+ dropped=(\d+)`)
)

// liveReplay runs rtmon live on capIf, replays the capture once into
// sendIf, stops rtmon and reads its summary.
func liveReplay(ctx context.Context, o benchOptions, self, path, ns, sendIf, capIf, reader string, rate int) (liveRun, error) {
	run := liveRun{reader: reader, rate: rate}
	argv := []string{"live", "-i", capIf, "--no-ui", "--promisc", "--reader", reader, "--filter", "tcp"}
	if o.workers > 0 {
		argv = append(argv, "--workers", strconv.Itoa(o.workers))
	}
	mon := exec.CommandContext(ctx, self, argv...)
	var out bytes.Buffer
	mon.Stdout, mon.Stderr = &out, &out
	if err := mon.Start(); err != nil {
		return run, fmt.Errorf("bench --live: starting rtmon live: %w", err)
	}
	defer func() {
		if mon.ProcessState == nil {
			mon.Process.Kill()
			mon.Wait()
		}
	}()
	// A packet sent before the capture is open would be lost to it.
	if err := waitPacketSocket(ctx, capIf, 10*time.Second); err != nil {
		return run, fmt.Errorf("bench --live: rtmon live: %w\n%s", err, out.String())
	}
	replay := []string{"netns", "exec", ns, "tcpreplay", "-q", "-i", sendIf}
	if rate == 0 {
		replay = append(replay, "--topspeed")
	} else {
		replay = append(replay, "--pps", strconv.Itoa(rate))
	}
	rep, err := exec.CommandContext(ctx, "ip", append(replay, path)...).CombinedOutput()
	if err != nil {
		return run, fmt.Errorf("bench --live: tcpreplay: %v: %s", err, rep)
	}
	if m := sentRe.FindSubmatch(rep); m != nil {
		run.sent, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	if m := ratedRe.FindSubmatch(rep); m != nil {
		pps, _ := strconv.ParseFloat(string(m[1]), 64)
		run.sentPPS = int64(pps)
	}
	time.Sleep(time.Second) // let rtmon drain its rings
	if err := mon.Process.Signal(syscall.SIGINT); err != nil {
		return run, fmt.Errorf("bench --live: stopping rtmon live: %w", err)
	}
	if err := mon.Wait(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			return run, fmt.Errorf("bench --live: rtmon live: %w", err)
		}
	}
	for _, m := range dropRe.FindAllSubmatch(out.Bytes(), -1) {
		n, _ := strconv.ParseInt(string(m[1]), 10, 64)
		run.drops += n
	}
	if m := txRe.FindSubmatch(out.Bytes()); m != nil {
		run.transactions, _ = strconv.ParseInt(string(m[1]), 10, 64)
	} else {
		return run, fmt.Errorf("bench --live: rtmon live printed no summary:\n%s", out.String())
	}
	return run, nil
}

// waitPacketSocket waits until a packet socket is bound to iface
// (/proc/net/packet lists it by interface index): libpcap and AF_PACKET
// capture both open one.
func waitPacketSocket(ctx context.Context, iface string, timeout time.Duration) error {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return err
	}
	want := strconv.Itoa(ifi.Index)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		b, err := os.ReadFile("/proc/net/packet")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			if f := strings.Fields(line); len(f) >= 5 && f[4] == want {
				time.Sleep(100 * time.Millisecond) // the filter is set just after the bind
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("no capture socket on %s after %s", iface, timeout)
}

func writeLiveReport(w io.Writer, runs []liveRun, packets int64) error {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "reader\treplay rate\tsent packets/s\tsent\tkernel drops\tdrop %\ttransactions\t")
	best := map[string]int64{}
	top := map[string]liveRun{}
	for _, r := range runs {
		pct := 0.0
		if r.sent > 0 {
			pct = 100 * float64(r.drops) / float64(r.sent)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.2f\t%d\t\n", r.reader, rateLabel(r.rate), r.sentPPS, r.sent, r.drops, pct, r.transactions)
		if r.drops == 0 {
			best[r.reader] = max(best[r.reader], r.sentPPS)
		}
		if r.rate == 0 {
			top[r.reader] = r
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ncapture: %d packets, replayed once per row; drops are the kernel's (tp_drops, ps_drop) as rtmon live reports them.\n", packets)
	for _, reader := range []string{capture.LiveAFPacket, capture.LiveLibpcap} {
		fmt.Fprintf(w, "%s: highest replay rate with no drop %d packets/s", reader, best[reader])
		if t, ok := top[reader]; ok {
			fmt.Fprintf(w, "; at top speed (%d packets/s) %d dropped", t.sentPPS, t.drops)
		}
		fmt.Fprintln(w)
	}
	return nil
}
