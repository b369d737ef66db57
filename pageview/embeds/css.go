package embeds

import (
	"bytes"
	"net/url"
)

// css scans style text for url(...) and @import "...": backgrounds, fonts
// and imported stylesheets, all of which the load event waits for once the
// rules apply. Comments hide what they hold. The scan jumps from one such
// construct to the next (cssFinder) instead of stepping through every
// byte; what it reads is what a byte-by-byte scan would.
func (c *collector) css(b []byte, base *url.URL) {
	f := cssFinder{b: b, next: [numCSSKinds]int{-1, -1, -1}}
	for i := 0; i < len(b) && len(c.refs) < MaxRefs; {
		k, at := f.first(i)
		switch k {
		case cssComment:
			end := bytes.Index(b[at+2:], []byte("*/"))
			if end < 0 {
				return
			}
			i = at + 2 + end + 2
		case cssURLKind:
			ref, n := cssURL(b[at+4:])
			c.add(ref, base, Blocking)
			i = at + 4 + n
		case cssImport:
			rest := bytes.TrimLeft(b[at+7:], " \t\r\n")
			if len(rest) > 0 && (rest[0] == '"' || rest[0] == '\'') {
				if end := bytes.IndexByte(rest[1:], rest[0]); end >= 0 {
					c.add(rest[1:1+end], base, Blocking)
				}
			}
			i = at + 7 // a url(...) form is caught by the url( case next
		default:
			return
		}
	}
}

// The constructs the CSS scan acts on: "/*", "url(" and "@import" (any
// case). They start with different bytes, so at most one starts at a
// given offset.
const (
	cssComment = iota
	cssURLKind
	cssImport
	numCSSKinds
	cssNone = -1
)

// cssFinder finds the next construct of each kind at or after an offset,
// remembering each kind's next one until the scan passes it, so every byte
// is searched once per kind: linear in the body, whatever it holds.
type cssFinder struct {
	b    []byte
	next [numCSSKinds]int // -1: not searched yet; len(b): none left
}

// first returns the kind and offset of the first construct at or after
// from, or cssNone.
func (f *cssFinder) first(from int) (kind, at int) {
	kind, at = cssNone, len(f.b)
	for k := range numCSSKinds {
		if f.next[k] < from {
			f.next[k] = f.search(k, from)
		}
		if f.next[k] < at {
			kind, at = k, f.next[k]
		}
	}
	return kind, at
}

// search finds the first construct of kind k at or after from by its
// distinctive byte ('/', '(' and '@': bytes.IndexByte is fast over the
// long runs without them), len(f.b) when there is none.
func (f *cssFinder) search(k, from int) int {
	b := f.b
	mark, back, prefix := byte('/'), 0, "/*"
	switch k {
	case cssURLKind:
		mark, back, prefix = '(', 3, "url("
	case cssImport:
		mark, back, prefix = '@', 0, "@import"
	}
	for p := from + back; p < len(b); {
		j := bytes.IndexByte(b[p:], mark)
		if j < 0 {
			break
		}
		if at := p + j - back; hasFoldPrefix(b[at:], prefix) {
			return at
		}
		p += j + 1
	}
	return len(b)
}

// cssURL reads the argument of url( from b (just after the parenthesis):
// quoted or bare, up to the closing parenthesis. It returns the reference
// and the bytes consumed.
func cssURL(b []byte) ([]byte, int) {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	if i < len(b) && (b[i] == '"' || b[i] == '\'') {
		q := b[i]
		end := bytes.IndexByte(b[i+1:], q)
		if end < 0 {
			return nil, len(b)
		}
		return b[i+1 : i+1+end], i + 2 + end
	}
	end := bytes.IndexByte(b[i:], ')')
	if end < 0 {
		return nil, len(b)
	}
	return bytes.TrimSpace(b[i : i+end]), i + end + 1
}

// hasFoldPrefix reports whether b starts with prefix (lower-case ASCII
// letters and punctuation) in any case. An ASCII compare is exact here:
// no letter of "url(" or "@import" has a non-ASCII case form.
func hasFoldPrefix(b []byte, prefix string) bool {
	if len(b) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

// hasFoldSubstring reports whether b holds word (lower-case ASCII) in any
// ASCII case: the tokenizer lower-cases attribute names in ASCII only.
func hasFoldSubstring(b []byte, word string) bool {
	for i := 0; i+len(word) <= len(b); i++ {
		if (b[i] == word[0] || b[i] == word[0]-('a'-'A')) && hasFoldPrefix(b[i:], word) {
			return true
		}
	}
	return false
}
