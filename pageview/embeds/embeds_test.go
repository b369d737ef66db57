package embeds

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
)

const page = `<!DOCTYPE html><html><head>
<base href="/site/">
<link rel="stylesheet" href="css/main.css">
<link rel="preload" as="image" href="/img/hero.webp" imagesrcset="/img/hero-1x.webp 1x, /img/hero-2x.webp 2x">
<link rel="modulepreload" href="/js/mod.js">
<link rel="icon" href="/favicon.png">
<link rel="prefetch" href="/next.html">
<link rel="preconnect" href="http://cdn.example.com">
<script async src="https://cdn.example.com/a.js#frag"></script>
<script defer src='js/d.js'></script>
<script>var x = "<img src=no.png>";</script>
<style>@import "print.css"; body { background: URL( 'bg.png' ) } /* url(comment.png) */</style>
</head><body>
<img src="i/1.png" srcset="i/1@2x.png 2x, i/1@3x.png 3x">
<img loading="lazy" src="i/below.png">
<picture><source srcset="i/p.avif"><img src="i/p.jpg"></picture>
<div style="background-image:url(i/div.png)"></div>
<iframe src="//ads.example.net/frame.html"></iframe>
<video poster="v/poster.jpg" src="v/movie.mp4"></video>
<img src="data:image/png;base64,AAAA"><a href="/not-fetched.html">link</a>
<img src="javascript:alert(1)"><img src="i/1.png">
</body></html>`

func TestExtractHTML(t *testing.T) {
	pg, err := Extract([]byte(page), "text/html; charset=utf-8", "", "http://example.com/index.html")
	if err != nil {
		t.Fatal(err)
	}
	refs := pg.Refs
	if pg.NoReferrer {
		t.Error("no referrer policy in the page, yet NoReferrer")
	}
	got := map[string]Kind{}
	for _, r := range refs {
		if _, dup := got[r.URL]; dup {
			t.Errorf("%s twice", r.URL)
		}
		got[r.URL] = r.Kind
	}
	want := map[string]Kind{
		"http://example.com/site/css/main.css": Blocking,
		"http://example.com/img/hero.webp":     Blocking,
		"http://example.com/img/hero-1x.webp":  Blocking,
		"http://example.com/img/hero-2x.webp":  Blocking,
		"http://example.com/js/mod.js":         Blocking,
		"http://example.com/favicon.png":       Deferred,
		"http://example.com/next.html":         Deferred,
		"https://cdn.example.com/a.js":         Blocking,
		"http://example.com/site/js/d.js":      Blocking,
		"http://example.com/site/print.css":    Blocking,
		"http://example.com/site/bg.png":       Blocking,
		"http://example.com/site/i/1.png":      Blocking,
		"http://example.com/site/i/1@2x.png":   Blocking,
		"http://example.com/site/i/1@3x.png":   Blocking,
		"http://example.com/site/i/below.png":  Deferred,
		"http://example.com/site/i/p.avif":     Blocking,
		"http://example.com/site/i/p.jpg":      Blocking,
		"http://example.com/site/i/div.png":    Blocking,
		"http://ads.example.net/frame.html":    Blocking,
		"http://example.com/site/v/poster.jpg": Blocking,
		"http://example.com/site/v/movie.mp4":  Deferred,
	}
	for u, k := range want {
		if got[u] != k {
			t.Errorf("%s: kind %v, want %v", u, got[u], k)
		}
	}
	for u := range got {
		if _, ok := want[u]; !ok {
			t.Errorf("unexpected reference %s", u)
		}
	}
}

func TestExtractCSS(t *testing.T) {
	css := `@import url("base.css"); @import 'theme.css';
	@font-face { src: url(/fonts/a.woff2) format("woff2"), url('/fonts/a.woff') }
	.x { background: url(data:image/gif;base64,R0lG) } .y{background:url( "../img/y.png" )}`
	pg, err := Extract([]byte(css), "text/css", "", "http://example.com/static/css/site.css")
	if err != nil {
		t.Fatal(err)
	}
	refs := pg.Refs
	var urls []string
	for _, r := range refs {
		urls = append(urls, r.URL)
		if r.Kind != Blocking {
			t.Errorf("%s: %v", r.URL, r.Kind)
		}
	}
	want := "http://example.com/static/css/base.css http://example.com/static/css/theme.css http://example.com/fonts/a.woff2 http://example.com/fonts/a.woff http://example.com/static/img/y.png"
	if strings.Join(urls, " ") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(urls, " "), want)
	}
}

func TestReferrerPolicy(t *testing.T) {
	pg, err := Extract([]byte(`<html><head><META NAME="Referrer" CONTENT=" No-Referrer "><img src=/a.png>`), "text/html", "", "http://h/")
	if err != nil || !pg.NoReferrer || len(pg.Refs) != 1 {
		t.Errorf("%+v %v", pg, err)
	}
	pg, _ = Extract([]byte(`<meta name="referrer" content="origin">`), "text/html", "", "http://h/")
	if pg.NoReferrer {
		t.Error("origin is not no-referrer")
	}
}

