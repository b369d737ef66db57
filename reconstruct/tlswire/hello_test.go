package tlswire

import (
	"crypto/tls"
	mrand "math/rand/v2"
	"slices"
	"testing"

	"golang.org/x/crypto/cryptobyte"
)

// hsMsg wraps a body in a handshake message header.
func hsMsg(typ HandshakeType, body []byte) []byte {
	n := len(body)
	return append([]byte{byte(typ), byte(n >> 16), byte(n >> 8), byte(n)}, body...)
}

type chOptions struct {
	sni       string
	alpn      []string
	versions  []uint16
	ticket    []byte
	psk       bool
	earlyData bool
	keyShares []uint16
}

// clientHello builds a ClientHello body the way RFC 8446 4.1.2 lays it out.
func clientHello(t testing.TB, o chOptions) []byte {
	t.Helper()
	var b cryptobyte.Builder
	b.AddUint16(tls.VersionTLS12)
	b.AddBytes(make([]byte, helloRandomLen))
	b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(make([]byte, 32)) })
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, cs := range []uint16{0x2a2a, tls.TLS_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256} {
			b.AddUint16(cs)
		}
	})
	b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint8(0) })
	b.AddUint16LengthPrefixed(func(exts *cryptobyte.Builder) {
		ext := func(typ uint16, body func(*cryptobyte.Builder)) {
			exts.AddUint16(typ)
			exts.AddUint16LengthPrefixed(body)
		}
		ext(0x0a0a, func(*cryptobyte.Builder) {}) // GREASE
		if o.sni != "" {
			ext(extServerName, func(b *cryptobyte.Builder) {
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint8(serverNameTypeHostName)
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(o.sni)) })
				})
			})
		}
		if o.alpn != nil {
			ext(extALPN, func(b *cryptobyte.Builder) {
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					for _, p := range o.alpn {
						b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(p)) })
					}
				})
			})
		}
		if o.versions != nil {
			ext(extSupportedVersions, func(b *cryptobyte.Builder) {
				b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) {
					for _, v := range o.versions {
						b.AddUint16(v)
					}
				})
			})
		}
		if o.ticket != nil {
			ext(extSessionTicket, func(b *cryptobyte.Builder) { b.AddBytes(o.ticket) })
		}
		if o.keyShares != nil {
			ext(extKeyShare, func(b *cryptobyte.Builder) {
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					for _, g := range o.keyShares {
						b.AddUint16(g)
						b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(make([]byte, 32)) })
					}
				})
			})
		}
		if o.earlyData {
			ext(extEarlyData, func(*cryptobyte.Builder) {})
		}
		if o.psk { // last, as RFC 8446 4.2.11 requires
			ext(extPreSharedKey, func(b *cryptobyte.Builder) {
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte("ticket")) })
					b.AddUint32(0)
				})
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(make([]byte, 32)) })
				})
			})
		}
	})
	out, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// serverHello builds a TLS 1.3 ServerHello selecting PSK 0 with an X25519
// share, or a HelloRetryRequest asking for P-256.
func serverHello(t testing.TB, hrr bool) []byte {
	t.Helper()
	var b cryptobyte.Builder
	b.AddUint16(tls.VersionTLS12)
	random := make([]byte, helloRandomLen)
	if hrr {
		random = helloRetryRequestRandom
	}
	b.AddBytes(random)
	b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(make([]byte, 32)) })
	b.AddUint16(tls.TLS_AES_128_GCM_SHA256)
	b.AddUint8(0)
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint16(extSupportedVersions)
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint16(tls.VersionTLS13) })
		b.AddUint16(extKeyShare)
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			if hrr {
				b.AddUint16(uint16(tls.CurveP256))
				return
			}
			b.AddUint16(uint16(tls.X25519))
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(make([]byte, 32)) })
		})
		if !hrr {
			b.AddUint16(extPreSharedKey)
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint16(0) })
		}
	})
	out, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestParseClientHello(t *testing.T) {
	body := clientHello(t, chOptions{
		sni: testHost, alpn: testALPN, versions: []uint16{0x3a3a, 0x0304, 0x0303}, ticket: []byte("t"),
		psk: true, earlyData: true, keyShares: []uint16{0x2a2a, uint16(tls.X25519MLKEM768), uint16(tls.X25519)},
	})
	ch, err := parseClientHello(body)
	if err != nil {
		t.Fatal(err)
	}
	want := ClientHello{LegacyVersion: tls.VersionTLS12, SupportedVersions: []uint16{0x3a3a, 0x0304, 0x0303},
		ServerName: testHost, ALPN: testALPN, CipherSuites: 3, SessionID: make([]byte, 32), SessionTicket: true,
		PSK: true, EarlyData: true, KeyShareGroups: []uint16{0x2a2a, uint16(tls.X25519MLKEM768), uint16(tls.X25519)}}
	if !equalCH(ch, &want) {
		t.Fatalf("got %+v\nwant %+v", ch, want)
	}
	if ch.offersOnlyTLS13() {
		t.Error("offers TLS 1.2 too")
	}
	// An empty session_ticket extension offers no resumption; no
	// extensions at all is an old but valid hello.
	ch, _ = parseClientHello(clientHello(t, chOptions{ticket: []byte{}}))
	if ch.SessionTicket {
		t.Error("empty session ticket taken as an offer")
	}
	old := clientHello(t, chOptions{})
	old = old[:len(old)-2-4] // drop the extensions block (GREASE only)
	if ch, err := parseClientHello(old); err != nil || ch.CipherSuites != 3 {
		t.Errorf("hello without extensions: %+v %v", ch, err)
	}
}

