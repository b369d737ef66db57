package synth

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

// Markup for containers whose length is already decided: a benchmark must
// time rtmon on pages that are tags and attributes from the first byte, as
// real ones are, without changing a single packet's size or time.

// HTMLDocument returns an HTML document of exactly n bytes as a site's CMS
// serves it: doctype, a head with meta tags, an inline <style>, stylesheet
// links and deferred scripts, then a body of nested divs, sections, lists,
// tables, forms, paragraphs with inline links and entities, comments, inline
// scripts and the odd style attribute. It names each of refs (root-relative
// URLs of host's objects) at least once, written absolute, root-relative or
// relative to page: .css as a stylesheet, .js as a script (the first half in
// the head, the rest at the end of the body), anything else as an image, the
// last of which is an inline background. Navigation links name other pages,
// which a browser does not fetch. Deterministic for seed. When n is too
// small for the markup that names every ref, the document is cut to n bytes.
func HTMLDocument(seed uint64, host, page string, refs []string, n int) []byte {
	out := buildDocument(seed, host, page, refs, n, false)
	if len(out) > n {
		// Small pages with many objects: without the optional parts.
		out = buildDocument(seed, host, page, refs, n, true)
	}
	return out[:min(len(out), n)]
}

// buildDocument writes the document of HTMLDocument, which may come out
// longer than n; lean leaves out what no ref needs: inline style and
// scripts, social meta tags, the menu, captions and the footer's links.
func buildDocument(seed uint64, host, page string, refs []string, n int, lean bool) []byte {
	d := &htmlDoc{rng: rand.New(rand.NewPCG(seed, 0x68746d6c646f63)), host: host, lean: lean,
		up: strings.Repeat("../", max(strings.Count(page, "/")-1, 0))}
	var css, js, img []string
	for _, u := range refs {
		switch {
		case strings.HasSuffix(u, ".css"):
			css = append(css, u)
		case strings.HasSuffix(u, ".js"):
			js = append(js, u)
		default:
			img = append(img, u)
		}
	}
	d.head(page, css, js[:len(js)/2])
	var bg string
	if len(img) > 0 {
		bg, img = img[len(img)-1], img[:len(img)-1]
	}
	tail := d.tail(js[len(js)/2:])
	d.bodyStart(bg)
	d.content(img, n-len(tail))
	return append(d.b, tail...)
}

// htmlDoc is a document being written.
type htmlDoc struct {
	rng  *rand.Rand
	host string
	up   string // from the page's directory to the site root
	b    []byte
	ids  int
	lean bool // see buildDocument
}

// ref writes u as pages do: absolute, root-relative or relative.
func (d *htmlDoc) ref(u string) string {
	switch d.rng.IntN(3) {
	case 0:
		return "http://" + d.host + u
	case 1:
		return u
	}
	return d.up + strings.TrimPrefix(u, "/")
}

// link is a navigation link to another page of the site.
func (d *htmlDoc) link() string {
	return "/site/" + strconv.Itoa(d.rng.IntN(500)) + "/index.html"
}

func (d *htmlDoc) w(s ...string) {
	for _, x := range s {
		d.b = append(d.b, x...)
	}
}

// full is 0 for a lean document, else 1: how many of an optional part.
func (d *htmlDoc) full() int {
	if d.lean {
		return 0
	}
	return 1
}

// id returns a fresh element id.
func (d *htmlDoc) id(prefix string) string {
	d.ids++
	return prefix + "-" + strconv.Itoa(d.ids)
}

