// Command preforkd is the testbed's pre-forking server (Apache's prefork
// MPM, a PHP-FPM pool) as a real one is built: a parent listens with a
// small backlog and forks worker processes that each accept one connection
// at a time from the shared socket, serve its one request after a fixed
// service time and close it. While every worker is busy, connections wait
// in the kernel's accept queue; once that is full the kernel drops SYNs.
//
// The workers are processes of their own so that the server's timing is
// the kernel's queueing and nothing else: goroutines inside the test
// process shared its scheduler with a hundred client goroutines and left
// connections waiting while a worker was free.
//
//	preforkd -listen 203.0.113.2:80 -backlog 4 -workers 4 -service 150ms -content DIR
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	listen := flag.String("listen", "", "address:port to listen on")
	backlog := flag.Int("backlog", 4, "listen backlog")
	workers := flag.Int("workers", 4, "worker processes")
	service := flag.Duration("service", 150*time.Millisecond, "time to serve one request, besides writing the response")
	content := flag.String("content", "", "directory the site's files are served from")
	child := flag.Bool("child", false, "run as a worker on the listening socket passed as fd 3")
	flag.Parse()
	var err error
	if *child {
		err = work(*service, *content)
	} else {
		err = parent(*listen, *backlog, *workers)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "preforkd:", err)
		os.Exit(1)
	}
}

// parent listens, starts the workers with the socket, says so on stdout
// and waits for a signal; the workers die with it (Pdeathsig).
func parent(listen string, backlog, workers int) error {
	addr, err := netip.ParseAddrPort(listen)
	if err != nil || !addr.Addr().Is4() {
		return fmt.Errorf("-listen %q: want an IPv4 address:port", listen)
	}
	if workers < 1 || backlog < 1 {
		return fmt.Errorf("%d workers, backlog %d: want at least 1 of each", workers, backlog)
	}
	ln, err := listenBacklog(addr, backlog)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("own path: %w", err)
	}
	args := append([]string{"-child"}, os.Args[1:]...)
	var cmds []*exec.Cmd
	for range workers {
		cmd := exec.Command(self, args...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.ExtraFiles = []*os.File{ln}
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start worker: %w", err)
		}
		cmds = append(cmds, cmd)
	}
	fmt.Printf("listening on %s with backlog %d, %d workers\n", addr, backlog, workers)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	exited := make(chan error, len(cmds))
	for _, cmd := range cmds {
		go func() { exited <- cmd.Wait() }()
	}
	select {
	case <-sig:
		for _, cmd := range cmds {
			_ = cmd.Process.Kill()
		}
		return nil
	case err := <-exited:
		return fmt.Errorf("a worker ended: %v", err)
	}
}

// listenBacklog listens on addr with the given backlog (net.Listen takes
// the system's maximum) and returns the socket as a file to pass on.
func listenBacklog(addr netip.AddrPort, backlog int) (*os.File, error) {
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
	return os.NewFile(uintptr(fd), "listener"), nil
}

// work accepts one connection at a time from fd 3 and serves it.
func work(service time.Duration, content string) error {
	runtime.GOMAXPROCS(1)
	ln, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		return fmt.Errorf("listener from fd 3: %w", err)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			continue
		}
		serve(c, service, content)
	}
}

func serve(c net.Conn, service time.Duration, content string) {
	defer c.Close()
	drainAtOnce(c)
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	time.Sleep(service)
	status := http.StatusOK
	body, err := os.ReadFile(filepath.Join(content, filepath.FromSlash(path.Clean("/"+req.URL.Path))))
	if err != nil {
		status, body = http.StatusNotFound, nil
	}
	ctype := mime.TypeByExtension(path.Ext(req.URL.Path)) // Go's built-in table has the site's kinds
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	head := "HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\nContent-Type: " + ctype +
		"\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n"
	_, _ = c.Write(append([]byte(head), body...))
}

// drainAtOnce gives the connection a send buffer that holds any of the
// site's responses, so a worker's write returns at once and the worker is
// free when the response's first byte leaves, as behind a buffering proxy.
// With Linux's default buffer (16 KB, growing with the window) the write
// blocked for most of a large response's transfer, a hold that varied
// from connection to connection (seen: a 262 KB response freeing its
// worker at once, a 30 KB one holding it until its last byte). SO_SNDBUFFORCE
// passes net.core.wmem_max; preforkd runs as root.
func drainAtOnce(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 8<<20)
	})
}
