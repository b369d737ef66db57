package pipeline

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"

	"github.com/rtmon/rtmon/internal/cryptopan"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

// readClientKey reads a client address key file: 32 bytes as they are
// (head -c 32 /dev/urandom), or 64 hex digits (openssl rand -hex 32).
func readClientKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("client address key: %w", err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		// Whoever holds the key can undo the mapping.
		slog.Warn("client address key file is readable by other users", "file", path, "mode", fi.Mode().Perm())
	}
	if len(b) == cryptopan.KeySize {
		return b, nil
	}
	if txt := strings.Join(strings.Fields(string(b)), ""); len(txt) == 2*cryptopan.KeySize {
		if k, err := hex.DecodeString(txt); err == nil {
			return k, nil
		}
	}
	return nil, fmt.Errorf("client address key %s: want %d bytes or %d hex digits (openssl rand -hex %d > FILE)",
		path, cryptopan.KeySize, 2*cryptopan.KeySize, cryptopan.KeySize)
}

// connectionIDKey derives the key of connection ids from the address key,
// so that one key file keeps both the mapping and the ids stable.
func connectionIDKey(key []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("rtmon connection ids"))
	return m.Sum(nil)
}

// maxAnonCache bounds the addresses whose images are remembered: an image
// costs 32 (IPv4) or 128 (IPv6) AES blocks, and a client's records come
// in runs. Past it the memory starts over.
const maxAnonCache = 1 << 16

// anonymizer replaces the client address of every record on its way from
// the Grouper to the outputs: after classes were assigned from the real
// address, before anything is written, stored or shown. Server addresses
// stay. Each transaction passes once, so it is rewritten in place once; a
// pageview's Transactions are the same records. It is called from the
// packet loop only.
type anonymizer struct {
	next  pageview.Sink
	cpan  *cryptopan.Anonymizer
	cache map[netip.Addr]netip.Addr
}

func newAnonymizer(c *cryptopan.Anonymizer, next pageview.Sink) *anonymizer {
	return &anonymizer{next: next, cpan: c, cache: map[netip.Addr]netip.Addr{}}
}

// clientAnonymizer reads the key file; the connection ids' key comes from
// the same key.
func clientAnonymizer(path string) (c *cryptopan.Anonymizer, idKey []byte, err error) {
	key, err := readClientKey(path)
	if err != nil {
		return nil, nil, err
	}
	if c, err = cryptopan.New(key); err != nil {
		return nil, nil, fmt.Errorf("client address key %s: %w", path, err)
	}
	return c, connectionIDKey(key), nil
}

func (a *anonymizer) addr(x netip.Addr) netip.Addr {
	if y, ok := a.cache[x]; ok {
		return y
	}
	if len(a.cache) >= maxAnonCache {
		clear(a.cache)
	}
	y := a.cpan.Addr(x)
	a.cache[x] = y
	return y
}

func (a *anonymizer) Connection(c *reconstruct.Connection) {
	c.Client = a.addr(c.Client)
	a.next.Connection(c)
}

func (a *anonymizer) Transaction(t *reconstruct.Transaction) {
	t.Client = a.addr(t.Client)
	a.next.Transaction(t)
}

func (a *anonymizer) Pageview(p *pageview.Pageview) {
	p.Client = a.addr(p.Client)
	a.next.Pageview(p)
}
