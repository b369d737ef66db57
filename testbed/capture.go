package testbed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Capture is a tcpdump writing a pcap file of one host's veth.
type Capture struct {
	*Proc
	Host *Host
	Path string // the pcap file

	// Filled by Stop from tcpdump's closing statistics.
	Captured, Received, Dropped int
}

// Capture bounds.
const (
	captureReadyTries = 100
	capturePause      = 50 * time.Millisecond
	// quietWindow is how long the file must stop growing before Stop signals
	// tcpdump, so the FIN exchange after the last transfer is in the file.
	quietWindow = 200 * time.Millisecond
	quietMax    = 3 * time.Second
	// captureBufferKiB is tcpdump's -B (kernel ring size in KiB).
	captureBufferKiB = 64 << 10
)

// StartCapture runs tcpdump on h's veth inside h's namespace (the server's,
// for rtmon's observation point) and waits until it is listening. It captures
// whole packets (-s 0), writes each one at once (-U, --immediate-mode) and
// keeps root (-Z root) so it can write into the testbed's private directory.
// Veth traffic arrives as GSO super-packets of up to 64 KB; in immediate mode
// libpcap sizes every ring frame for the snap length, so the default 2 MB
// buffer holds only a handful of them and the kernel drops packets. -B gives
// the ring room for bursts of whole windows.
func (tb *Testbed) StartCapture(ctx context.Context, h *Host, name string) (*Capture, error) {
	path := filepath.Join(tb.Dir, name+".pcap")
	proc, err := tb.Start(h.NS, "tcpdump", "-i", h.Iface, "-w", path, "-U", "--immediate-mode",
		"-s", "0", "-B", strconv.Itoa(captureBufferKiB), "-n", "-Z", "root", "tcp")
	if err != nil {
		return nil, err
	}
	c := &Capture{Proc: proc, Host: h, Path: path}
	for i := 0; ; i++ {
		if strings.Contains(proc.ReadStderr(), "listening on") {
			return c, nil
		}
		if proc.Exited() || i >= captureReadyTries {
			_ = proc.Stop(syscall.SIGINT)
			return nil, fmt.Errorf("tcpdump on %s/%s not listening after %d tries: %s",
				h.NS, h.Iface, i, proc.ReadStderr())
		}
		select {
		case <-ctx.Done():
			_ = proc.Stop(syscall.SIGINT)
			return nil, ctx.Err()
		case <-time.After(capturePause):
		}
	}
}

var statRE = regexp.MustCompile(`(\d+) packets? (captured|received by filter|dropped by kernel)`)

// Stop waits (bounded) until the file stops growing, then ends tcpdump with
// SIGINT so it flushes and closes the file, and records its statistics.
func (c *Capture) Stop() error {
	var last int64 = -1
	stable := time.Now()
	for deadline := time.Now().Add(quietMax); time.Now().Before(deadline); {
		st, err := os.Stat(c.Path)
		if err == nil && st.Size() != last {
			last, stable = st.Size(), time.Now()
		} else if time.Since(stable) >= quietWindow {
			break
		}
		time.Sleep(quietWindow / 4)
	}
	if err := c.Proc.Stop(syscall.SIGINT); err != nil {
		return fmt.Errorf("stop tcpdump (pid %d): %w", c.PID, err)
	}
	stderr := c.ReadStderr()
	m := statRE.FindAllStringSubmatch(stderr, -1)
	if len(m) < 3 {
		return fmt.Errorf("tcpdump (pid %d) ended without statistics: %s", c.PID, stderr)
	}
	for _, s := range m {
		n, _ := strconv.Atoi(s[1])
		switch s[2] {
		case "captured":
			c.Captured = n
		case "received by filter":
			c.Received = n
		case "dropped by kernel":
			c.Dropped = n
		}
	}
	return nil
}
