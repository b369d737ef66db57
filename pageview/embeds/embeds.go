// Package embeds reads a captured page for the objects it references: the
// stylesheets, scripts, images, frames and fonts a browser fetches to load
// it. The pageview stage uses the set to tell which requests make up a page
// (with or without a Referer) and which of them its load event waits for.
//
// Bodies come off the wire as they were sent: Extract undoes the content
// coding (gzip, deflate, br) within a size bound, tokenizes HTML with
// golang.org/x/net/html, and scans CSS (a stylesheet's own body, a <style>
// element, a style attribute) for url() and @import. Everything it reads is
// attacker-controlled: output is bounded (MaxRefs, MaxDecoded) and errors
// are returned with what could be read before them.
//
//	page, err := embeds.Extract(body, "text/html; charset=utf-8", "gzip", "http://example.com/news/")
//	for _, r := range page.Refs {
//		fmt.Println(r.URL, r.Kind) // http://example.com/static/site.css blocking
//	}
package embeds

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"unicode"

	"github.com/andybalholm/brotli"
	"golang.org/x/net/html"
)

// Kind says how a page's load event treats an object it references.
type Kind uint8

const (
	// Blocking: the load event waits for it (stylesheets, scripts, async
	// and deferred ones too, images, frames, preloads, CSS backgrounds
	// and fonts).
	Blocking Kind = iota + 1
	// Deferred: fetched for the page but not waited for (icons, which
	// browsers fetch after the load event; prefetches; lazy images; media).
	Deferred
)

func (k Kind) String() string {
	switch k {
	case Blocking:
		return "blocking"
	case Deferred:
		return "deferred"
	}
	return "unknown"
}

// Page is what a body says about the page.
type Page struct {
	Refs []Ref
	// NoReferrer: the page tells browsers to send no Referer for its
	// subresources (<meta name="referrer" content="no-referrer">), so its
	// objects arrive without one even from browsers that send them.
	NoReferrer bool
}

// Ref is one referenced object: an absolute URL ("http://host/path?query",
// fragment dropped) and how the load event treats it.
type Ref struct {
	URL  string
	Kind Kind
}

// Bounds on what one body may cost.
const (
	// MaxDecoded bounds a body after its content coding is undone (a
	// compression bomb stops here).
	MaxDecoded = 4 << 20
	// MaxRefs bounds the references returned for one body.
	MaxRefs = 512
	// maxURL bounds one reference; longer ones are skipped.
	maxURL = 2048
)

// Errors that say why a body could not be read (whole or in part).
var (
	ErrEncoding  = errors.New("embeds: unsupported content coding")
	ErrNotPage   = errors.New("embeds: not HTML or CSS")
	ErrTruncated = errors.New("embeds: body ends early")
	ErrTooLarge  = errors.New("embeds: decoded body exceeds bound")
)

// Extract returns the objects body references, resolved against base (the
// page's absolute URL), and what else it says about the page. contentType
// selects HTML or CSS; contentEncoding is the Content-Encoding header. On a
// body that is cut short, or too large once decoded, it returns what it
// read and an error wrapping ErrTruncated or ErrTooLarge.
func Extract(body []byte, contentType, contentEncoding, base string) (Page, error) {
	baseURL, err := url.Parse(base)
	if err != nil {
		return Page{}, fmt.Errorf("embeds: base %q: %w", base, err)
	}
	var css bool
	switch mediaType(contentType) {
	case "text/html", "application/xhtml+xml":
	case "text/css":
		css = true
	default:
		return Page{}, fmt.Errorf("%w: %q", ErrNotPage, contentType)
	}
	plain, derr := Decode(body, contentEncoding)
	if plain == nil && derr != nil {
		return Page{}, derr
	}
	c := collector{base: baseURL, seen: map[string]int{}}
	if css {
		c.css(plain, baseURL)
	} else {
		c.html(plain)
	}
	return Page{Refs: c.refs, NoReferrer: c.noReferrer}, derr
}

// Decode undoes a Content-Encoding (a list is undone last coding first).
// On a stream cut short it returns the bytes decoded so far with an error
// wrapping ErrTruncated; past MaxDecoded, the first MaxDecoded bytes and
// ErrTooLarge.
func Decode(body []byte, contentEncoding string) ([]byte, error) {
	codings := strings.Split(contentEncoding, ",")
	out := body
	for i := len(codings) - 1; i >= 0; i-- {
		var r io.Reader
		switch strings.ToLower(strings.TrimSpace(codings[i])) {
		case "", "identity":
			continue
		case "gzip", "x-gzip":
			zr, err := gzip.NewReader(bytes.NewReader(out))
			if err != nil {
				return nil, fmt.Errorf("%w: gzip header: %v", ErrTruncated, err)
			}
			r = zr
		case "deflate":
			// RFC 9110 says zlib; some servers send raw deflate.
			if zr, err := zlib.NewReader(bytes.NewReader(out)); err == nil {
				r = zr
			} else {
				r = flate.NewReader(bytes.NewReader(out))
			}
		case "br":
			r = brotli.NewReader(bytes.NewReader(out))
		default:
			return nil, fmt.Errorf("%w: %q", ErrEncoding, codings[i])
		}
		dec, err := io.ReadAll(io.LimitReader(r, MaxDecoded+1))
		switch {
		case len(dec) > MaxDecoded:
			return dec[:MaxDecoded], ErrTooLarge
		case err != nil:
			return dec, fmt.Errorf("%w: %s: %v", ErrTruncated, codings[i], err)
		}
		out = dec
	}
	return out, nil
}

func mediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// collector resolves and deduplicates references.
type collector struct {
	base       *url.URL
	refs       []Ref
	seen       map[string]int // URL -> index in refs
	noReferrer bool
	attrs      []attr // the current tag's, reused from tag to tag
}

// attr is one attribute as the tokenizer returns it (its own copy, valid
// until the next token).
type attr struct{ key, val []byte }

// add resolves ref against base; a URL seen before keeps the stronger kind.
func (c *collector) add(ref []byte, base *url.URL, k Kind) {
	ref = bytes.TrimSpace(ref)
	if len(ref) == 0 || len(ref) > maxURL || len(c.refs) >= MaxRefs {
		return
	}
	u, err := base.Parse(string(ref))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return // data:, javascript:, about:, mailto: and the unparsable
	}
	u.Fragment, u.RawFragment = "", ""
	s := u.String()
	if i, ok := c.seen[s]; ok {
		if k == Blocking {
			c.refs[i].Kind = Blocking
		}
		return
	}
	c.seen[s] = len(c.refs)
	c.refs = append(c.refs, Ref{URL: s, Kind: k})
}

// html walks the page's tokens. A <base href> (the first one) changes what
// later relative references resolve against.
//
// The tokenizer starts at the first '<': it begins in the data state, where
// bytes before a '<' can only be text, and text outside <style> names
// nothing. A body with no '<' at all (a text or filler body served as HTML)
// is not tokenized. The tokenizer reads text a byte at a time and buffers
// a whole text token, so this saves the most on large bodies.
func (c *collector) html(b []byte) {
	lt := bytes.IndexByte(b, '<')
	if lt < 0 {
		return
	}
	z := html.NewTokenizer(bytes.NewReader(b[lt:]))
	base := c.base
	baseSet := false
	inStyle := false
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return
		case html.TextToken:
			if inStyle {
				c.css(z.Text(), base)
			}
			continue
		case html.EndTagToken:
			if rawTagIs(z.Raw(), "style") {
				inStyle = false
			}
			continue
		case html.StartTagToken, html.SelfClosingTagToken:
		default:
			continue
		}
		// TagName copies the name on every call (it replaces NULs): most
		// tags (div, span, a, ...) are judged on their raw bytes first.
		if raw := z.Raw(); !rawTagMatters(raw) && !hasFoldSubstring(raw, "style") {
			continue
		}
		name, hasAttr := z.TagName()
		if tt == html.StartTagToken && string(name) == "style" {
			inStyle = true
		}
		if !hasAttr || (!namesRefs(name) && !hasFoldSubstring(z.Raw(), "style")) {
			// Reading attributes costs two copies each; a tag that names
			// nothing by itself matters only for a style attribute, whose
			// name would be in its raw bytes.
			continue
		}
		c.readAttrs(z)
		if s, ok := c.attr("style"); ok {
			c.css(s, base)
		}
		base = c.tag(name, base, &baseSet)
	}
}

// namesRefs reports whether tag can name a reference by its own
// attributes: the cases of (*collector).tag.
func namesRefs(name []byte) bool {
	switch string(name) {
	case "meta", "base", "img", "source", "script", "link", "iframe", "frame", "embed",
		"object", "input", "video", "audio", "track", "body", "table", "td", "th":
		return true
	}
	return false
}

// rawTagName is a tag's name as its raw bytes spell it (before the
// tokenizer lower-cases it and replaces NULs): after "<" or "</", up to
// white space, "/" or ">", as the tokenizer ends it.
func rawTagName(raw []byte) []byte {
	if len(raw) < 2 || raw[0] != '<' {
		return nil
	}
	raw = raw[1:]
	if raw[0] == '/' {
		raw = raw[1:]
	}
	// A loop, not bytes.IndexAny: that builds its byte set on every call,
	// and this runs for every tag of every page (a tenth of Extract's time).
	for i, b := range raw {
		switch b {
		case ' ', '\t', '\n', '\r', '\f', '/', '>':
			return raw[:i]
		}
	}
	return raw
}

// rawTagIs reports whether the tag in raw is named name (lower case),
// ASCII letters compared without case as the tokenizer lower-cases them.
func rawTagIs(raw []byte, name string) bool {
	n := rawTagName(raw)
	return len(n) == len(name) && hasFoldPrefix(n, name)
}