func equalCH(a, b *ClientHello) bool {
	return a.LegacyVersion == b.LegacyVersion && slices.Equal(a.SupportedVersions, b.SupportedVersions) &&
		a.ServerName == b.ServerName && slices.Equal(a.ALPN, b.ALPN) && a.CipherSuites == b.CipherSuites &&
		slices.Equal(a.SessionID, b.SessionID) && a.SessionTicket == b.SessionTicket && a.PSK == b.PSK &&
		a.EarlyData == b.EarlyData && slices.Equal(a.KeyShareGroups, b.KeyShareGroups)
}

func TestParseServerHello(t *testing.T) {
	sh, err := parseServerHello(serverHello(t, false))
	if err != nil || sh.HelloRetryRequest || sh.Version() != tls.VersionTLS13 || !sh.PSK ||
		sh.KeyShareGroup != uint16(tls.X25519) || sh.CipherSuite != tls.TLS_AES_128_GCM_SHA256 {
		t.Fatalf("ServerHello %+v %v", sh, err)
	}
	hrr, err := parseServerHello(serverHello(t, true))
	if err != nil || !hrr.HelloRetryRequest || hrr.KeyShareGroup != uint16(tls.CurveP256) || hrr.PSK {
		t.Fatalf("HelloRetryRequest %+v %v", hrr, err)
	}
	if Resumed(&ClientHello{}, hrr) || Resumed(nil, sh) {
		t.Error("resumed by a HelloRetryRequest or without a ClientHello")
	}
	// TLS 1.2: resumption is the echo of a non-empty session id.
	id := []byte{1, 2, 3}
	if !Resumed(&ClientHello{SessionID: id}, &ServerHello{LegacyVersion: tls.VersionTLS12, SessionID: id}) ||
		Resumed(&ClientHello{SessionID: id}, &ServerHello{LegacyVersion: tls.VersionTLS12, SessionID: []byte{9}}) ||
		Resumed(&ClientHello{}, &ServerHello{LegacyVersion: tls.VersionTLS12}) {
		t.Error("TLS 1.2 session id echo")
	}
}

func TestLooksLikeClientHello(t *testing.T) {
	cc, sc := configs(t, tls.VersionTLS13)
	first := runSession(t, cc, sc).log.writes[0]
	if !first.fromClient {
		t.Fatal("first write not the client's")
	}
	for n := 0; n <= 16; n++ {
		if got := LooksLikeClientHello(first.b[:n]); got != (n >= 6) {
			t.Errorf("prefix of %d bytes: %v", n, got)
		}
	}
	if !LooksLikeClientHello(first.b) {
		t.Error("whole ClientHello")
	}
	// mutate sets the bytes at i to vs in a copy of the hello's start.
	mutate := func(i int, vs ...byte) []byte {
		b := slices.Clone(first.b[:16])
		copy(b[i:], vs)
		return b
	}
	for name, b := range map[string][]byte{
		"application data": mutate(0, 23),
		"record version":   mutate(1, 2),
		"SSL 3.0 record":   mutate(2, 0),
		"ServerHello":      mutate(5, 2),
		"hello too short":  mutate(6, 0, 0, 10),
		"hello version":    mutate(9, 4),
		"SSL 2.0 hello":    {0x80, 0x2e, 0x01, 0x03, 0x01, 0x00, 0x15},
		"HTTP":             []byte("GET / HTTP/1.1\r\n"),
		"empty record":     {22, 3, 1, 0, 0, 1},
	} {
		if LooksLikeClientHello(b) {
			t.Errorf("%s taken for a ClientHello", name)
		}
	}
	rng := mrand.New(mrand.NewPCG(19, 20))
	if b := randomBody(rng, 64); LooksLikeClientHello(b) {
		t.Errorf("random bytes %x", b[:6])
	}
}