func compress(t *testing.T, coding string, b []byte) []byte {
	var buf bytes.Buffer
	var w interface {
		Write([]byte) (int, error)
		Close() error
	}
	switch coding {
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "deflate":
		w = zlib.NewWriter(&buf)
	case "raw-deflate":
		fw, err := flate.NewWriter(&buf, flate.BestSpeed)
		if err != nil {
			t.Fatal(err)
		}
		w = fw
	case "br":
		w = brotli.NewWriter(&buf)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestContentCodings(t *testing.T) {
	plain := []byte(`<html><img src="/a.png"><script src="/b.js"></script></html>`)
	for _, coding := range []string{"gzip", "deflate", "raw-deflate", "br"} {
		header := coding
		if coding == "raw-deflate" {
			header = "deflate"
		}
		pg, err := Extract(compress(t, coding, plain), "text/html", header, "http://h/")
		if err != nil || len(pg.Refs) != 2 {
			t.Errorf("%s: %v, %v", coding, pg.Refs, err)
		}
	}
	// gzip then br, as "Content-Encoding: gzip, br" says.
	both := compress(t, "br", compress(t, "gzip", plain))
	if pg, err := Extract(both, "text/html", "gzip, br", "http://h/"); err != nil || len(pg.Refs) != 2 {
		t.Errorf("gzip, br: %v, %v", pg.Refs, err)
	}
	if _, err := Extract(plain, "text/html", "compress", "http://h/"); !errors.Is(err, ErrEncoding) {
		t.Errorf("unknown coding: %v", err)
	}
	if _, err := Extract(plain, "image/png", "", "http://h/"); !errors.Is(err, ErrNotPage) {
		t.Errorf("image: %v", err)
	}
}

// A body cut short by the capture (snap length, a hole) still gives the
// references before the cut, with an error saying it was cut.
func TestTruncatedBody(t *testing.T) {
	var b strings.Builder
	b.WriteString("<html><body>")
	for i := range 300 {
		b.WriteString(`<img src="/img/` + strings.Repeat("x", i%7) + `-` + string(rune('a'+i%26)) + `.png"> filler text to compress less well 0123456789 `)
	}
	z := compress(t, "gzip", []byte(b.String()))
	pg, err := Extract(z[:len(z)/2], "text/html", "gzip", "http://h/")
	if !errors.Is(err, ErrTruncated) || len(pg.Refs) == 0 {
		t.Fatalf("cut gzip: %d refs, %v", len(pg.Refs), err)
	}
}

func TestBounds(t *testing.T) {
	bomb := compress(t, "gzip", bytes.Repeat([]byte{' '}, MaxDecoded+10))
	if _, err := Extract(bomb, "text/html", "gzip", "http://h/"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("bomb: %v", err)
	}
	var b strings.Builder
	for i := range 2 * MaxRefs {
		b.WriteString(`<img src="/` + strings.Repeat("a", 1+i%50) + string(rune('0'+i%10)) + `/` + string(rune('A'+i%26)) + `.png">`)
		b.WriteString(`<img src="/n` + string(rune('a'+i%26)) + string(rune('a'+(i/26)%26)) + `.png">`)
	}
	pg, _ := Extract([]byte(b.String()), "text/html", "", "http://h/")
	if len(pg.Refs) > MaxRefs {
		t.Errorf("%d refs, bound %d", len(pg.Refs), MaxRefs)
	}
}

func FuzzExtract(f *testing.F) {
	f.Add([]byte(page), "text/html", "")
	f.Add([]byte(`a{background:url(x.png)} @import "y.css";`), "text/css", "")
	f.Add([]byte("\x1f\x8b\x08\x00"), "text/html", "gzip")
	f.Add([]byte("<img src=\"\x00\">"), "application/xhtml+xml", "br")
	f.Fuzz(func(t *testing.T, body []byte, ct, ce string) {
		pg, _ := Extract(body, ct, ce, "http://example.com/a/b.html")
		refs := pg.Refs
		if len(refs) > MaxRefs {
			t.Fatalf("%d refs", len(refs))
		}
		seen := map[string]bool{}
		for _, r := range refs {
			if seen[r.URL] || len(r.URL) == 0 || (r.Kind != Blocking && r.Kind != Deferred) {
				t.Fatalf("bad ref %+v", r)
			}
			if !strings.HasPrefix(r.URL, "http://") && !strings.HasPrefix(r.URL, "https://") {
				t.Fatalf("not absolute: %q", r.URL)
			}
			seen[r.URL] = true
		}
	})
}

// sameAsRef checks that Extract reads body as the reference extraction
// does (ref_test.go).
func sameAsRef(t *testing.T, body []byte, css bool) {
	t.Helper()
	const base = "http://example.com/a/b.html"
	ct := "text/html"
	if css {
		ct = "text/css"
	}
	got, _ := Extract(body, ct, "", base)
	u, _ := url.Parse(base)
	if want := refExtract(body, css, u); !reflect.DeepEqual(got, want) {
		t.Fatalf("body %q:\n got %+v\nwant %+v", body, got, want)
	}
}

// sameCases are bodies where a shortcut could go wrong: text before the
// first tag, no tag at all, raw text, case, duplicate attributes, Unicode
// space and case forms, NULs, and CSS keywords cut at the end.
var sameCases = []string{
	page,
	"",
	"no tags at all, url(x.png) @import 'y.css'",
	"text first url(a.png) <img src=b.png>",
	"a < b <img src=c.png> c <",
	"<<img src=a.png><</style><style>x{background:url(s.png)}</style>",
	// Tag names judged on their raw bytes: case, NULs, the characters that
	// end a name, end tags with attributes.
	"<IMG\tSRC=a.png><ImG/src=b.png><im\x00g src=c.png><STYLE>p{background:url(d.png)}</STYLE x>e{background:url(e.png)}",
	"<div STYLE=\"background:url(f.png)\"><iframe\fsrc=g.html><sourcex src=h.png><script\rsrc=i.js></script>",
	"<style\x00>j{background:url(j.png)}</style\x00><style>k{background:url(k.png)}</ style></style>",
	"<IMG SRC=A.png LOADING=LAZY><img src=a.png src=b.png><img src=c.png SRC=d.png>",
	"<img src=\"\u00a0a.png\u2003\" srcset=\"\u2003b.png\u00a01x,\u3000c.png 2x,,\">",
	"<meta NAME=Referrer content=' No-Referrer '><base href=x/><base href=y/><img src=z.png>",
	"<link rel='Stylesheet PRELOAD icon' href=l.css imagesrcset='p.png 1x'><input type=IMAGE src=i.png>",
	"<div style=\"background:URL( 'K.png' )\"></div><p style='@IMPORT \"i.css\"'>",
	"<style>u\u212arl(no.png) @\u0131mport 'no.css' url(\"yes.png\") /* url(c.png) */ url(</style>",
	"<script>document.write('<img src=no.png>')</script><textarea><img src=no.png></textarea><img src=yes.png>",
	"<script/><img src=no.png></script><img src=yes.png><title><img src=t.png></title>",
	"<img src=\x00a.png><video poster=p.png src=m.mp4><source src=s.mp4><object data=o.swf>",
	"<plaintext><img src=no.png>",
	"<!-- <img src=no.png> --><img src=yes.png><![CDATA[<img src=cd.png>]]>",
	"x{background:url(a.png)} @import 'b.css'; url( c.png ) URL('d.png') url(",
	"@import",
	"/* unterminated url(a.png)",
	"url(a)url(b)(url(c) uurl(d) ur(l(e) url\n(f) uRl(\"g\")",
	"/*/ url(a) */ /**/url(b) */ url(/*)*/ url(c) //* url(d)",
	"@@import 'a' @import'b' @import url(c) @imPORT \"d\" @importx 'e' @import",
	"url('a\nb') url( 'c' ) url(\"d) url(e",
	"<div STYLE='background:url(d.png)' id=x><span sTyLe=\"background:url(s.png)\"><a href=a.html data-style=url(n.png)>" +
		"<p x-stylE='url(p.png)' style><meta content=no-referrer name=referrer><BODY background=b.png><TABLE background=t.png>" +
		"<td background=td.png><th background=th.png><frame src=f.html><embed src=e.swf><object data=o.swf>" +
		"<input type=image src=i.png><audio src=a.mp3><track src=t.vtt><source srcset=s.png><iframe src=i.html>",
}

func TestExtractSameAsRef(t *testing.T) {
	for _, s := range sameCases {
		sameAsRef(t, []byte(s), false)
		sameAsRef(t, []byte(s), true)
	}
}

// FuzzExtractSame checks the extraction against the reference on any body:
// the shortcuts must not change what is read.
func FuzzExtractSame(f *testing.F) {
	for _, s := range sameCases {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, css bool) {
		sameAsRef(t, body, css)
	})
}

// BenchmarkExtract reads a real-looking page, a large page of text with no
// markup (the benchmark capture's synthetic containers), and a stylesheet.
func BenchmarkExtract(b *testing.B) {
	var big bytes.Buffer
	for big.Len() < 40000 {
		big.WriteString("rtmon-synth-0123456789abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKLMNOPQRSTUVWXYZ\n")
	}
	var real bytes.Buffer
	for real.Len() < 40000 {
		real.WriteString(page)
		real.WriteString("<p class=text>Some paragraph text that a page would carry between its tags.</p>\n")
	}
	css := bytes.Repeat([]byte("body { margin: 0 } .x { background: url(/i/bg.png) } /* note */\n"), 500)
	for _, bc := range []struct {
		name, ct string
		body     []byte
	}{{"html", "text/html", real.Bytes()}, {"text-as-html", "text/html", big.Bytes()}, {"css", "text/css", css},
		{"text-as-css", "text/css", big.Bytes()}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Extract(bc.body, bc.ct, "", "http://example.com/"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
