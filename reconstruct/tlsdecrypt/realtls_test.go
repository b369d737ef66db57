package tlsdecrypt

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct/tlswire"
)

// Which suites real crypto/tls handshakes prove here:
//   - TLS 1.3 TLS_AES_128_GCM_SHA256 (Go's choice with AES hardware) and
//     TLS_CHACHA20_POLY1305_SHA256 (forced by a client whose first cipher
//     suite preference is a ChaCha20 one: Go's server then prefers ChaCha20
//     for TLS 1.3 too);
//   - TLS 1.2 ECDHE-ECDSA and ECDHE-RSA with AES-128-GCM, AES-256-GCM and
//     ChaCha20-Poly1305, and RSA key exchange with AES-128-GCM and
//     AES-256-GCM (an explicit Config.CipherSuites still allows it).
// TLS 1.3 TLS_AES_256_GCM_SHA384 cannot be negotiated between two Go
// endpoints (Go's TLS 1.3 preference always puts AES-128 first), so it is
// covered by records this test seals with the standard library's AEAD
// (sealed_test.go), as is KeyUpdate, which Go never sends unasked. The
// RFC 8448 vectors (rfc8448_test.go) check key derivation and a published
// TLS 1.3 AES-128-GCM record.

var testCerts = sync.OnceValues(func() ([]tls.Certificate, error) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	var out []tls.Certificate
	for _, key := range []any{ec, rk} {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
			DNSNames: []string{"test"}, NotBefore: time.Unix(0, 0), NotAfter: time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC),
			KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment}
		pub := key.(crypto.Signer).Public()
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
		if err != nil {
			return nil, err
		}
		out = append(out, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key})
	}
	return out, nil
})

// recordingConn keeps a copy of all bytes written through it.
type recordingConn struct {
	net.Conn
	mu  sync.Mutex
	out bytes.Buffer
}

func (c *recordingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.out.Write(p[:n])
	c.mu.Unlock()
	return n, err
}

func (c *recordingConn) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.out.Bytes())
}

// capture is what a monitor would have seen of one connection.
type capture struct {
	keyLog          []byte
	client, server  []byte // raw bytes each side sent
	version, suite  uint16
	requests, resps [][]byte
}

// exchange runs a real handshake and two request/response rounds, the
// second response larger than a record, over an in-memory pipe.
func exchange(t *testing.T, ccfg, scfg *tls.Config) capture {
	t.Helper()
	certs, err := testCerts()
	if err != nil {
		t.Fatal(err)
	}
	var keyLog bytes.Buffer
	scfg.Certificates = certs
	ccfg.InsecureSkipVerify = true
	ccfg.KeyLogWriter = &keyLog
	a, b := net.Pipe()
	cconn, sconn := &recordingConn{Conn: a}, &recordingConn{Conn: b}
	defer a.Close()
	defer b.Close()
	reqs := [][]byte{[]byte("GET /a HTTP/1.1\r\nHost: test\r\n\r\n"),
		append([]byte("POST /b HTTP/1.1\r\nHost: test\r\nContent-Length: 20000\r\n\r\n"), bytes.Repeat([]byte("q"), 20000)...)}
	resps := [][]byte{[]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"),
		append([]byte("HTTP/1.1 200 OK\r\nContent-Length: 40000\r\n\r\n"), bytes.Repeat([]byte("r"), 40000)...)}
	srvErr := make(chan error, 1)
	go func() {
		srv := tls.Server(sconn, scfg)
		for i, req := range reqs {
			got := make([]byte, len(req))
			if _, err := io.ReadFull(srv, got); err != nil {
				srvErr <- err
				return
			}
			if _, err := srv.Write(resps[i]); err != nil {
				srvErr <- err
				return
			}
		}
		srvErr <- nil
	}()
	cli := tls.Client(cconn, ccfg)
	for i, req := range reqs {
		if _, err := cli.Write(req); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(resps[i]))
		if _, err := io.ReadFull(cli, got); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-srvErr; err != nil {
		t.Fatal(err)
	}
	st := cli.ConnectionState()
	return capture{keyLog: keyLog.Bytes(), client: cconn.bytes(), server: sconn.bytes(),
		version: st.Version, suite: st.CipherSuite, requests: reqs, resps: resps}
}

type rawRecord struct {
	typ     tlswire.ContentType
	version uint16
	body    []byte
}

