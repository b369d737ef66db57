package tlsdecrypt

import (
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"

	"github.com/rtmon/rtmon/reconstruct/tlswire"
)

// Direction is the sender of a record.
type Direction uint8

const (
	ClientToServer Direction = iota
	ServerToClient
)

func (d Direction) String() string {
	if d == ClientToServer {
		return "client"
	}
	return "server"
}

// Errors of Decrypt, for errors.Is.
var (
	// ErrAuth: the record did not authenticate under any key and sequence
	// number tried (bytes missing or altered, records lost, wrong key).
	ErrAuth = errors.New("record failed authentication")
	// ErrEarlyData: a TLS 1.3 client record sent as 0-RTT early data that
	// cannot be decrypted (no early secret, or not early data after all).
	ErrEarlyData = errors.New("0-RTT early data record not decryptable")
	// ErrMalformed: a record that authenticated but breaks the protocol
	// (TLS 1.3 inner plaintext of zeros only), or cannot hold a tag.
	ErrMalformed = errors.New("malformed protected record")
	// ErrRecordTooLarge: longer than any protected record may be.
	ErrRecordTooLarge = errors.New("record longer than the protocol allows")
)

// Bounds of the trial decryption that recovers from lost records.
const (
	// maxSeqSkip: sequence numbers tried past the expected one.
	maxSeqSkip = 8
	// maxEarlyRecords: client records of an offered 0-RTT that may fail
	// before failures count as authentication failures.
	maxEarlyRecords = 16
	// maxCiphertext is RFC 5246 6.2.3 (TLS 1.3 allows less).
	maxCiphertext = 1<<14 + 2048
)

// Params describe a connection, from its hellos.
type Params struct {
	ClientRandom []byte // 32 bytes, from the ClientHello: the key log index
	ServerRandom []byte // 32 bytes, from the ServerHello: needed for TLS 1.2
	Version      uint16 // negotiated: VersionTLS12 or VersionTLS13
	CipherSuite  uint16 // selected by the ServerHello
	// EarlyData: the ClientHello offered 0-RTT (early_data extension), so
	// the client's first protected records may be early data.
	EarlyData bool
}

// Plaintext is the content of one record.
type Plaintext struct {
	Type tlswire.ContentType // the real content type (TLS 1.3: from the inner plaintext)
	Data []byte              // a fresh slice the session does not keep
	// Protected: Data was decrypted (not a cleartext record passed through).
	Protected bool
}

// Stats counts what a Session did.
type Stats struct {
	Decrypted      int // protected records decrypted
	Cleartext      int // cleartext records passed through
	AuthFailures   int // records that failed authentication (ErrAuth)
	Malformed      int // authenticated records that break the protocol
	Recovered      int // records found past lost ones by trial
	KeyUpdates     int // TLS 1.3 KeyUpdates followed
	EarlyDecrypted int // 0-RTT records decrypted
	EarlyFailed    int // 0-RTT records not decryptable (ErrEarlyData)
	DummyCCS       int // TLS 1.3 compatibility ChangeCipherSpec records skipped
}

// Session decrypts the records of one connection. It is not safe for
// concurrent use; feed each direction's records in order.
type Session struct {
	suite suite
	dirs  [2]direction
	stats Stats
}

