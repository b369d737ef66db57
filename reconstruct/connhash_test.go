package reconstruct

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"hash/fnv"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// connectionHashPlain is connectionHash as the hash packages write it:
// the ids every stored record carries must not change with the rewrite.
func connectionHashPlain(key []byte, client, server netip.AddrPort, first int64, seq uint32) uint64 {
	var h hash.Hash = fnv.New64a()
	if key != nil {
		h = hmac.New(sha256.New, key)
	}
	b, _ := client.MarshalBinary()
	h.Write(b)
	b, _ = server.MarshalBinary()
	h.Write(b)
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(first))
	h.Write(ts[:])
	binary.BigEndian.PutUint32(ts[:4], seq)
	h.Write(ts[:4])
	return binary.BigEndian.Uint64(h.Sum(nil)[:8])
}

func TestConnectionHashStable(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	addr := func() netip.Addr {
		var b [16]byte
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		switch r.IntN(3) {
		case 0:
			return netip.AddrFrom4([4]byte(b[:4]))
		case 1:
			return netip.AddrFrom16(b)
		default: // IPv4-mapped IPv6, 16 bytes on the wire of the hash
			return netip.AddrFrom16(netip.AddrFrom4([4]byte(b[:4])).As16())
		}
	}
	for i := range 2000 {
		var key []byte
		if i%4 == 0 {
			key = []byte("a key of the operator's")
		}
		c := netip.AddrPortFrom(addr(), uint16(r.Uint32()))
		s := netip.AddrPortFrom(addr(), uint16(r.Uint32()))
		first, seq := r.Int64(), r.Uint32()
		if got, want := connectionHash(key, c, s, first, seq), connectionHashPlain(key, c, s, first, seq); got != want {
			t.Fatalf("%v %v %d %d key %q: %016x, want %016x", c, s, first, seq, key, got, want)
		}
	}
}

// Without a key, making an id allocates nothing.
func TestConnectionHashAllocFree(t *testing.T) {
	c := netip.MustParseAddrPort("[2001:db8::1]:443")
	s := netip.MustParseAddrPort("198.51.100.7:51000")
	if n := testing.AllocsPerRun(100, func() { connectionHash(nil, c, s, 1e18, 7) }); n != 0 {
		t.Errorf("%v allocations per id", n)
	}
}