// splitRecords frames a byte stream by its 5-byte record headers.
func splitRecords(t testing.TB, b []byte) []rawRecord {
	var out []rawRecord
	for len(b) > 0 {
		if len(b) < 5 {
			t.Fatalf("%d bytes left after the last record", len(b))
		}
		n := int(binary.BigEndian.Uint16(b[3:5]))
		if len(b) < 5+n {
			t.Fatalf("record of %d bytes cut at %d", n, len(b)-5)
		}
		out = append(out, rawRecord{tlswire.ContentType(b[0]), binary.BigEndian.Uint16(b[1:3]), b[5 : 5+n]})
		b = b[5+n:]
	}
	return out
}

// helloRandom reads the random of the first hello of a direction.
func helloRandom(t testing.TB, recs []rawRecord) []byte {
	if len(recs) == 0 || recs[0].typ != tlswire.TypeHandshake || len(recs[0].body) < 38 {
		t.Fatal("no hello first")
	}
	return recs[0].body[6:38]
}

// decryptAll feeds every record of a direction and returns the application
// data plaintext, failing on any error.
func decryptAll(t *testing.T, s *Session, dir Direction, recs []rawRecord) (app []byte, types map[tlswire.ContentType]int) {
	t.Helper()
	types = map[tlswire.ContentType]int{}
	for i, r := range recs {
		pt, err := s.Decrypt(dir, r.typ, r.version, r.body)
		if err != nil {
			t.Fatalf("%s record %d (%s, %d bytes): %v", dir, i, r.typ, len(r.body), err)
		}
		if pt.Protected {
			types[pt.Type]++
		}
		if pt.Type == tlswire.TypeApplicationData && pt.Protected {
			app = append(app, pt.Data...)
		}
	}
	return app, types
}

func sessionFor(t *testing.T, c capture) (*Session, []rawRecord, []rawRecord) {
	t.Helper()
	kl, err := ParseKeyLog(bytes.NewReader(c.keyLog), KeyLogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crecs, srecs := splitRecords(t, c.client), splitRecords(t, c.server)
	s, err := NewSession(kl, Params{ClientRandom: helloRandom(t, crecs), ServerRandom: helloRandom(t, srecs),
		Version: c.version, CipherSuite: c.suite})
	if err != nil {
		t.Fatal(err)
	}
	return s, crecs, srecs
}

func checkCapture(t *testing.T, c capture) *Session {
	t.Helper()
	s, crecs, srecs := sessionFor(t, c)
	capp, ctypes := decryptAll(t, s, ClientToServer, crecs)
	sapp, stypes := decryptAll(t, s, ServerToClient, srecs)
	if want := bytes.Join(c.requests, nil); !bytes.Equal(capp, want) {
		t.Errorf("client plaintext: %d bytes, want %d identical", len(capp), len(want))
	}
	if want := bytes.Join(c.resps, nil); !bytes.Equal(sapp, want) {
		t.Errorf("server plaintext: %d bytes, want %d identical", len(sapp), len(want))
	}
	if ctypes[tlswire.TypeHandshake] == 0 || stypes[tlswire.TypeHandshake] == 0 {
		t.Errorf("no decrypted handshake (Finished) records: client %v server %v", ctypes, stypes)
	}
	st := s.Stats()
	if st.AuthFailures != 0 || st.Recovered != 0 || st.Malformed != 0 {
		t.Errorf("stats %+v", st)
	}
	if n := len(c.resps[1]); stypes[tlswire.TypeApplicationData] < n/16384+1 {
		t.Errorf("the large response spans %d records, want more than one", stypes[tlswire.TypeApplicationData])
	}
	return s
}

func TestRealTLS13(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first uint16 // the client's first TLS 1.2 suite, steering Go's TLS 1.3 choice
		want  uint16
	}{
		{"AES128GCM", tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_AES_128_GCM_SHA256},
		{"ChaCha20", tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_CHACHA20_POLY1305_SHA256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ccfg := &tls.Config{MinVersion: tls.VersionTLS12, CipherSuites: []uint16{tc.first}}
			c := exchange(t, ccfg, &tls.Config{})
			if c.version != tls.VersionTLS13 {
				t.Fatalf("negotiated %#x", c.version)
			}
			if c.suite != tc.want {
				t.Skipf("Go chose %s here (no AES hardware?)", tls.CipherSuiteName(c.suite))
			}
			s := checkCapture(t, c)
			if s.Stats().DummyCCS == 0 {
				t.Error("Go's compatibility ChangeCipherSpec was not seen")
			}
		})
	}
}

func TestRealTLS12(t *testing.T) {
	for _, id := range []uint16{
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
		tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		tls.TLS_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_RSA_WITH_AES_256_GCM_SHA384,
	} {
		t.Run(tls.CipherSuiteName(id), func(t *testing.T) {
			cfg := func() *tls.Config {
				return &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{id}}
			}
			c := exchange(t, cfg(), cfg())
			if c.version != tls.VersionTLS12 || c.suite != id {
				t.Fatalf("negotiated %#x %s", c.version, tls.CipherSuiteName(c.suite))
			}
			checkCapture(t, c)
		})
	}
}