// rawTagMatters reports whether the start tag in raw is one html reads
// by its name: one that names references (namesRefs), or style. A name
// with anything but ASCII letters and digits matches none of them.
func rawTagMatters(raw []byte) bool {
	n := rawTagName(raw)
	var lower [8]byte
	if len(n) > len(lower) {
		return false
	}
	for i, b := range n {
		switch {
		case 'A' <= b && b <= 'Z':
			b += 'a' - 'A'
		case 'a' <= b && b <= 'z', '0' <= b && b <= '9':
		default:
			return false
		}
		lower[i] = b
	}
	name := lower[:len(n)]
	return namesRefs(name) || string(name) == "style"
}

// tag adds what one start tag references, its attributes read by
// readAttrs, and returns the base later references resolve against. A tag
// added here must be added to namesRefs.
func (c *collector) tag(name []byte, base *url.URL, baseSet *bool) *url.URL {
	switch string(name) {
	case "meta":
		if bytes.EqualFold(c.val("name"), []byte("referrer")) && bytes.EqualFold(bytes.TrimSpace(c.val("content")), []byte("no-referrer")) {
			c.noReferrer = true
		}
	case "base":
		if h, ok := c.attr("href"); ok && !*baseSet {
			if u, err := c.base.Parse(strings.TrimSpace(string(h))); err == nil {
				base, *baseSet = u, true
			}
		}
	case "img":
		k := Blocking
		if bytes.EqualFold(c.val("loading"), []byte("lazy")) {
			k = Deferred
		}
		c.add(c.val("src"), base, k)
		c.srcset(c.val("srcset"), base, k)
	case "source":
		// <picture>/<video>/<audio> sources: an image candidate in a
		// picture is fetched like an img; media is not waited for.
		k := Blocking
		if _, ok := c.attr("srcset"); !ok {
			k = Deferred
		}
		c.srcset(c.val("srcset"), base, k)
		c.add(c.val("src"), base, k)
	case "script":
		c.add(c.val("src"), base, Blocking)
	case "link":
		c.link(base)
	case "iframe", "frame", "embed":
		c.add(c.val("src"), base, Blocking)
	case "object":
		c.add(c.val("data"), base, Blocking)
	case "input":
		if bytes.EqualFold(c.val("type"), []byte("image")) {
			c.add(c.val("src"), base, Blocking)
		}
	case "video":
		c.add(c.val("poster"), base, Blocking)
		c.add(c.val("src"), base, Deferred)
	case "audio", "track":
		c.add(c.val("src"), base, Deferred)
	case "body", "table", "td", "th":
		c.add(c.val("background"), base, Blocking)
	}
	return base
}

// link handles <link rel=... href=...> by its rel tokens.
func (c *collector) link(base *url.URL) {
	href := c.val("href")
	for _, rel := range strings.Fields(strings.ToLower(string(c.val("rel")))) {
		switch rel {
		case "stylesheet", "preload", "modulepreload":
			c.add(href, base, Blocking)
			if rel == "preload" {
				c.srcset(c.val("imagesrcset"), base, Blocking)
			}
		case "icon", "apple-touch-icon", "apple-touch-icon-precomposed", "mask-icon",
			"manifest", "prefetch", "prerender", "next":
			c.add(href, base, Deferred)
		}
	}
}

// srcset adds each candidate of a srcset list ("a.png 1x, b.png 2x"): the
// browser fetches one, which one depends on the screen.
func (c *collector) srcset(v []byte, base *url.URL, k Kind) {
	for len(v) > 0 {
		var cand []byte
		cand, v, _ = bytes.Cut(v, []byte(","))
		if f := firstField(cand); len(f) > 0 {
			c.add(f, base, k)
		}
	}
}

// firstField is strings.Fields(string(b))[0], or nil when b is all space,
// without the slice of fields.
func firstField(b []byte) []byte {
	start := bytes.IndexFunc(b, func(r rune) bool { return !unicode.IsSpace(r) })
	if start < 0 {
		return nil
	}
	b = b[start:]
	if end := bytes.IndexFunc(b, unicode.IsSpace); end >= 0 {
		return b[:end]
	}
	return b
}

// readAttrs reads the current tag's attributes into c.attrs, replacing the
// previous tag's: a reused slice rather than a map per tag.
func (c *collector) readAttrs(z *html.Tokenizer) {
	c.attrs = c.attrs[:0]
	for {
		k, v, more := z.TagAttr()
		c.attrs = append(c.attrs, attr{k, v})
		if !more {
			return
		}
	}
}

// attr returns the value of the current tag's attribute key; the first of
// each name wins, as in HTML parsing.
func (c *collector) attr(key string) ([]byte, bool) {
	for _, a := range c.attrs {
		if string(a.key) == key {
			return a.val, true
		}
	}
	return nil, false
}

// val is attr's value alone, nil when the tag has no such attribute.
func (c *collector) val(key string) []byte {
	v, _ := c.attr(key)
	return v
}
