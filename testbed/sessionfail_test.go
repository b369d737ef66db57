package testbed

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// TestClientNetworkFailure: only a client session's network errors set a
// run aside; a harness error (a truncated capture) or a wrong status fails
// the test as before.
func TestClientNetworkFailure(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	client := netip.MustParseAddr("198.51.100.11")
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"reset", &SessionError{Browser: "go", Client: client, Err: fmt.Errorf("load 3: get x: %w", reset)}, true},
		{"eof", &SessionError{Browser: "go", Client: client, Err: fmt.Errorf("get x: %w", io.ErrUnexpectedEOF)}, true},
		{"chromium", &SessionError{Browser: "chromium", Client: client, Err: fmt.Errorf("chromium load /p1.html: %w", &chromedp.LoadError{ErrorText: "net::ERR_CONNECTION_RESET"})}, true},
		{"chromium, the text alone", &SessionError{Browser: "chromium", Client: client, Err: errors.New("page load: net::ERR_CONNECTION_RESET")}, false},
		{"status", &SessionError{Browser: "go", Client: client, Err: errors.New("get x: status 404")}, false},
		{"harness eof", fmt.Errorf("client capture: %w", io.ErrUnexpectedEOF), false},
		{"nil", nil, false},
	}
	for _, c := range cases {
		if got := ClientNetworkFailure(c.err); got != c.want {
			t.Errorf("%s: ClientNetworkFailure(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestDiagnoseFailure: the diagnosis lists the failing connection's
// packets from both captures and nginx's error lines about it, nothing of
// other connections.
func TestDiagnoseFailure(t *testing.T) {
	dir := t.TempDir()
	write := func(name string) string {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		w := pcapgo.NewWriterNanos(f)
		if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
			t.Fatal(err)
		}
		b := &pcapBuilder{t: t, w: w, t0: time.Unix(1_700_000_000, 0)}
		for _, port := range []uint16{47117, 47118} {
			c := &synthConn{b: b, client: net.IP{198, 51, 100, 11}, cport: port, server: net.IP{203, 0, 113, 2},
				serverListen: 80, cisn: 100, sisn: 900, cseq: 101, sseq: 901}
			c.syn(0)
			c.synack(msec(110))
			c.ack(msec(110.1))
			c.send(msec(110.2), "GET /o/p9-3.png HTTP/1.1\r\nHost: x\r\n\r\n")
		}
		return path
	}
	res := ScenarioResult{ClientCapture: write("c.pcap"), Capture: write("s.pcap")}
	errLog := filepath.Join(dir, "error.log")
	if err := os.WriteFile(errLog, []byte("2026/12/02 01:20:49 [info] 7#7: *12 client 198.51.100.11:47118 closed keepalive connection\n"+
		"2026/12/02 01:20:49 [error] 7#7: *13 recv() failed (104: Connection reset by peer), client: 198.51.100.11:47117\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := &SessionError{Browser: "go", Client: netip.MustParseAddr("198.51.100.11"),
		Err: errors.New(`get http://203.0.113.2/o/p9-3.png: read tcp 198.51.100.11:47117->203.0.113.2:80: read: connection reset by peer`)}
	lines := DiagnoseFailure(res, errLog, err)
	var client, server, nginx int
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "client: "):
			client++
		case strings.HasPrefix(l, "server: "):
			server++
		case strings.HasPrefix(l, "nginx: "):
			nginx++
			if !strings.Contains(l, "47117") {
				t.Errorf("nginx line of another connection: %s", l)
			}
		}
	}
	if client != 4 || server != 4 || nginx != 1 {
		t.Errorf("diagnosis has %d client, %d server, %d nginx lines, want 4, 4, 1:\n%s", client, server, nginx, strings.Join(lines, "\n"))
	}
	if !strings.Contains(lines[0], "c->s [S]") || !strings.Contains(lines[1], "s->c [S.]") {
		t.Errorf("handshake not listed as such:\n%s", strings.Join(lines, "\n"))
	}
}
