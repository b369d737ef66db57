package pageview

import (
	"encoding/base64"
	"encoding/binary"
	"slices"

	"github.com/rtmon/rtmon/pageview/embeds"
	"github.com/rtmon/rtmon/reconstruct"
)

// What a page's HTML and stylesheets declared outlives the grouping in
// Pageview.Declared, so that grouping again from stored records (package
// stitch), which keeps no bodies, rests on the same evidence: Replay takes
// it in place of the container's body. The form is the keys the Grouper
// matches (urlHash: of redacted URLs, so it says no more than the stored
// URLs and Referers do), 8 bytes each, base64 so that it is a valid string
// in every store:
//
//	flags byte (declaredHTML, declaredNoReferrer)
//	uvarint number of blocking keys
//	the blocking keys, then the deferred ones, each big-endian, ascending
//
// A hostile page may name thousands of URLs: at most MaxDeclaredKeys are
// kept, blocking ones first (they decide the load's end).

// MaxDeclaredKeys bounds the keys a Declared string holds: what one HTML
// body can name (embeds.MaxRefs).
const MaxDeclaredKeys = embeds.MaxRefs

// MaxDeclaredLen is the longest Declared string.
var MaxDeclaredLen = base64.RawStdEncoding.EncodedLen(1 + binary.MaxVarintLen64 + 8*MaxDeclaredKeys)

const (
	declaredHTML       = 1 << iota // the container's HTML was read
	declaredNoReferrer             // it asks for no Referer on its objects
)

// encodeDeclared is p's Declared string; "" when nothing was read.
func encodeDeclared(p *pv) string {
	if p.declared == nil {
		return ""
	}
	var blocking, deferred []uint64
	for k, kind := range p.declared {
		if kind == embeds.Blocking {
			blocking = append(blocking, k)
		} else {
			deferred = append(deferred, k)
		}
	}
	slices.Sort(blocking)
	slices.Sort(deferred)
	blocking = blocking[:min(len(blocking), MaxDeclaredKeys)]
	deferred = deferred[:min(len(deferred), MaxDeclaredKeys-len(blocking))]
	var flags byte
	if p.htmlRead {
		flags |= declaredHTML
	}
	if p.noReferrer {
		flags |= declaredNoReferrer
	}
	b := make([]byte, 0, 1+binary.MaxVarintLen64+8*(len(blocking)+len(deferred)))
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(len(blocking)))
	for _, k := range blocking {
		b = binary.BigEndian.AppendUint64(b, k)
	}
	for _, k := range deferred {
		b = binary.BigEndian.AppendUint64(b, k)
	}
	return base64.RawStdEncoding.EncodeToString(b)
}

// decodeDeclared reads a Declared string; nil when it is empty or not one
// (a store's clip, a corrupt row: then the grouping has no HTML evidence,
// as when a sensor could not read the body).
func decodeDeclared(s string) *pageRefs {
	if s == "" || len(s) > MaxDeclaredLen {
		return nil
	}
	b, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil || len(b) < 1 {
		return nil
	}
	flags := b[0]
	nb, n := binary.Uvarint(b[1:])
	rest := b[1+max(n, 0):]
	if n <= 0 || len(rest)%8 != 0 || nb > uint64(len(rest)/8) {
		return nil
	}
	r := &pageRefs{urls: make(map[uint64]embeds.Kind, len(rest)/8), noReferrer: flags&declaredNoReferrer != 0,
		html: flags&declaredHTML != 0}
	for i := 0; i < len(rest)/8; i++ {
		kind := embeds.Deferred
		if uint64(i) < nb {
			kind = embeds.Blocking
		}
		r.urls[binary.BigEndian.Uint64(rest[8*i:])] = kind
	}
	return r
}

// Replay takes a transaction read back from a store as Transaction takes
// one from the tracker, with declared, the Declared string of the
// pageview it was the container of, standing in for its body (which no
// store keeps). A transaction that contained no stored pageview goes to
// Transaction.
func (g *Grouper) Replay(tx *reconstruct.Transaction, declared string) {
	g.take(tx, decodeDeclared(declared))
}