func (d *htmlDoc) head(page string, css, js []string) {
	d.w("<!DOCTYPE html>\n<html lang=\"en\" class=\"no-js\">\n<head>\n<meta charset=\"utf-8\">\n",
		"<meta http-equiv=\"X-UA-Compatible\" content=\"IE=edge\">\n",
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1, shrink-to-fit=no\">\n",
		"<title>", d.words(4+d.rng.IntN(5)), " | ", d.host, "</title>\n")
	if !d.lean {
		d.w("<meta name=\"description\" content=\"", d.words(18), "\">\n",
			"<meta property=\"og:title\" content=\"", d.words(6), "\">\n",
			"<meta property=\"og:url\" content=\"http://", d.host, page, "\">\n",
			"<link rel=\"canonical\" href=\"http://", d.host, page, "\">\n",
			"<link rel=\"preconnect\" href=\"https://fonts.example.net\" crossorigin>\n", inlineStyle)
	}
	for _, u := range css {
		d.w("<link rel=\"stylesheet\" href=\"", d.ref(u), "\" media=\"all\">\n")
	}
	for i, u := range js {
		attr := " defer"
		if i%2 == 1 {
			attr = " async"
		}
		d.w("<script src=\"", d.ref(u), "\"", attr, "></script>\n")
	}
	if d.lean {
		d.w("</head>\n")
		return
	}
	d.w("<script>document.documentElement.className=document.documentElement.className.replace(\"no-js\",\"js\");",
		"window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments);}gtag(\"js\",new Date());",
		"gtag(\"config\",\"G-", strconv.Itoa(100000+d.rng.IntN(900000)), "\",{\"anonymize_ip\":true});</script>\n",
		"</head>\n")
}

// inlineStyle is the critical CSS themes inline in the head.
const inlineStyle = `<style id="critical-css">
:root{--brand:#1a5fb4;--text:#222;--muted:#6c757d}
*,*::before,*::after{box-sizing:border-box}
body{margin:0;font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--text);line-height:1.5}
.container{max-width:1140px;margin:0 auto;padding:0 15px}
.site-header{display:flex;align-items:center;justify-content:space-between;border-bottom:1px solid #e5e5e5}
.nav>li{display:inline-block;margin-right:1rem}.nav a{color:var(--brand);text-decoration:none}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(240px,1fr));gap:24px}
.card{border:1px solid #ddd;border-radius:4px;padding:16px}.card h3{font-size:1.1rem;margin:0 0 .5rem}
.hero{min-height:320px;background-size:cover;background-position:center}
@media (max-width:768px){.site-header{flex-direction:column}.grid{grid-template-columns:1fr}}
</style>
`

func (d *htmlDoc) bodyStart(bg string) {
	d.w("<body class=\"page page-id-", strconv.Itoa(d.rng.IntN(9000)+100), " layout-default\">\n",
		"<a class=\"skip-link sr-only\" href=\"#main\">Skip to content</a>\n",
		"<div id=\"page\" class=\"site\">\n<header class=\"site-header container\" role=\"banner\">\n",
		"<div class=\"site-branding\"><a href=\"/\" rel=\"home\" class=\"site-title\">", d.host, "</a></div>\n",
		"<nav id=\"site-navigation\" class=\"main-navigation\" aria-label=\"Primary\">\n<ul id=\"primary-menu\" class=\"nav menu\">\n")
	for range (4 + d.rng.IntN(4)) * d.full() {
		d.w("<li class=\"menu-item\"><a href=\"", d.link(), "\">", d.words(1+d.rng.IntN(2)), "</a></li>\n")
	}
	d.w("</ul>\n</nav>\n</header>\n<main id=\"main\" class=\"site-main container\">\n")
	if bg != "" {
		d.w("<div class=\"hero\" id=\"", d.id("hero"), "\" style=\"background-image:url('", d.ref(bg), "')\">",
			"<div class=\"hero-inner\"><h1 class=\"entry-title\">", d.words(5+d.rng.IntN(4)), "</h1></div></div>\n")
	} else {
		d.w("<h1 class=\"entry-title\">", d.words(5+d.rng.IntN(4)), "</h1>\n")
	}
	d.w("<article class=\"post type-post status-publish\">\n")
}

