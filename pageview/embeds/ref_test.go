package embeds

// The extraction as it was before its speedups, kept to check that the
// faster one returns the same references for any input.

import (
	"bytes"
	"net/url"
	"strings"

	"golang.org/x/net/html"
)

// refExtract is Extract's reference-reading half as first written: a map
// per tag's attributes, every byte of the body through the tokenizer, and
// Unicode case folding in the CSS scan.
func refExtract(plain []byte, css bool, base *url.URL) Page {
	c := refCollector{base: base, seen: map[string]int{}}
	if css {
		c.css(plain, base)
	} else {
		c.html(plain)
	}
	return Page{Refs: c.refs, NoReferrer: c.noReferrer}
}

// refCollector resolves and deduplicates references.
type refCollector struct {
	base       *url.URL
	refs       []Ref
	seen       map[string]int // URL -> index in refs
	noReferrer bool
}

// add resolves ref against base; a URL seen before keeps the stronger kind.
func (c *refCollector) add(ref string, base *url.URL, k Kind) {
	ref = strings.TrimSpace(ref)
	if ref == "" || len(ref) > maxURL || len(c.refs) >= MaxRefs {
		return
	}
	u, err := base.Parse(ref)
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
func (c *refCollector) html(b []byte) {
	z := html.NewTokenizer(bytes.NewReader(b))
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
			if name, _ := z.TagName(); string(name) == "style" {
				inStyle = false
			}
			continue
		case html.StartTagToken, html.SelfClosingTagToken:
		default:
			continue
		}
		name, hasAttr := z.TagName()
		tag := string(name)
		if tag == "style" && tt == html.StartTagToken {
			inStyle = true
		}
		if !hasAttr {
			continue
		}
		a := refAttrs(z)
		if s, ok := a["style"]; ok {
			c.css([]byte(s), base)
		}
		switch tag {
		case "meta":
			if strings.EqualFold(a["name"], "referrer") && strings.EqualFold(strings.TrimSpace(a["content"]), "no-referrer") {
				c.noReferrer = true
			}
		case "base":
			if h, ok := a["href"]; ok && !baseSet {
				if u, err := c.base.Parse(strings.TrimSpace(h)); err == nil {
					base, baseSet = u, true
				}
			}
		case "img":
			k := Blocking
			if strings.EqualFold(a["loading"], "lazy") {
				k = Deferred
			}
			c.add(a["src"], base, k)
			c.srcset(a["srcset"], base, k)
		case "source":
			// <picture>/<video>/<audio> sources: an image candidate in a
			// picture is fetched like an img; media is not waited for.
			k := Blocking
			if _, ok := a["srcset"]; !ok {
				k = Deferred
			}
			c.srcset(a["srcset"], base, k)
			c.add(a["src"], base, k)
		case "script":
			c.add(a["src"], base, Blocking)
		case "link":
			c.link(a, base)
		case "iframe", "frame", "embed":
			c.add(a["src"], base, Blocking)
		case "object":
			c.add(a["data"], base, Blocking)
		case "input":
			if strings.EqualFold(a["type"], "image") {
				c.add(a["src"], base, Blocking)
			}
		case "video":
			c.add(a["poster"], base, Blocking)
			c.add(a["src"], base, Deferred)
		case "audio", "track":
			c.add(a["src"], base, Deferred)
		case "body", "table", "td", "th":
			c.add(a["background"], base, Blocking)
		}
	}
}

// link handles <link rel=... href=...> by its rel tokens.
func (c *refCollector) link(a map[string]string, base *url.URL) {
	href := a["href"]
	for _, rel := range strings.Fields(strings.ToLower(a["rel"])) {
		switch rel {
		case "stylesheet", "preload", "modulepreload":
			c.add(href, base, Blocking)
			if rel == "preload" {
				c.srcset(a["imagesrcset"], base, Blocking)
			}
		case "icon", "apple-touch-icon", "apple-touch-icon-precomposed", "mask-icon",
			"manifest", "prefetch", "prerender", "next":
			c.add(href, base, Deferred)
		}
	}
}

// srcset adds each candidate of a srcset list ("a.png 1x, b.png 2x"): the
// browser fetches one, which one depends on the screen.
func (c *refCollector) srcset(v string, base *url.URL, k Kind) {
	for _, cand := range strings.Split(v, ",") {
		if f := strings.Fields(cand); len(f) > 0 {
			c.add(f[0], base, k)
		}
	}
}

// attrs reads a tag's attributes, the first of each name winning, as in
// HTML parsing.
func refAttrs(z *html.Tokenizer) map[string]string {
	a := map[string]string{}
	for {
		k, v, more := z.TagAttr()
		if _, dup := a[string(k)]; !dup {
			a[string(k)] = string(v)
		}
		if !more {
			return a
		}
	}
}

// css scans style text for url(...) and @import "...": backgrounds, fonts
// and imported stylesheets, all of which the load event waits for once the
// rules apply.
func (c *refCollector) css(b []byte, base *url.URL) {
	for i := 0; i < len(b) && len(c.refs) < MaxRefs; i++ {
		switch {
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '*':
			end := bytes.Index(b[i+2:], []byte("*/"))
			if end < 0 {
				return
			}
			i += end + 3
		case (b[i] == 'u' || b[i] == 'U') && refHasFoldPrefix(b[i:], "url("):
			ref, n := refCssURL(b[i+4:])
			c.add(ref, base, Blocking)
			i += 3 + n
		case b[i] == '@' && refHasFoldPrefix(b[i:], "@import"):
			rest := bytes.TrimLeft(b[i+7:], " \t\r\n")
			if len(rest) > 0 && (rest[0] == '"' || rest[0] == '\'') {
				if end := bytes.IndexByte(rest[1:], rest[0]); end >= 0 {
					c.add(string(rest[1:1+end]), base, Blocking)
				}
			}
			i += 6 // a url(...) form is caught by the url( case next
		}
	}
}

// refCssURL reads the argument of url( from b (just after the parenthesis):
// quoted or bare, up to the closing parenthesis. It returns the reference
// and the bytes consumed.
func refCssURL(b []byte) (string, int) {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	if i < len(b) && (b[i] == '"' || b[i] == '\'') {
		q := b[i]
		end := bytes.IndexByte(b[i+1:], q)
		if end < 0 {
			return "", len(b)
		}
		return string(b[i+1 : i+1+end]), i + 2 + end
	}
	end := bytes.IndexByte(b[i:], ')')
	if end < 0 {
		return "", len(b)
	}
	return string(bytes.TrimSpace(b[i : i+end])), i + end + 1
}

func refHasFoldPrefix(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && strings.EqualFold(string(b[:len(prefix)]), prefix)
}
