package testbed

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// startSplicer listens on front inside the server namespace and splices
// every accepted connection to back: the client's handshake is answered at
// once by the kernel, the server's connection is opened after the accept
// (its SYN resent by the kernel a second apart five times, then doubling,
// for about two minutes if dropped), and bytes are copied both ways until
// either side closes. Close (via the testbed) stops the listener and every
// open pair.
func startSplicer(tb *Testbed, front, back netip.AddrPort) error {
	return startSplicerWith(tb, front, back, nil)
}

// startSplicerWith is startSplicer, terminating TLS with conf when it is
// set (startTLSSplicer).
func startSplicerWith(tb *Testbed, front, back netip.AddrPort, conf *tls.Config) error {
	var ln net.Listener
	if err := inNS(tb.Server.NS, func() (err error) {
		ln, err = net.Listen("tcp4", front.String())
		return err
	}); err != nil {
		return fmt.Errorf("splicer listen: %w", err)
	}
	sp := &splicer{ns: tb.Server.NS, back: back, tls: conf, open: map[net.Conn]bool{}, last: map[netip.Addr]time.Time{}}
	var stop context.CancelFunc
	sp.dialCtx, stop = context.WithCancel(context.Background())
	sp.wg.Add(1)
	go sp.serve(ln)
	tb.onClose(func() error {
		err := ln.Close()
		stop()
		sp.mu.Lock()
		for c := range sp.open {
			c.Close()
		}
		sp.open = nil
		sp.mu.Unlock()
		sp.wg.Wait()
		return err
	})
	return nil
}

// splicer is the state of a running splicer: its open connections and
// the clients' last connections.
type splicer struct {
	ns   string
	back netip.AddrPort
	tls  *tls.Config // terminate TLS with the client (nil: splice TCP)
	wg   sync.WaitGroup
	// dialCtx ends pending connects when the splicer closes.
	dialCtx context.Context

	mu   sync.Mutex
	open map[net.Conn]bool // nil: closing
	// The server side sees every spliced connection from the server's own
	// address, so it cannot tell a pageview's first connection by the
	// client as the baseline's drop rule does. The splicer marks it
	// instead: the server-side connection for a client's first connection
	// after handshakeIdle gets a source port in spliceFirstPorts, and the
	// server's rule drops the first SYN from those ports (synDropRules).
	last map[netip.Addr]time.Time
	next int
}

// track adds c to the open connections (on) or removes it; false when the
// splicer is closing.
func (sp *splicer) track(c net.Conn, on bool) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.open == nil {
		return false // closing
	}
	if on {
		sp.open[c] = true
	} else {
		delete(sp.open, c)
	}
	return true
}

// markFirst is the source port for the server-side connection of client's
// new connection: one of spliceFirstPortMin..Max for a pageview's first
// connection, else 0 (any).
func (sp *splicer) markFirst(client netip.Addr) int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	now := time.Now()
	prev, seen := sp.last[client]
	sp.last[client] = now
	if seen && now.Sub(prev) <= handshakeIdle {
		return 0
	}
	sp.next++
	return spliceFirstPortMin + sp.next%(spliceFirstPortMax-spliceFirstPortMin+1)
}

// serve accepts connections until the listener closes and splices each.
func (sp *splicer) serve(ln net.Listener) {
	defer sp.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return // listener closed
		}
		if !sp.track(c, true) {
			c.Close()
			return
		}
		sp.wg.Add(1)
		go sp.splice(c)
	}
}

// splice connects to the back end for the accepted c and copies both
// ways until both directions are done. Terminating TLS, it first
// completes the client's TLS handshake and reads the request's head
// (terminate), and connects only then (delayed binding).
func (sp *splicer) splice(c net.Conn) {
	defer sp.wg.Done()
	defer func() { sp.track(c, false); c.Close() }()
	var s net.Conn
	port := 0
	if ra, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		port = sp.markFirst(ra.AddrPort().Addr().Unmap())
	}
	front, head := c, []byte(nil)
	if sp.tls != nil {
		var err error
		if front, head, err = sp.terminate(c); err != nil {
			return
		}
	}
	err := inNS(sp.ns, func() (err error) {
		// No timeout of its own: connect(2) resends the SYN on the
		// kernel's timer until the server takes it (about two minutes
		// with the default tcp_syn_retries), which is the splicer the
		// what-if's SPLICE describes. With a 20 s timeout, a splicer in
		// front of a server overloaded for a minute dropped requests.
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: sp.back.Addr().AsSlice(), Port: port}}
		s, err = d.DialContext(sp.dialCtx, "tcp4", sp.back.String())
		return err
	})
	if err != nil || !sp.track(s, true) {
		if s != nil {
			s.Close()
		}
		return
	}
	defer func() { sp.track(s, false); s.Close() }()
	if len(head) > 0 {
		if _, err := s.Write(head); err != nil {
			return // the request, read while binding
		}
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		tc, isTCP := dst.(*net.TCPConn)
		cw, halfCloses := dst.(interface{ CloseWrite() error })
		switch {
		case errors.Is(err, syscall.ECONNRESET) && isTCP:
			// A reset passes on as a reset, either way, as a splicer
			// relaying TCP does: the overloaded server resets a connection
			// whose handshake it forgot, and the client must see what a
			// client of the server itself sees, not a clean end.
			tc.SetLinger(0)
			tc.Close()
		case halfCloses:
			cw.CloseWrite() // a TCP FIN, or TLS close_notify
		}
		done <- struct{}{}
	}
	go pipe(s, front)
	go pipe(front, s)
	<-done
	<-done
}
