// Package cryptopan is Crypto-PAn, the prefix-preserving address
// anonymization of Xu, Fan, Ammar and Moon ("Prefix-Preserving IP Address
// Anonymization", ICNP 2002): a keyed bijection under which two addresses
// share their first k bits exactly when their images do. Subnets stay
// subnets, so per-network analysis still works on anonymized records, and
// one key gives one mapping across runs and sensors.
//
// Bit i of the image is bit i of the address XOR the first bit of
// AES_K(the address's first i bits followed by a secret pad's remaining
// bits), where K is the key's first 16 bytes and the pad is AES_K of its
// last 16. IPv4 addresses are 32-bit inputs, IPv6 128-bit ones; the
// output for IPv4 matches the authors' reference implementation.
package cryptopan

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"net/netip"
)

// KeySize is the key length: an AES-128 key, then the pad's seed.
const KeySize = 32

// Anonymizer maps addresses under one key. It is safe for concurrent use.
type Anonymizer struct {
	block cipher.Block
	pad   [16]byte
}

// New returns the Anonymizer of a KeySize-byte key.
func New(key []byte) (*Anonymizer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("cryptopan: key of %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key[:16])
	if err != nil {
		return nil, fmt.Errorf("cryptopan: %w", err)
	}
	a := &Anonymizer{block: block}
	block.Encrypt(a.pad[:], key[16:])
	return a, nil
}

// Addr anonymizes an IPv4 or IPv6 address. An IPv4-mapped IPv6 address
// maps as its IPv4 address and stays mapped, so a client seen both ways
// keeps one image; a zone is kept. The invalid Addr stays invalid.
func (a *Anonymizer) Addr(ip netip.Addr) netip.Addr {
	switch {
	case !ip.IsValid():
		return ip
	case ip.Is4():
		b := ip.As4()
		a.anonymize(b[:])
		return netip.AddrFrom4(b)
	case ip.Is4In6():
		b := a.Addr(ip.Unmap()).As16()
		return netip.AddrFrom16(b).WithZone(ip.Zone())
	}
	b := ip.As16()
	a.anonymize(b[:])
	return netip.AddrFrom16(b).WithZone(ip.Zone())
}

// anonymize rewrites addr (4 or 16 bytes) in place: one AES block per
// bit, each on the bits before it followed by the pad's.
func (a *Anonymizer) anonymize(addr []byte) {
	in := a.pad
	var out, flip [16]byte
	for pos := range len(addr) * 8 {
		a.block.Encrypt(out[:], in[:])
		byt, mask := pos/8, byte(0x80)>>(pos%8)
		if out[0]&0x80 != 0 {
			flip[byt] |= mask
		}
		// The next block sees this bit of the address instead of the pad's.
		in[byt] = in[byt]&^mask | addr[byt]&mask
	}
	for i := range addr {
		addr[i] ^= flip[i]
	}
}