// content writes blocks, each image after one of the first, until the
// document is end bytes long.
func (d *htmlDoc) content(img []string, end int) {
	// A block is at most ~2 KB: none overshoots end, and with little room
	// left the images still go in, bare.
	for len(img) > 0 || end-len(d.b) > 3000 {
		if end-len(d.b) > 3000 {
			d.block()
		}
		if len(img) > 0 {
			d.image(img[0])
			img = img[1:]
		}
	}
	for end-len(d.b) > 1500 { // a paragraph is at most ~1.2 KB
		d.w("<p>", d.prose(60+d.rng.IntN(40)), "</p>\n")
	}
	if r := end - len(d.b); r >= len("<p></p>\n") {
		d.w("<p>", d.exactText(r-len("<p></p>\n")), "</p>\n")
	}
	for len(d.b) < end {
		d.b = append(d.b, '\n')
	}
}

// block writes one of the shapes page bodies are made of (at most ~2 KB).
func (d *htmlDoc) block() {
	switch d.rng.IntN(10) {
	case 0:
		d.w("<div class=\"grid related\">\n")
		for range 3 {
			d.w("<div class=\"card\"><a href=\"", d.link(), "\" class=\"card-link\"><h3>", d.words(4+d.rng.IntN(4)),
				"</h3></a><p class=\"meta text-muted\"><time datetime=\"2026-0", strconv.Itoa(1+d.rng.IntN(9)), "-1",
				strconv.Itoa(d.rng.IntN(10)), "\">", strconv.Itoa(1+d.rng.IntN(28)), " days ago</time> &middot; ",
				strconv.Itoa(2+d.rng.IntN(12)), " min read</p><p>", d.words(14+d.rng.IntN(16)), "</p></div>\n")
		}
		d.w("</div>\n")
	case 1:
		d.w("<ul class=\"list-unstyled links\">\n")
		for range 3 + d.rng.IntN(6) {
			d.w("<li><a href=\"", d.link(), "\" title=\"", d.words(3), "\">", d.words(3+d.rng.IntN(5)), "</a></li>\n")
		}
		d.w("</ul>\n")
	case 2:
		d.w("<div class=\"callout\" style=\"margin:1.5rem 0;padding:12px 16px;border-left:4px solid #c0392b;background:#fdf2f0\">",
			"<p><strong>", d.words(3), "</strong> ", d.prose(20+d.rng.IntN(30)), "</p></div>\n")
	case 3:
		d.w("<script>(function(){var el=document.getElementById(\"", d.id("s"), "\");if(!el||!(\"IntersectionObserver\" in window))return;",
			"var io=new IntersectionObserver(function(es){es.forEach(function(e){if(e.isIntersecting){el.classList.add(\"in-view\");",
			"io.disconnect();}});},{rootMargin:\"", strconv.Itoa(50*d.rng.IntN(8)), "px\"});io.observe(el);})();</script>\n")
	case 4:
		d.w("<table class=\"table data\">\n<thead><tr><th scope=\"col\">", d.words(1), "</th><th scope=\"col\">", d.words(1),
			"</th><th scope=\"col\">", d.words(2), "</th></tr></thead>\n<tbody>\n")
		for range 2 + d.rng.IntN(5) {
			d.w("<tr><td>", d.words(2), "</td><td class=\"num\">", strconv.Itoa(d.rng.IntN(100000)), "</td><td>",
				d.words(4+d.rng.IntN(6)), "</td></tr>\n")
		}
		d.w("</tbody>\n</table>\n")
	case 5:
		d.w("<!-- block:newsletter v", strconv.Itoa(d.rng.IntN(40)), " -->\n<form action=\"/subscribe\" method=\"post\" class=\"newsletter\" id=\"",
			d.id("form"), "\"><label for=\"email\">", d.words(4), "</label><input type=\"email\" id=\"email\" name=\"email\" ",
			"placeholder=\"you@example.org\" required><input type=\"hidden\" name=\"token\" value=\"",
			strconv.FormatUint(d.rng.Uint64(), 36), "\"><button type=\"submit\" class=\"btn btn-primary\">Subscribe</button></form>\n")
	default:
		d.w("<section class=\"entry-content\" id=\"", d.id("s"), "\">\n<h2>", d.words(3+d.rng.IntN(5)), "</h2>\n")
		for range 1 + d.rng.IntN(3) {
			d.w("<p>", d.prose(30+d.rng.IntN(60)), "</p>\n")
		}
		d.w("</section>\n")
	}
}

