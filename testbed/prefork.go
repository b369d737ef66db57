package testbed

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Prefork is a server as a pre-forking one (Apache's prefork MPM, a PHP-FPM
// pool) is under load: Workers workers each accept one connection at a
// time from a listen socket with a small Backlog, serve its one request
// after Service, and close it. While every worker is busy, connections
// wait in the kernel's accept queue; once that holds Backlog of them the
// kernel drops further SYNs, of every client alike: the overload priority
// SYN dropping exists for.
type Prefork struct {
	Addr    netip.AddrPort
	ln      net.Listener
	wg      sync.WaitGroup
	mu      sync.Mutex
	served  int
	closing bool
}

// PreforkOptions configure StartPrefork.
type PreforkOptions struct {
	Port    int
	Workers int
	Backlog int
	Service time.Duration // per request, besides writing the response
	Content map[string][]byte
}

// StartPrefork runs a prefork server in the server namespace.
func (tb *Testbed) StartPrefork(o PreforkOptions) (*Prefork, error) {
	if o.Workers < 1 || o.Backlog < 1 {
		return nil, fmt.Errorf("prefork: %d workers, backlog %d: want at least 1 of each", o.Workers, o.Backlog)
	}
	addr := netip.AddrPortFrom(tb.Server.Addr, uint16(o.Port))
	var ln net.Listener
	if err := inNS(tb.Server.NS, func() (err error) {
		ln, err = listenBacklog(addr, o.Backlog)
		return err
	}); err != nil {
		return nil, fmt.Errorf("prefork listen: %w", err)
	}
	p := &Prefork{Addr: addr, ln: ln}
	for range o.Workers {
		p.wg.Add(1)
		go p.worker(o)
	}
	tb.onClose(func() error {
		p.mu.Lock()
		p.closing = true
		p.mu.Unlock()
		err := ln.Close()
		p.wg.Wait()
		return err
	})
	return p, nil
}

// listenBacklog listens on addr with the given backlog (net.Listen takes
// the system's maximum).
func listenBacklog(addr netip.AddrPort, backlog int) (net.Listener, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("SO_REUSEADDR: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind %s: %w", addr, err)
	}
	if err := unix.Listen(fd, backlog); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("listen: %w", err)
	}
	f := os.NewFile(uintptr(fd), "prefork")
	defer f.Close()
	return net.FileListener(f)
}

// worker accepts one connection at a time and serves its one request.
func (p *Prefork) worker(o PreforkOptions) {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			p.mu.Lock()
			closing := p.closing
			p.mu.Unlock()
			if closing {
				return
			}
			continue
		}
		p.serve(c, o)
	}
}

func (p *Prefork) serve(c net.Conn, o PreforkOptions) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	time.Sleep(o.Service)
	body, ok := o.Content[req.URL.Path]
	status := http.StatusOK
	if !ok {
		status, body = http.StatusNotFound, nil
	}
	ctype := "application/octet-stream"
	switch path.Ext(req.URL.Path) {
	case ".html":
		ctype = "text/html"
	case ".css":
		ctype = "text/css"
	case ".js":
		ctype = "application/javascript"
	case ".png":
		ctype = "image/png"
	}
	head := "HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\nContent-Type: " + ctype +
		"\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n"
	if _, err := c.Write(append([]byte(head), body...)); err != nil {
		return
	}
	p.mu.Lock()
	p.served++
	p.mu.Unlock()
}

// Served counts the requests answered so far.
func (p *Prefork) Served() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.served
}
