package testbed

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"time"
)

// NginxTLS makes nginx serve HTTPS with a certificate made at start.
type NginxTLS struct {
	// Name is the DNS name the certificate holds besides the server's
	// address, and the name (SNI) clients use with Nginx.NameURL.
	// Default "www.rtmon.example" (RFC 2606: never a real name).
	Name string
	// TLS12 pins TLS 1.2 (ssl_protocols TLSv1.2); otherwise nginx offers
	// TLS 1.2 and 1.3 and a current client picks 1.3.
	TLS12 bool
	// HTTP2 offers h2 by ALPN (listen ... ssl http2).
	HTTP2 bool
	// EarlyData pins TLS 1.3 and accepts 0-RTT early data
	// (ssl_early_data on), with lingering_close always: nginx answers
	// early data before the client's Finished (0.5-RTT) and, with
	// Connection: close, may close the socket while the response still
	// waits in the send buffer; the Finished arriving then draws a RST
	// that destroys the rest (seen: 64 KiB at a 40 ms round trip).
	EarlyData bool
}

// defaultTLSName is NginxTLS.Name's default.
const defaultTLSName = "www.rtmon.example"

// protocols is nginx's ssl_protocols value ("" without TLS).
func (o *NginxTLS) protocols() string {
	if o == nil {
		return ""
	}
	if o.TLS12 {
		return "TLSv1.2"
	}
	if o.EarlyData {
		return "TLSv1.3"
	}
	return "TLSv1.2 TLSv1.3"
}

// writeSelfSigned writes a fresh self-signed ECDSA certificate for name
// and addr to certFile and its key to keyFile. Being self-signed, the
// certificate is also the CA file clients verify it with.
func writeSelfSigned(certFile, keyFile, name string, addr netip.Addr) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("certificate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return fmt.Errorf("certificate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour), // clocks of namespaces agree, but be lenient
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{name},
		IPAddresses:           []net.IP{addr.AsSlice()},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("create certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("certificate key: %w", err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("write certificate: %w", err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return fmt.Errorf("write certificate key: %w", err)
	}
	return nil
}
