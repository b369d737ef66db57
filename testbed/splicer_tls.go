package testbed

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"
)

// The TLS-terminating splicer (SPLICE TERMINATE TLS): as startSplicer, the
// kernel answers the client's TCP handshake; the splicer then runs the TLS
// handshake with the client itself (crypto/tls, a certificate of the
// testbed's own as nginx's), reads until the client's first request head
// is complete, and only then connects to the server behind it in cleartext
// HTTP (delayed binding), writes what it read and copies both ways, TLS
// towards the client. The pageview's first server-side connection is
// marked by its source port as in the TCP splicer (markFirst), so the
// server's SYN drops apply behind the splicer.

// spliceHeadTimeout bounds the TLS handshake and request head a
// terminating splicer waits for before it gives up on a client.
const spliceHeadTimeout = 30 * time.Second

// maxSpliceHead bounds a request head the splicer buffers.
const maxSpliceHead = 64 << 10

// startTLSSplicer writes a self-signed certificate for the server's
// address and name (as StartNginx does for NginxTLS) under the testbed's
// directory and starts a splicer that terminates TLS on front with it and
// speaks cleartext HTTP to back. caFile verifies the splicer (the
// certificate itself).
func startTLSSplicer(tb *Testbed, front, back netip.AddrPort) (caFile string, err error) {
	dir, err := os.MkdirTemp(tb.Dir, "splicer-tls-")
	if err != nil {
		return "", fmt.Errorf("splicer certificate: %w", err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := writeSelfSigned(certFile, keyFile, defaultTLSName, tb.Server.Addr); err != nil {
		return "", fmt.Errorf("splicer: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return "", fmt.Errorf("splicer certificate: %w", err)
	}
	conf := &tls.Config{
		Certificates: []tls.Certificate{cert},
		// HTTP/1.1 only, as the validation's nginx: the splicer reads one
		// request head and hands the rest of the stream to the server.
		NextProtos: []string{"http/1.1"},
		// crypto/tls sends its tickets with its first flight, before the
		// client's Finished, where OpenSSL (nginx) sends two after it;
		// the validation's clients resume nothing, so none are sent.
		SessionTicketsDisabled: true,
		// nginx's OpenSSL (3.0) agrees on X25519; crypto/tls would take
		// the client's X25519MLKEM768, whose 1 KB key share makes the
		// splicer's first flight two segments where nginx's is one.
		CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP256},
	}
	return certFile, startSplicerWith(tb, front, back, conf)
}

// terminate runs the TLS handshake with the client on c and reads until
// the first request's head is complete: the TLS connection and the
// plaintext read so far (the head, and whatever followed it).
func (sp *splicer) terminate(c net.Conn) (net.Conn, []byte, error) {
	tc := tls.Server(c, sp.tls)
	if err := c.SetDeadline(time.Now().Add(spliceHeadTimeout)); err != nil {
		return nil, nil, err
	}
	if err := tc.Handshake(); err != nil {
		return nil, nil, err
	}
	head, err := readRequestHead(tc)
	if err != nil {
		return nil, nil, err
	}
	return tc, head, c.SetDeadline(time.Time{})
}

// readRequestHead reads from c until an HTTP request head (up to its
// blank line) is complete, and returns everything read.
func readRequestHead(c net.Conn) ([]byte, error) {
	var buf []byte
	b := make([]byte, 16<<10)
	for !bytes.Contains(buf, []byte("\r\n\r\n")) {
		if len(buf) > maxSpliceHead {
			return nil, errors.New("request head over 64 KiB")
		}
		n, err := c.Read(b)
		buf = append(buf, b[:n]...)
		if err != nil && !bytes.Contains(buf, []byte("\r\n\r\n")) {
			return nil, err
		}
	}
	return buf, nil
}
