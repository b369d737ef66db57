package testbed

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// Prefork is a server as a pre-forking one (Apache's prefork MPM, a PHP-FPM
// pool) is under load: Workers worker processes each accept one connection
// at a time from a listen socket with a small Backlog, serve its one
// request after Service, and close it. While every worker is busy,
// connections wait in the kernel's accept queue; once that holds Backlog
// of them the kernel drops further SYNs, of every client alike: the
// overload priority SYN dropping exists for. It is the preforkd command
// (testbed/preforkd), run in the server namespace at the clients'
// real-time priority, as nginx is in the validation.
type Prefork struct {
	Addr netip.AddrPort
	Proc *Proc
}

// PreforkOptions configure StartPrefork.
type PreforkOptions struct {
	// Bin is the preforkd binary (go build ./testbed/preforkd).
	Bin     string
	Port    int
	Workers int
	Backlog int
	Service time.Duration // per request, besides writing the response
	Content map[string][]byte
}

// StartPrefork runs a prefork server in the server namespace and returns
// once it listens.
func (tb *Testbed) StartPrefork(o PreforkOptions) (*Prefork, error) {
	if o.Workers < 1 || o.Backlog < 1 {
		return nil, fmt.Errorf("prefork: %d workers, backlog %d: want at least 1 of each", o.Workers, o.Backlog)
	}
	dir, err := os.MkdirTemp(tb.Dir, "prefork-site-")
	if err != nil {
		return nil, fmt.Errorf("prefork: %w", err)
	}
	if err := writeDocRoot(dir, nil, o.Content); err != nil {
		return nil, fmt.Errorf("prefork: %w", err)
	}
	addr := netip.AddrPortFrom(tb.Server.Addr, uint16(o.Port))
	proc, err := tb.Start(tb.Server.NS, "chrt", "-f", strconv.Itoa(clientRTPriority), o.Bin, "-listen", addr.String(),
		"-backlog", strconv.Itoa(o.Backlog), "-workers", strconv.Itoa(o.Workers), "-service", o.Service.String(), "-content", dir)
	if err != nil {
		return nil, fmt.Errorf("prefork: %w", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if out, _ := os.ReadFile(proc.Stdout); strings.Contains(string(out), "listening") {
			return &Prefork{Addr: addr, Proc: proc}, nil
		}
		if proc.Exited() || time.Now().After(deadline) {
			return nil, fmt.Errorf("prefork did not start listening on %s: %s", addr, proc.ReadStderr())
		}
	}
}
