package tlsdecrypt

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"

	"golang.org/x/crypto/chacha20poly1305"
)

// Protocol versions a Session decrypts.
const (
	VersionTLS12 = 0x0303
	VersionTLS13 = 0x0304
)

// Errors callers can count with errors.Is.
var (
	ErrUnsupportedSuite   = errors.New("unsupported cipher suite")
	ErrUnsupportedVersion = errors.New("unsupported protocol version")
	ErrNoSecret           = errors.New("no key log secret for this connection")
)

// aeadKind is the record protection of a suite.
type aeadKind uint8

const (
	aeadAESGCM aeadKind = iota
	aeadChaCha
)

// suite is what the package needs to know of a cipher suite.
type suite struct {
	id      uint16
	version uint16
	aead    aeadKind
	keyLen  int
	hash    func() hash.Hash
	hashLen int
}

var suites = map[uint16]suite{
	0x1301: {0x1301, VersionTLS13, aeadAESGCM, 16, sha256.New, 32},    // TLS_AES_128_GCM_SHA256
	0x1302: {0x1302, VersionTLS13, aeadAESGCM, 32, sha512.New384, 48}, // TLS_AES_256_GCM_SHA384
	0x1303: {0x1303, VersionTLS13, aeadChaCha, 32, sha256.New, 32},    // TLS_CHACHA20_POLY1305_SHA256
	0xC02F: {0xC02F, VersionTLS12, aeadAESGCM, 16, sha256.New, 32},    // ECDHE_RSA_WITH_AES_128_GCM_SHA256
	0xC02B: {0xC02B, VersionTLS12, aeadAESGCM, 16, sha256.New, 32},    // ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
	0xC030: {0xC030, VersionTLS12, aeadAESGCM, 32, sha512.New384, 48}, // ECDHE_RSA_WITH_AES_256_GCM_SHA384
	0xC02C: {0xC02C, VersionTLS12, aeadAESGCM, 32, sha512.New384, 48}, // ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
	0xCCA8: {0xCCA8, VersionTLS12, aeadChaCha, 32, sha256.New, 32},    // ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
	0xCCA9: {0xCCA9, VersionTLS12, aeadChaCha, 32, sha256.New, 32},    // ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
	0x009C: {0x009C, VersionTLS12, aeadAESGCM, 16, sha256.New, 32},    // RSA_WITH_AES_128_GCM_SHA256
	0x009D: {0x009D, VersionTLS12, aeadAESGCM, 32, sha512.New384, 48}, // RSA_WITH_AES_256_GCM_SHA384
}

// SealedLen is the length of a record (its body, after the 5-byte header)
// that protects n bytes of plaintext under a suite at a version, with no
// TLS 1.3 padding: what a keyless reader compares record lengths with.
// ok is false for a suite the package does not know.
func SealedLen(version, cipherSuite uint16, n int) (length int, ok bool) {
	s, ok := suites[cipherSuite]
	if !ok || s.version != version {
		return 0, false
	}
	const tag = 16 // both AEADs
	switch {
	case version == VersionTLS13:
		return n + 1 + tag, true // the inner content type
	case s.aead == aeadAESGCM:
		return 8 + n + tag, true // the explicit nonce
	}
	return n + tag, true
}

// Supported reports whether a Session can decrypt a suite at a version.
func Supported(version, cipherSuite uint16) bool {
	s, ok := suites[cipherSuite]
	return ok && s.version == version
}

func lookupSuite(version, cipherSuite uint16) (suite, error) {
	if version != VersionTLS12 && version != VersionTLS13 {
		return suite{}, fmt.Errorf("tlsdecrypt: version %#04x: %w", version, ErrUnsupportedVersion)
	}
	s, ok := suites[cipherSuite]
	if !ok || s.version != version {
		return suite{}, fmt.Errorf("tlsdecrypt: suite %#04x at version %#04x: %w", cipherSuite, version, ErrUnsupportedSuite)
	}
	return s, nil
}

// ivLen is the per-direction IV a key block or HKDF gives: TLS 1.2 GCM
// takes a 4-byte salt and carries the rest of the nonce in each record.
func (s suite) ivLen() int {
	if s.version == VersionTLS12 && s.aead == aeadAESGCM {
		return 4
	}
	return 12
}

func (s suite) newAEAD(key []byte) (cipher.AEAD, error) {
	if s.aead == aeadChaCha {
		a, err := chacha20poly1305.New(key)
		if err != nil {
			return nil, fmt.Errorf("tlsdecrypt: chacha20-poly1305 key: %w", err)
		}
		return a, nil
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("tlsdecrypt: aes key: %w", err)
	}
	a, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("tlsdecrypt: gcm: %w", err)
	}
	return a, nil
}

// expandLabel is HKDF-Expand-Label of RFC 8446 7.1.
func (s suite) expandLabel(sec []byte, label string, context []byte, length int) ([]byte, error) {
	full := "tls13 " + label
	info := make([]byte, 0, 4+len(full)+len(context))
	info = append(info, byte(length>>8), byte(length), byte(len(full)))
	info = append(info, full...)
	info = append(info, byte(len(context)))
	info = append(info, context...)
	out, err := hkdf.Expand(s.hash, sec, string(info), length)
	if err != nil {
		return nil, fmt.Errorf("tlsdecrypt: hkdf-expand-label %q: %w", label, err)
	}
	return out, nil
}

// trafficKeys derives a TLS 1.3 record key and IV from a traffic secret.
func (s suite) trafficKeys(sec []byte) (key, iv []byte, err error) {
	if key, err = s.expandLabel(sec, "key", nil, s.keyLen); err != nil {
		return nil, nil, err
	}
	if iv, err = s.expandLabel(sec, "iv", nil, 12); err != nil {
		return nil, nil, err
	}
	return key, iv, nil
}

// nextSecret is the KeyUpdate successor of a TLS 1.3 traffic secret.
func (s suite) nextSecret(sec []byte) ([]byte, error) {
	return s.expandLabel(sec, "traffic upd", nil, s.hashLen)
}

// prf is the TLS 1.2 PRF (RFC 5246 5) with the suite's hash.
func (s suite) prf(sec []byte, label string, seed []byte, length int) []byte {
	labelSeed := append([]byte(label), seed...)
	mac := hmac.New(s.hash, sec)
	out := make([]byte, 0, length+s.hashLen)
	a := labelSeed // A(0)
	for len(out) < length {
		mac.Reset()
		mac.Write(a)
		a = mac.Sum(nil)
		mac.Reset()
		mac.Write(a)
		mac.Write(labelSeed)
		out = mac.Sum(out)
	}
	return out[:length]
}

// keyBlock12 cuts the TLS 1.2 key block (RFC 5246 6.3) into the write keys
// and IVs; AEAD suites have no MAC keys.
func (s suite) keyBlock12(master, clientRandom, serverRandom []byte) (ck, sk, civ, siv []byte) {
	seed := append(append([]byte{}, serverRandom...), clientRandom...)
	n := s.ivLen()
	kb := s.prf(master, "key expansion", seed, 2*s.keyLen+2*n)
	ck, kb = kb[:s.keyLen], kb[s.keyLen:]
	sk, kb = kb[:s.keyLen], kb[s.keyLen:]
	civ, siv = kb[:n], kb[n:2*n]
	return ck, sk, civ, siv
}