// image writes a figure naming u, now and then with a srcset. Never
// loading="lazy": the workload fetches every object within the load, and a
// lazy image would tell rtmon the load does not wait for it.
func (d *htmlDoc) image(u string) {
	r := d.ref(u)
	d.w("<figure class=\"wp-block-image size-large\"><img src=\"", r, "\" alt=\"", d.words(3+d.rng.IntN(4)),
		"\" width=\"", strconv.Itoa(320+40*d.rng.IntN(20)), "\" height=\"", strconv.Itoa(180+30*d.rng.IntN(12)),
		"\" decoding=\"async\" class=\"img-fluid\"")
	if d.rng.IntN(3) == 0 {
		d.w(" srcset=\"", r, " 1x, ", r, " 2x\"")
	}
	d.w(">")
	if !d.lean {
		d.w("<figcaption>", d.words(6+d.rng.IntN(8)), "</figcaption>")
	}
	d.w("</figure>\n")
}

// tail is the end of the document: footer, the rest of the scripts.
func (d *htmlDoc) tail(js []string) []byte {
	var b strings.Builder
	b.WriteString("</article>\n</main>\n<footer class=\"site-footer\" role=\"contentinfo\">\n<div class=\"container\">\n<ul class=\"footer-links\">")
	for _, s := range []string{"About", "Contact", "Privacy", "Terms"}[:4*d.full()] {
		b.WriteString("<li><a href=\"/" + strings.ToLower(s) + "/\">" + s + "</a></li>")
	}
	b.WriteString("</ul>\n<p class=\"copyright\">&copy; 2026 " + d.host + ". All rights reserved.</p>\n</div>\n</footer>\n</div>\n")
	for _, u := range js {
		b.WriteString("<script src=\"" + d.ref(u) + "\"></script>\n")
	}
	if !d.lean {
		b.WriteString("<script type=\"application/ld+json\">{\"@context\":\"https://schema.org\",\"@type\":\"WebPage\",\"name\":\"" +
			d.words(4) + "\"}</script>\n")
	}
	b.WriteString("</body>\n</html>\n")
	return []byte(b.String())
}

// words returns n words of text, the first capitalised.
func (d *htmlDoc) words(n int) string { return randomWords(d.rng, n, false) }

// prose is n words of paragraph text with sentences, inline links,
// emphasis and entities.
func (d *htmlDoc) prose(n int) string {
	var b strings.Builder
	for n > 0 {
		k := min(n, 6+d.rng.IntN(12))
		n -= k
		s := d.words(k)
		switch d.rng.IntN(8) {
		case 0:
			s = "<a href=\"" + d.link() + "\">" + s + "</a>"
		case 1:
			s = "<strong>" + s + "</strong>"
		case 2:
			s = "<em>" + s + "</em> &amp; <code>" + vocabulary[d.rng.IntN(len(vocabulary))] + "()</code>"
		case 3:
			s += "&nbsp;&mdash;"
		}
		b.WriteString(s)
		b.WriteString(". ")
	}
	return strings.TrimSuffix(b.String(), " ")
}

// exactText is plain text of exactly n bytes.
func (d *htmlDoc) exactText(n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(d.words(8))
		b.WriteString(". ")
	}
	return b.String()[:n]
}

// markup gives a planned container response, whose events are evs, an
// HTML document naming urls in place of its size-byte filler body. Its
// segments get new slices of the same lengths: the filler is shared.
func (g *gen) markup(evs []event, head []byte, host, page string, urls []string, size int) {
	doc := HTMLDocument(uint64(g.wl.Seed)*0x9e3779b97f4a7c15^g.pvID, host, page, urls, size)
	wire := append(append(make([]byte, 0, len(head)+size), head...), doc...)
	base, found := uint32(0), false
	for _, e := range evs {
		if e.kind == evData && !found {
			base, found = e.rel, true // segment 0 is planned first
		}
	}
	for i := range evs {
		e := &evs[i]
		if e.kind == evData || e.kind == evRetrans {
			off := int(e.rel - base)
			e.payload = wire[off : off+len(e.payload)]
		}
	}
}