// TestRealWrongKeyNeverYieldsPlaintext: a session made from another
// connection's key log entry authenticates nothing and returns no bytes.
func TestRealWrongKeyNeverYieldsPlaintext(t *testing.T) {
	for _, maxV := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		c1 := exchange(t, &tls.Config{MaxVersion: maxV}, &tls.Config{})
		c2 := exchange(t, &tls.Config{MaxVersion: maxV}, &tls.Config{})
		if c1.suite != c2.suite {
			t.Fatalf("suites differ: %#x %#x", c1.suite, c2.suite)
		}
		kl, _ := ParseKeyLog(bytes.NewReader(c2.keyLog), KeyLogOptions{})
		crecs, srecs := splitRecords(t, c1.client), splitRecords(t, c1.server)
		s, err := NewSession(kl, Params{ClientRandom: helloRandom(t, splitRecords(t, c2.client)),
			ServerRandom: helloRandom(t, srecs), Version: c1.version, CipherSuite: c1.suite})
		if err != nil {
			t.Fatal(err)
		}
		protected := 0
		for _, dir := range []Direction{ClientToServer, ServerToClient} {
			recs := crecs
			if dir == ServerToClient {
				recs = srecs
			}
			for _, r := range recs {
				pt, err := s.Decrypt(dir, r.typ, r.version, r.body)
				if pt.Protected {
					t.Fatalf("wrong key decrypted a %s record", dir)
				}
				if err != nil {
					protected++
					if pt.Data != nil || !errors.Is(err, ErrAuth) {
						t.Fatalf("error %v with %d bytes", err, len(pt.Data))
					}
				}
			}
		}
		if protected == 0 || s.Stats().AuthFailures != protected {
			t.Errorf("%d failures, stats %+v", protected, s.Stats())
		}
	}
}

// TestRealLossAndCorruption: a corrupted record fails alone; lost records
// (here a truncated one) are passed by the bounded trial.
func TestRealLossAndCorruption(t *testing.T) {
	for _, maxV := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		c := exchange(t, &tls.Config{MaxVersion: maxV}, &tls.Config{})
		s, _, srecs := sessionFor(t, c)
		n := len(srecs)
		lastThree := srecs[n-3:]
		for _, r := range srecs[:n-3] {
			if _, err := s.Decrypt(ServerToClient, r.typ, r.version, r.body); err != nil {
				t.Fatal(err)
			}
		}
		bad := bytes.Clone(lastThree[0].body)
		bad[len(bad)/2] ^= 1
		if pt, err := s.Decrypt(ServerToClient, lastThree[0].typ, lastThree[0].version, bad); !errors.Is(err, ErrAuth) || pt.Data != nil {
			t.Fatalf("corrupted record: %v, %d bytes", err, len(pt.Data))
		}
		if _, err := s.Decrypt(ServerToClient, lastThree[1].typ, lastThree[1].version, lastThree[1].body[:len(lastThree[1].body)-1]); !errors.Is(err, ErrAuth) {
			t.Fatalf("truncated record: %v", err)
		}
		pt, err := s.Decrypt(ServerToClient, lastThree[2].typ, lastThree[2].version, lastThree[2].body)
		if err != nil || !bytes.HasSuffix(c.resps[1], pt.Data) {
			t.Fatalf("record after two bad ones: %v", err)
		}
		if st := s.Stats(); st.AuthFailures != 2 || st.Recovered != 1 {
			t.Errorf("stats %+v", st)
		}
	}
}

// TestRealTLS12WithoutChangeCipherSpec: a capture that starts after the
// ChangeCipherSpec and Finished (or a caller that does not feed them):
// application data implies the change, and the trial passes the Finished's
// sequence number.
func TestRealTLS12WithoutChangeCipherSpec(t *testing.T) {
	c := exchange(t, &tls.Config{MaxVersion: tls.VersionTLS12}, &tls.Config{})
	s, _, srecs := sessionFor(t, c)
	var app []byte
	started := false
	for _, r := range srecs {
		started = started || r.typ == tlswire.TypeApplicationData
		if !started {
			continue
		}
		pt, err := s.Decrypt(ServerToClient, r.typ, r.version, r.body)
		if err != nil {
			t.Fatal(err)
		}
		app = append(app, pt.Data...)
	}
	if !bytes.Equal(app, bytes.Join(c.resps, nil)) || s.Stats().Recovered != 1 {
		t.Errorf("%d bytes, stats %+v", len(app), s.Stats())
	}
}
