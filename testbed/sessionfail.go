package testbed

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chromedp/chromedp"
)

// SessionError is a client session's failure during a scenario.
type SessionError struct {
	Browser string
	Client  netip.Addr
	Err     error
}

func (e *SessionError) Error() string {
	return fmt.Sprintf("%s session on %s: %v", e.Browser, e.Client, e.Err)
}

func (e *SessionError) Unwrap() error { return e.Err }

// ClientNetworkFailure reports whether a scenario's error is a client's
// request failing on the network (a reset, a connection closed mid-response,
// a timeout) rather than a harness or set-up error. Such a run has no
// complete truth for its pages; it is diagnosed and run again, not judged.
func ClientNetworkFailure(err error) bool {
	var se *SessionError
	if !errors.As(err, &se) {
		return false
	}
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true
	case errors.As(err, &ne) && ne.Timeout():
		return true
	}
	// Chromium names a navigation's network error in the DevTools
	// protocol's errorText (net/base/net_error_list.h).
	var le *chromedp.LoadError
	return errors.As(err, &le) && strings.HasPrefix(le.ErrorText, "net::ERR_CONNECTION_")
}

// failedConn finds the client address and port a Go client's error names
// ("read tcp 198.51.100.11:47117->203.0.113.2:80: ...").
var failedConn = regexp.MustCompile(`tcp (\d+\.\d+\.\d+\.\d+):(\d+)->`)

// maxDiagLines bounds the lines a failure diagnosis returns.
const maxDiagLines = 60

// DiagnoseFailure describes what the captures and nginx's error log show
// about the connection a client's error names: every packet of it at the
// client and at the server, and nginx's error-log lines. It is for the
// test log of a run that failed on the network, so the cause can be found
// from a CI log alone.
func DiagnoseFailure(res ScenarioResult, errLog string, err error) []string {
	m := failedConn.FindStringSubmatch(err.Error())
	if m == nil {
		return []string{"no connection named in the error"}
	}
	client, perr := netip.ParseAddr(m[1])
	port, perr2 := strconv.Atoi(m[2])
	if perr != nil || perr2 != nil {
		return []string{"unparsable connection in the error"}
	}
	var out []string
	for _, side := range []struct{ name, path string }{{"client", res.ClientCapture}, {"server", res.Capture}} {
		lines, e := connPackets(side.path, client, uint16(port))
		if e != nil {
			out = append(out, fmt.Sprintf("%s capture: %v", side.name, e))
		}
		for _, l := range lines {
			out = append(out, side.name+": "+l)
		}
	}
	if errLog != "" {
		lines, e := grepFile(errLog, fmt.Sprintf("%s:%d", client, port), "[error]", "[crit]", "[alert]", "[warn]")
		if e != nil {
			out = append(out, fmt.Sprintf("nginx error log: %v", e))
		}
		for _, l := range lines {
			out = append(out, "nginx: "+l)
		}
	}
	return out
}

// connPackets lists the packets of one client connection in a capture, one
// line each (time, direction, flags, seq, ack, length), at most
// maxDiagLines/2 of them.
func connPackets(path string, client netip.Addr, port uint16) ([]string, error) {
	var out []string
	err := eachTCPPacket(path, func(p *tcpDecoder, _ []byte, at time.Time) bool {
		src, dst := p.addrs()
		tcp := &p.tcp
		dir := ""
		switch {
		case src == client && uint16(tcp.SrcPort) == port:
			dir = "c->s"
		case dst == client && uint16(tcp.DstPort) == port:
			dir = "s->c"
		default:
			return true
		}
		flags := ""
		for _, f := range []struct {
			on   bool
			name string
		}{{tcp.SYN, "S"}, {tcp.ACK, "."}, {tcp.PSH, "P"}, {tcp.FIN, "F"}, {tcp.RST, "R"}} {
			if f.on {
				flags += f.name
			}
		}
		out = append(out, fmt.Sprintf("%s %s [%s] seq %d ack %d len %d", at.UTC().Format("15:04:05.000000"),
			dir, flags, tcp.Seq, tcp.Ack, len(tcp.Payload)))
		return len(out) < maxDiagLines/2
	})
	return out, err
}

// grepFile returns the lines of path holding any of the words, the last
// maxDiagLines/2 of them.
func grepFile(path string, words ...string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		for _, w := range words {
			if strings.Contains(sc.Text(), w) {
				out = append(out, sc.Text())
				break
			}
		}
		if len(out) > maxDiagLines/2 {
			out = out[1:]
		}
	}
	return out, sc.Err()
}

// sessionFailureGrace is how long a run that failed on the network still
// captures, so the failing connection's last packets are in the captures.
const sessionFailureGrace = 300 * time.Millisecond
