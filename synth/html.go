package synth

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// htmlPage writes host's page of at least size bytes that references exactly
// objs - stylesheets and scripts in the head, an image preload, images
// (some with srcset), one inline background, scripts at the end - each by
// an absolute, root-relative or path-relative URL. It returns the page and
// objs in the order the page first names them, which is the order a browser
// fetches them in. Navigation links (<a href>) name other pages, which are
// not fetched.
func (g *gen) htmlPage(host, page string, objs []object, size int) ([]byte, []object) {
	var css, js, img []int
	for k, o := range objs {
		switch o.dest {
		case destStyle:
			css = append(css, k)
		case destScript:
			js = append(js, k)
		default:
			img = append(img, k)
		}
	}
	// The first image is preloaded (and shown); the last is the inline
	// background (the same one when there is only one).
	preload, bg := -1, -1
	if len(img) > 0 {
		preload, bg = img[0], img[len(img)-1]
		img = img[:len(img)-1]
	}
	var order []int
	seen := make([]bool, len(objs))
	ref := func(k int) string {
		if !seen[k] {
			seen[k] = true
			order = append(order, k)
		}
		u := objs[k].url
		switch g.rng.IntN(3) {
		case 0:
			return "http://" + host + u
		case 1:
			return u
		}
		return "../.." + u // from /site/N/index.html
	}
	var b bytes.Buffer
	n := strings.TrimSuffix(strings.TrimPrefix(page, "/site/"), "/index.html")
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"+
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>%s - page %s</title>\n", host, n)
	if preload >= 0 {
		fmt.Fprintf(&b, "<link rel=\"preload\" as=\"image\" href=\"%s\">\n", ref(preload))
	}
	for _, k := range css {
		fmt.Fprintf(&b, "<link rel=\"stylesheet\" href=\"%s\">\n", ref(k))
	}
	head := len(js) / 2
	for i, k := range js[:head] {
		attr := "defer"
		if i%2 == 1 {
			attr = "async"
		}
		fmt.Fprintf(&b, "<script src=\"%s\" %s></script>\n", ref(k), attr)
	}
	b.WriteString("</head>\n<body>\n<header><nav>")
	for range 5 {
		p := strconv.Itoa(g.rng.IntN(500))
		fmt.Fprintf(&b, "<a href=\"/site/%s/index.html\">Section %s</a> ", p, p)
	}
	b.WriteString("</nav></header>\n<main>\n")
	if bg >= 0 {
		fmt.Fprintf(&b, "<div class=\"hero\" style=\"background:url('%s') center/cover no-repeat\"></div>\n", ref(bg))
	}
	fmt.Fprintf(&b, "<article>\n<h1>%s</h1>\n", g.words(6))
	for len(img) > 0 || b.Len() < size-1000 {
		fmt.Fprintf(&b, "<p>%s</p>\n", g.words(40+g.rng.IntN(80)))
		if len(img) == 0 {
			continue
		}
		k := img[0]
		img = img[1:]
		u := ref(k)
		if g.rng.IntN(3) == 0 {
			fmt.Fprintf(&b, "<figure><img src=\"%s\" srcset=\"%s 800w\" sizes=\"(max-width: 800px) 100vw, 800px\" alt=\"%s\"></figure>\n",
				u, ref(k), g.words(3))
		} else {
			fmt.Fprintf(&b, "<figure><img src=\"%s\" alt=\"%s\"></figure>\n", u, g.words(3))
		}
	}
	var tail bytes.Buffer
	fmt.Fprintf(&tail, "</article>\n</main>\n<footer><p>&copy; 2026 %s</p></footer>\n", host)
	for _, k := range js[head:] {
		fmt.Fprintf(&tail, "<script src=\"%s\"></script>\n", ref(k))
	}
	tail.WriteString("</body>\n</html>\n")
	for b.Len()+tail.Len() < size {
		fmt.Fprintf(&b, "<p>%s</p>\n", g.words(40+g.rng.IntN(80)))
	}
	b.Write(tail.Bytes())
	out := make([]object, 0, len(objs))
	for _, k := range order {
		out = append(out, objs[k])
	}
	return b.Bytes(), out
}

// vocabulary makes page text that compresses about as well as real prose.
var vocabulary = strings.Fields(`the of and to in is that for it as was with be by on not he this are or his from at
which but have an they you were her she there been one all we their has would when if so no will more
about can said them time some could these two may first then do any like my now over such our man me
even most made after also did many before must through back years where much your way well down should
because each just those people how too little state good very make world still own see men work long get
here between both life being under never day same another know while last might us great old year off
come since against go came right used take three network server client request response latency packet
window browser page image script style cache load render measure capture time delay loss retransmit`)

// words returns n space-separated words, the first capitalised, with a
// comma now and then and a full stop.
func (g *gen) words(n int) string {
	return randomWords(g.rng, n, true) + "."
}

// randomWords returns n words of the vocabulary drawn from rng, the first
// capitalised, with commas (one in twelve, each drawn from rng) when
// commas is set.
func randomWords(rng *rand.Rand, n int, commas bool) string {
	var b strings.Builder
	for i := range n {
		w := vocabulary[rng.IntN(len(vocabulary))]
		if i == 0 {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
			continue
		}
		b.WriteByte(' ')
		b.WriteString(w)
		if commas && rng.IntN(12) == 0 && i < n-1 {
			b.WriteByte(',')
		}
	}
	return b.String()
}

// gzipped compresses b as nginx does by default (gzip_comp_level 1) with a
// zero header, so the output is deterministic.
func gzipped(b []byte) []byte {
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestSpeed) // a valid level: no error
	_, _ = zw.Write(b)                                 // writes to a bytes.Buffer cannot fail
	_ = zw.Close()
	return out.Bytes()
}

// chunked frames body as a chunked transfer coding with 4-8 KB chunks, as
// servers flush compressed output.
func (g *gen) chunked(body []byte) []byte {
	var b bytes.Buffer
	for len(body) > 0 {
		n := min(len(body), 4096+g.rng.IntN(4097))
		fmt.Fprintf(&b, "%x\r\n", n)
		b.Write(body[:n])
		b.WriteString("\r\n")
		body = body[n:]
	}
	b.WriteString("0\r\n\r\n")
	return b.Bytes()
}

// headOnly is a response head without Content-Length: chunked or bodiless
// (204) responses.
func headOnly(status int, contentType string, headers ...string) []byte {
	return responseHead(status, contentType, -1, headers)
}
