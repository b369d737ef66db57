package testbed

// HTTPS for the what-if validation (ValidationSpec.HTTPS): nginx serves
// the site over TLS (HTTP/1.1; the Go client takes TLS 1.3), or, with
// SpliceProxy, the TLS-terminating splicer (splicer_tls.go) does in front
// of a cleartext nginx; the clients verify the certificate they are
// served (the testbed's self-signed one, its own CA) and write their TLS
// secrets to a key log beside the capture (ValidationRun.KeyLog).

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// validationClient is how a run's clients reach the server: the base URL
// and, over HTTPS, their TLS settings.
type validationClient struct {
	base string
	tls  *GoClientTLS
}

// validationClientFor is spec's client for the server ng (whose CAFile
// verifies what the clients reach: nginx's certificate, or the TLS
// splicer's); over HTTPS it sets run.KeyLog, the key log the testbed
// closes on Close.
func validationClientFor(tb *Testbed, spec ValidationSpec, ng *Nginx, run *ValidationRun) (validationClient, error) {
	if !spec.HTTPS {
		return validationClient{base: "http://" + tb.Server.Addr.String()}, nil
	}
	if ng == nil || ng.CAFile == "" {
		return validationClient{}, errors.New("HTTPS needs nginx with TLS or the TLS splicer")
	}
	ca, err := os.ReadFile(ng.CAFile)
	if err != nil {
		return validationClient{}, fmt.Errorf("server certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return validationClient{}, fmt.Errorf("server certificate %s: no PEM certificate", ng.CAFile)
	}
	run.KeyLog = filepath.Join(tb.Dir, spec.Name+".keys")
	f, err := os.OpenFile(run.KeyLog, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return validationClient{}, fmt.Errorf("key log: %w", err)
	}
	tb.onClose(f.Close)
	return validationClient{base: "https://" + tb.Server.Addr.String(), tls: &GoClientTLS{
		Addr: netip.AddrPortFrom(tb.Server.Addr, 443), KeyLog: &lockedWriter{w: f}, RootCAs: pool}}, nil
}

// startValidationSplicer starts spec's splicer in front of nginx on
// spliceBackendPort: on port 443 terminating TLS (HTTPS), returning the
// certificate file that verifies it, else on port 80.
func startValidationSplicer(tb *Testbed, spec ValidationSpec) (caFile string, err error) {
	back := netip.AddrPortFrom(tb.Server.Addr, spliceBackendPort)
	if spec.HTTPS {
		return startTLSSplicer(tb, netip.AddrPortFrom(tb.Server.Addr, 443), back)
	}
	return "", startSplicer(tb, netip.AddrPortFrom(tb.Server.Addr, 80), back)
}

// lockedWriter serializes the writes of concurrent TLS connections to
// one key log.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// loadFresh loads a page with one request per connection, at most 6 at a
// time. With persistent connections, which object's request grabs the
// container's idle connection is up to goroutine scheduling, and the critical
// path gains or loses the handshake (one RTT, ~10 % of these pageviews) from
// one load of a page to the next; the validation would then measure that
// lottery instead of the action.
func loadFresh(ctx context.Context, tb *Testbed, local netip.Addr, cl validationClient, path string, timeout time.Duration) (PageTruth, error) {
	g := tb.NewGoClient(local, cl.base)
	g.OneRequestPerConnection = true
	g.RequestTimeout = timeout
	g.TLS = cl.tls
	return g.Load(ctx, path)
}
