package tlsdecrypt

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/rtmon/rtmon/reconstruct/tlswire"
)

// These tests seal TLS 1.3 records themselves, with the standard
// library's HKDF and AEADs written out here independently of the package,
// for what real Go handshakes cannot produce: TLS_AES_256_GCM_SHA384,
// KeyUpdate, 0-RTT early data, padding, and long losses.

// sealer13 is the test's TLS 1.3 record writer for one traffic secret.
type sealer13 struct {
	t      *testing.T
	id     uint16
	h      func() hash.Hash
	secret []byte
	aead   cipher.AEAD
	iv     []byte
	seq    uint64
}

func testExpandLabel(t *testing.T, h func() hash.Hash, secret []byte, label string, n int) []byte {
	var info []byte
	info = binary.BigEndian.AppendUint16(info, uint16(n))
	info = append(info, byte(6+len(label)))
	info = append(info, "tls13 "+label...)
	info = append(info, 0)
	out, err := hkdf.Expand(h, secret, string(info), n)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func newSealer(t *testing.T, suiteID uint16, secret []byte) *sealer13 {
	s := &sealer13{t: t, id: suiteID, h: sha256.New, secret: secret}
	keyLen := 16
	switch suiteID {
	case 0x1302:
		s.h, keyLen = sha512.New384, 32
	case 0x1303:
		keyLen = 32
	}
	key := testExpandLabel(t, s.h, secret, "key", keyLen)
	s.iv = testExpandLabel(t, s.h, secret, "iv", 12)
	var err error
	if suiteID == 0x1303 {
		s.aead, err = chacha20poly1305.New(key)
	} else {
		var b cipher.Block
		if b, err = aes.NewCipher(key); err == nil {
			s.aead, err = cipher.NewGCM(b)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// seal returns the body of the next record carrying typ and data, with pad
// zero bytes of padding.
func (s *sealer13) seal(typ tlswire.ContentType, data []byte, pad int) []byte {
	inner := append(append(bytes.Clone(data), byte(typ)), make([]byte, pad)...)
	nonce := bytes.Clone(s.iv)
	for i := range 8 {
		nonce[4+i] ^= byte(s.seq >> (56 - 8*i))
	}
	s.seq++
	hdr := []byte{23, 3, 3, 0, 0}
	binary.BigEndian.PutUint16(hdr[3:], uint16(len(inner)+s.aead.Overhead()))
	return s.aead.Seal(nil, nonce, inner, hdr)
}

// keyUpdate seals a KeyUpdate and moves the sealer to the next secret.
func (s *sealer13) keyUpdate() []byte {
	body := s.seal(tlswire.TypeHandshake, []byte{24, 0, 0, 1, 0}, 0)
	next := testExpandLabel(s.t, s.h, s.secret, "traffic upd", len(s.secret))
	*s = *newSealer(s.t, s.id, next)
	return body
}

func secretOf(n int, fill byte) []byte { return bytes.Repeat([]byte{fill}, n) }

func keyLogText(cr []byte, lines map[string][]byte) string {
	var b strings.Builder
	for label, sec := range lines {
		fmt.Fprintf(&b, "%s %x %x\n", label, cr, sec)
	}
	return b.String()
}

func mustSession(t *testing.T, text string, p Params) *Session {
	t.Helper()
	kl, err := ParseKeyLog(strings.NewReader(text), KeyLogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(kl, p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wantPlain(t *testing.T, s *Session, dir Direction, body []byte, typ tlswire.ContentType, data []byte) {
	t.Helper()
	pt, err := s.Decrypt(dir, tlswire.TypeApplicationData, VersionTLS12, body)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	if pt.Type != typ || !bytes.Equal(pt.Data, data) || !pt.Protected {
		t.Fatalf("%s: got %s %q, want %s %q", dir, pt.Type, pt.Data, typ, data)
	}
}

// TestSealedTLS13KeyUpdate: AES-256-GCM (SHA-384) from handshake to
// application secrets, a Certificate message split across records, padded
// records, and two KeyUpdates by the server.
func TestSealedTLS13KeyUpdate(t *testing.T) {
	const id = 0x1302
	cr := secretOf(32, 1)
	sec := map[string][]byte{
		"CLIENT_HANDSHAKE_TRAFFIC_SECRET": secretOf(48, 2), "SERVER_HANDSHAKE_TRAFFIC_SECRET": secretOf(48, 3),
		"CLIENT_TRAFFIC_SECRET_0": secretOf(48, 4), "SERVER_TRAFFIC_SECRET_0": secretOf(48, 5),
	}
	s := mustSession(t, keyLogText(cr, sec), Params{ClientRandom: cr, Version: VersionTLS13, CipherSuite: id})
	shs, sapp := newSealer(t, id, sec["SERVER_HANDSHAKE_TRAFFIC_SECRET"]), newSealer(t, id, sec["SERVER_TRAFFIC_SECRET_0"])
	chs, capp := newSealer(t, id, sec["CLIENT_HANDSHAKE_TRAFFIC_SECRET"]), newSealer(t, id, sec["CLIENT_TRAFFIC_SECRET_0"])

	ee := []byte{8, 0, 0, 2, 0, 0}
	cert := append([]byte{11, 0, 0x01, 0x00}, make([]byte, 256)...)
	fin := append([]byte{20, 0, 0, 48}, make([]byte, 48)...)
	wantPlain(t, s, ServerToClient, shs.seal(tlswire.TypeHandshake, append(ee, cert[:100]...), 0), tlswire.TypeHandshake, append(ee, cert[:100]...))
	wantPlain(t, s, ServerToClient, shs.seal(tlswire.TypeHandshake, cert[100:], 7), tlswire.TypeHandshake, cert[100:])
	wantPlain(t, s, ServerToClient, shs.seal(tlswire.TypeHandshake, fin, 0), tlswire.TypeHandshake, fin)
	wantPlain(t, s, ClientToServer, chs.seal(tlswire.TypeHandshake, fin, 0), tlswire.TypeHandshake, fin)
	wantPlain(t, s, ClientToServer, capp.seal(tlswire.TypeApplicationData, []byte("GET / HTTP/1.1\r\n\r\n"), 30), tlswire.TypeApplicationData, []byte("GET / HTTP/1.1\r\n\r\n"))
	wantPlain(t, s, ServerToClient, sapp.seal(tlswire.TypeApplicationData, []byte("HTTP/1.1 200 OK\r\n"), 0), tlswire.TypeApplicationData, []byte("HTTP/1.1 200 OK\r\n"))
	for i := range 2 {
		wantPlain(t, s, ServerToClient, sapp.keyUpdate(), tlswire.TypeHandshake, []byte{24, 0, 0, 1, 0})
		msg := []byte(fmt.Sprintf("after key update %d", i+1))
		wantPlain(t, s, ServerToClient, sapp.seal(tlswire.TypeApplicationData, msg, 0), tlswire.TypeApplicationData, msg)
	}
	wantPlain(t, s, ClientToServer, capp.seal(tlswire.TypeApplicationData, []byte("still _0"), 0), tlswire.TypeApplicationData, []byte("still _0"))
	if st := s.Stats(); st.KeyUpdates != 2 || st.Decrypted != 11 || st.AuthFailures != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestSealedEarlyData: 0-RTT accepted and decrypted; offered without the
// early secret (reported, then the handshake key is found); rejected by
// the server (the client moves to its handshake key without
// EndOfEarlyData).
func TestSealedEarlyData(t *testing.T) {
	const id = 0x1303
	cr := secretOf(32, 9)
	sec := map[string][]byte{
		"CLIENT_EARLY_TRAFFIC_SECRET": secretOf(32, 1), "CLIENT_HANDSHAKE_TRAFFIC_SECRET": secretOf(32, 2),
		"SERVER_HANDSHAKE_TRAFFIC_SECRET": secretOf(32, 3), "CLIENT_TRAFFIC_SECRET_0": secretOf(32, 4),
		"SERVER_TRAFFIC_SECRET_0": secretOf(32, 5),
	}
	fin := append([]byte{20, 0, 0, 32}, make([]byte, 32)...)
	eoed := []byte{5, 0, 0, 0}
	for _, tc := range []struct {
		name              string
		withSecret, eoed  bool
		wantEarly, failed int
	}{
		{"accepted", true, true, 3, 0},
		{"no early secret", false, true, 0, 3},
		{"rejected", true, false, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := map[string][]byte{}
			for k, v := range sec {
				if k != "CLIENT_EARLY_TRAFFIC_SECRET" || tc.withSecret {
					lines[k] = v
				}
			}
			s := mustSession(t, keyLogText(cr, lines), Params{ClientRandom: cr, Version: VersionTLS13, CipherSuite: id, EarlyData: true})
			early := newSealer(t, id, sec["CLIENT_EARLY_TRAFFIC_SECRET"])
			bodies := [][]byte{early.seal(tlswire.TypeApplicationData, []byte("GET /early"), 0),
				early.seal(tlswire.TypeApplicationData, []byte("more early"), 0)}
			if tc.eoed {
				bodies = append(bodies, early.seal(tlswire.TypeHandshake, eoed, 0))
			}
			for _, b := range bodies {
				pt, err := s.Decrypt(ClientToServer, tlswire.TypeApplicationData, VersionTLS12, b)
				if tc.withSecret != (err == nil) || err != nil && (!errors.Is(err, ErrEarlyData) || pt.Data != nil) {
					t.Fatalf("early record: %v", err)
				}
			}
			chs, capp := newSealer(t, id, sec["CLIENT_HANDSHAKE_TRAFFIC_SECRET"]), newSealer(t, id, sec["CLIENT_TRAFFIC_SECRET_0"])
			wantPlain(t, s, ClientToServer, chs.seal(tlswire.TypeHandshake, fin, 0), tlswire.TypeHandshake, fin)
			wantPlain(t, s, ClientToServer, capp.seal(tlswire.TypeApplicationData, []byte("GET /"), 0), tlswire.TypeApplicationData, []byte("GET /"))
			if st := s.Stats(); st.EarlyDecrypted != tc.wantEarly || st.EarlyFailed != tc.failed || st.AuthFailures != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// TestSealedLoss: a loss within the trial window is passed; a longer one
// needs the Skipped hint; without it the records fail, with no plaintext.
func TestSealedLoss(t *testing.T) {
	const id = 0x1301
	cr := secretOf(32, 7)
	sec := map[string][]byte{"SERVER_TRAFFIC_SECRET_0": secretOf(32, 8)}
	s := mustSession(t, keyLogText(cr, sec), Params{ClientRandom: cr, Version: VersionTLS13, CipherSuite: id})
	w := newSealer(t, id, sec["SERVER_TRAFFIC_SECRET_0"])
	var bodies [][]byte
	for i := range 40 {
		bodies = append(bodies, w.seal(tlswire.TypeApplicationData, []byte{byte(i)}, 0))
	}
	check := func(i int, ok bool) {
		t.Helper()
		pt, err := s.Decrypt(ServerToClient, tlswire.TypeApplicationData, VersionTLS12, bodies[i])
		if ok && (err != nil || !bytes.Equal(pt.Data, []byte{byte(i)})) || !ok && (!errors.Is(err, ErrAuth) || pt.Data != nil) {
			t.Fatalf("record %d: %v %q", i, err, pt.Data)
		}
	}
	check(0, true) // no handshake secret: the application key is found by trial
	check(4, true) // 3 lost: within the window
	check(20, false)
	s.Skipped(ServerToClient, 15) // records 5..19
	check(20, true)
	check(21, true)
	if st := s.Stats(); st.Recovered != 1 || st.AuthFailures != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestSealedMalformed(t *testing.T) {
	const id = 0x1301
	cr := secretOf(32, 7)
	sec := map[string][]byte{"SERVER_TRAFFIC_SECRET_0": secretOf(32, 8)}
	s := mustSession(t, keyLogText(cr, sec), Params{ClientRandom: cr, Version: VersionTLS13, CipherSuite: id})
	w := newSealer(t, id, sec["SERVER_TRAFFIC_SECRET_0"])
	body := w.seal(0, nil, 5) // inner plaintext of zeros only
	if pt, err := s.Decrypt(ServerToClient, tlswire.TypeApplicationData, VersionTLS12, body); !errors.Is(err, ErrMalformed) || pt.Data != nil {
		t.Fatalf("all-zero inner plaintext: %v", err)
	}
	if _, err := s.Decrypt(ServerToClient, tlswire.TypeApplicationData, VersionTLS12, make([]byte, maxCiphertext+1)); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
	for _, n := range []int{0, 1, 15, 16} {
		if _, err := s.Decrypt(ServerToClient, tlswire.TypeApplicationData, VersionTLS12, make([]byte, n)); !errors.Is(err, ErrAuth) {
			t.Fatalf("%d-byte body: %v", n, err)
		}
	}
	if _, err := s.Decrypt(Direction(7), tlswire.TypeApplicationData, VersionTLS12, nil); err == nil {
		t.Fatal("bad direction accepted")
	}
}

func TestNewSessionErrors(t *testing.T) {
	cr := secretOf(32, 1)
	kl, _ := ParseKeyLog(strings.NewReader("CLIENT_RANDOM "+hex.EncodeToString(cr)+" "+hex.EncodeToString(secretOf(48, 2))+"\n"), KeyLogOptions{})
	sr := secretOf(32, 3)
	for _, tc := range []struct {
		p    Params
		want error
	}{
		{Params{ClientRandom: cr, ServerRandom: sr, Version: VersionTLS12, CipherSuite: 0x002F}, ErrUnsupportedSuite}, // AES-CBC
		{Params{ClientRandom: cr, ServerRandom: sr, Version: VersionTLS12, CipherSuite: 0x1301}, ErrUnsupportedSuite},
		{Params{ClientRandom: cr, ServerRandom: sr, Version: 0x0302, CipherSuite: 0xC02F}, ErrUnsupportedVersion},
		{Params{ClientRandom: secretOf(32, 9), ServerRandom: sr, Version: VersionTLS12, CipherSuite: 0xC02F}, ErrNoSecret},
		{Params{ClientRandom: cr[:5], ServerRandom: sr, Version: VersionTLS12, CipherSuite: 0xC02F}, ErrNoSecret},
		{Params{ClientRandom: cr, Version: VersionTLS13, CipherSuite: 0x1301}, ErrNoSecret},
	} {
		if _, err := NewSession(kl, tc.p); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.p, err, tc.want)
		}
	}
	if _, err := NewSession(kl, Params{ClientRandom: cr, ServerRandom: sr[:3], Version: VersionTLS12, CipherSuite: 0xC02F}); err == nil {
		t.Error("short server random accepted")
	}
	if !Supported(VersionTLS13, 0x1303) || Supported(VersionTLS12, 0x1303) || Supported(VersionTLS12, 0x002F) {
		t.Error("Supported")
	}
}