// NewSession prepares the decryption of one connection from its key log
// secrets. It fails with ErrUnsupportedVersion, ErrUnsupportedSuite or
// ErrNoSecret (wrapped).
func NewSession(kl *KeyLog, p Params) (*Session, error) {
	st, err := lookupSuite(p.Version, p.CipherSuite)
	if err != nil {
		return nil, err
	}
	secs, ok := kl.lookup(p.ClientRandom)
	if !ok {
		return nil, fmt.Errorf("tlsdecrypt: client random %x...: %w", head(p.ClientRandom), ErrNoSecret)
	}
	s := &Session{suite: st}
	if st.version == VersionTLS12 {
		err = s.init12(secs, p)
	} else {
		err = s.init13(secs, p)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

func head(b []byte) []byte { return b[:min(len(b), 4)] }

func (s *Session) init12(secs secrets, p Params) error {
	master := secs[kindMaster]
	if master == nil {
		return fmt.Errorf("tlsdecrypt: TLS 1.2 needs a CLIENT_RANDOM line: %w", ErrNoSecret)
	}
	if len(p.ServerRandom) != clientRandomLen {
		return fmt.Errorf("tlsdecrypt: server random of %d bytes, want 32", len(p.ServerRandom))
	}
	ck, sk, civ, siv := s.suite.keyBlock12(master, p.ClientRandom, p.ServerRandom)
	client, err := s.newKeys(ck, civ, nil)
	if err != nil {
		return err
	}
	server, err := s.newKeys(sk, siv, nil)
	if err != nil {
		return err
	}
	s.dirs[ClientToServer].pending = client
	s.dirs[ServerToClient].pending = server
	return nil
}

// init13 starts each direction on its handshake secret, the client on
// its early secret when it offered 0-RTT.
func (s *Session) init13(secs secrets, p Params) error {
	var err error
	have := false
	for _, d := range []struct {
		dir     Direction
		hs, app secretKind
		early   bool // 0-RTT offered: this direction may begin with early data
	}{
		{ClientToServer, kindClientHandshake, kindClientTraffic0, p.EarlyData},
		{ServerToClient, kindServerHandshake, kindServerTraffic0, false},
	} {
		dir := &s.dirs[d.dir]
		if dir.hsKeys, err = s.keysFromSecret(secs[d.hs]); err != nil {
			return err
		}
		if dir.appKeys, err = s.keysFromSecret(secs[d.app]); err != nil {
			return err
		}
		have = have || dir.hsKeys != nil || dir.appKeys != nil
		dir.phase, dir.cur = phaseHandshake, dir.hsKeys
		if d.early {
			if dir.cur, err = s.keysFromSecret(secs[kindClientEarly]); err != nil {
				return err
			}
			dir.phase, dir.earlyLeft = phaseEarly, maxEarlyRecords
		}
	}
	if !have {
		return fmt.Errorf("tlsdecrypt: TLS 1.3 needs traffic secret lines: %w", ErrNoSecret)
	}
	return nil
}

// keysFromSecret derives TLS 1.3 record keys; a missing secret gives nil.
func (s *Session) keysFromSecret(sec secret) (*keyState, error) {
	if sec == nil {
		return nil, nil
	}
	if len(sec) != s.suite.hashLen {
		return nil, fmt.Errorf("tlsdecrypt: traffic secret of %d bytes for a %d-byte hash", len(sec), s.suite.hashLen)
	}
	key, iv, err := s.suite.trafficKeys(sec)
	if err != nil {
		return nil, err
	}
	return s.newKeys(key, iv, sec)
}

func (s *Session) newKeys(key, iv []byte, sec secret) (*keyState, error) {
	a, err := s.suite.newAEAD(key)
	if err != nil {
		return nil, err
	}
	return &keyState{aead: a, iv: iv, secret: sec}, nil
}

// Decrypt takes the next record of a direction: its header's content type
// and legacy version, and its body as captured. It returns the plaintext
// of a protected record, or a copy of a cleartext one; either way a fresh
// slice the caller owns and the session does not keep. A TLS 1.2
// ChangeCipherSpec record turns protection on for its direction (or call
// ChangeCipherSpec instead of feeding it; an application data record
// implies it). An error comes with no plaintext, ever.
func (s *Session) Decrypt(dir Direction, typ tlswire.ContentType, version uint16, body []byte) (Plaintext, error) {
	if dir > ServerToClient {
		return Plaintext{}, fmt.Errorf("tlsdecrypt: direction %d", dir)
	}
	d := &s.dirs[dir]
	if typ == tlswire.TypeChangeCipherSpec {
		if s.suite.version == VersionTLS13 {
			s.stats.DummyCCS++
		} else {
			d.changeCipherSpec()
		}
		return s.cleartext(typ, body), nil
	}
	if s.suite.version == VersionTLS12 && typ == tlswire.TypeApplicationData {
		// Application data comes after a ChangeCipherSpec only: that one
		// was lost or not fed, and the data is no cleartext.
		d.changeCipherSpec()
	}
	protected := d.phase == phaseTLS12
	if s.suite.version == VersionTLS13 {
		protected = typ == tlswire.TypeApplicationData
	}
	if !protected {
		return s.cleartext(typ, body), nil
	}
	if len(body) > maxCiphertext {
		s.stats.Malformed++
		return Plaintext{}, fmt.Errorf("tlsdecrypt: %s record of %d bytes: %w", dir, len(body), ErrRecordTooLarge)
	}
	if s.suite.version == VersionTLS12 {
		return s.decrypt12(dir, d, typ, version, body)
	}
	return s.decrypt13(dir, d, version, body)
}

func (s *Session) cleartext(typ tlswire.ContentType, body []byte) Plaintext {
	s.stats.Cleartext++
	return Plaintext{Type: typ, Data: append([]byte{}, body...)}
}

// ChangeCipherSpec tells a TLS 1.2 session that a direction sent its
// ChangeCipherSpec, for callers that do not feed that record. Later calls
// for the same direction do nothing (renegotiation is not followed).
func (s *Session) ChangeCipherSpec(dir Direction) {
	if dir <= ServerToClient && s.suite.version == VersionTLS12 {
		s.dirs[dir].changeCipherSpec()
	}
}

// Skipped tells the session that n records of a direction were lost, so
// that the next record is decrypted with the right sequence number.
func (s *Session) Skipped(dir Direction, n uint64) {
	if dir > ServerToClient {
		return
	}
	d := &s.dirs[dir]
	if d.cur != nil {
		d.cur.seq += n
	}
	d.hs = hsScanner{}
}

// Stats returns the session's counters.
func (s *Session) Stats() Stats { return s.stats }

// String describes the session by its suite and counts, never its keys.
func (s *Session) String() string {
	return fmt.Sprintf("tlsdecrypt.Session{version: %#04x, suite: %#04x, decrypted: %d, auth failures: %d, keys: redacted}",
		s.suite.version, s.suite.id, s.stats.Decrypted, s.stats.AuthFailures)
}

// GoString is String, so that %#v prints no key either.
func (s *Session) GoString() string { return s.String() }

// LogValue logs the session's suite and counts only.
func (s *Session) LogValue() slog.Value {
	return slog.GroupValue(slog.Int("version", int(s.suite.version)), slog.Int("suite", int(s.suite.id)),
		slog.Int("decrypted", s.stats.Decrypted), slog.Int("auth_failures", s.stats.AuthFailures),
		slog.String("keys", "redacted"))
}

// keyState is one direction's record protection under one key.
type keyState struct {
	aead   cipher.AEAD
	iv     []byte
	seq    uint64 // of the next record
	secret secret // TLS 1.3 traffic secret, for KeyUpdate
}

// nonce builds the per-record nonce into dst: the IV xor the sequence
// number (TLS 1.3, TLS 1.2 ChaCha20), or the TLS 1.2 GCM salt followed by
// the record's explicit nonce.
func (k *keyState) nonce(dst []byte, seq uint64, explicit []byte) []byte {
	if explicit != nil {
		return append(append(dst, k.iv...), explicit...)
	}
	dst = append(dst, k.iv...)
	var sq [8]byte
	binary.BigEndian.PutUint64(sq[:], seq)
	n := len(dst)
	for i := range 8 {
		dst[n-8+i] ^= sq[i]
	}
	return dst
}
