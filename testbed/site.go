package testbed

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Site is a generated web site: container pages, each embedding 1..11
// objects (stylesheets, scripts, images) referenced from its HTML so that a
// browser fetches all of them.
type Site struct {
	Pages []Page
	// Content holds every body by URL path, for NginxOptions.Content.
	Content map[string][]byte
}

// Page is one container page.
type Page struct {
	Path    string // static copy served by nginx, "/p3.html"
	Objects []Object
}

// AppPath is the page's URL through the back end, which answers after ms
// milliseconds of server time.
func (p Page) AppPath(ms int) string {
	return "/app" + p.Path + "?ms=" + strconv.Itoa(ms)
}

// Object is one embedded object.
type Object struct {
	Path string
	Size int
}

// objectSizes are drawn from for embedded objects: small icons to large
// images, so transfers take from one round trip to many.
var objectSizes = []int{600, 1500, 3 << 10, 8 << 10, 14 << 10, 30 << 10, 64 << 10}

// BigImage is the size of the large image every third page embeds.
const BigImage = 256 << 10

// GenerateSite makes n pages deterministically from seed. Page i has
// 1 + i%11 objects when n >= 11, so all counts 1..11 occur.
func GenerateSite(n int, seed uint64) *Site {
	r := rand.New(rand.NewPCG(seed, 0x5173))
	s := &Site{Content: map[string][]byte{}}
	for i := range n {
		p := Page{Path: fmt.Sprintf("/p%d.html", i)}
		nobj := 1 + i%11
		for k := range nobj {
			ext := []string{"css", "js", "png", "png"}[k%4]
			size := objectSizes[r.IntN(len(objectSizes))]
			if k == 2 && i%3 == 0 {
				size = BigImage
			}
			o := Object{Path: fmt.Sprintf("/o/p%d-%d.%s", i, k, ext), Size: size}
			p.Objects = append(p.Objects, o)
			s.Content[o.Path] = objectBody(o.Path, ext, size)
		}
		s.Content[p.Path] = pageHTML(p)
		s.Pages = append(s.Pages, p)
	}
	return s
}

// pageHTML references stylesheets and scripts from the head and images
// from the body. The empty data: icon stops Chromium from asking for
// /favicon.ico after the load event, a request the pageview would absorb.
func pageHTML(p Page) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title>\n<link rel=\"icon\" href=\"data:,\">\n", p.Path)
	for _, o := range p.Objects {
		switch {
		case strings.HasSuffix(o.Path, ".css"):
			fmt.Fprintf(&b, "<link rel=\"stylesheet\" href=\"%s\">\n", o.Path)
		case strings.HasSuffix(o.Path, ".js"):
			fmt.Fprintf(&b, "<script src=\"%s\"></script>\n", o.Path)
		}
	}
	b.WriteString("</head><body>\n")
	for _, o := range p.Objects {
		if strings.HasSuffix(o.Path, ".png") {
			fmt.Fprintf(&b, "<img src=\"%s\" width=\"10\" height=\"10\">\n", o.Path)
		}
	}
	// Some text so the container itself spans a few segments.
	for i := range 40 {
		fmt.Fprintf(&b, "<p>paragraph %d of the rtmon testbed page %s</p>\n", i, p.Path)
	}
	b.WriteString("</body></html>\n")
	return []byte(b.String())
}

// objectBody is valid CSS or JavaScript (one long comment), or a valid PNG:
// Chromium cancels the rest of an image's download (a RST on the wire) as
// soon as its decoder fails, so random bytes would not do.
func objectBody(path, ext string, size int) []byte {
	if ext == "png" {
		return pngBody(path, size)
	}
	b := fileBody(path, size)
	if ext == "css" || ext == "js" {
		for i := range b {
			b[i] = 'a' + byte(i%26)
		}
		if size >= 4 {
			copy(b, "/*")
			copy(b[size-2:], "*/")
		}
	}
	return b
}

// Backend is a Go HTTP server inside the server namespace that nginx
// proxies /app/ to. It serves the site's pages after sleeping ?ms=.
type Backend struct {
	Addr netip.AddrPort
	srv  *http.Server
}

// StartBackend listens on the server address, port 8080, inside the server
// namespace (so nginx reaches it over the namespace's loopback path and
// the capture on the server's veth never sees that hop).
func (tb *Testbed) StartBackend(site *Site) (*Backend, error) {
	addr := netip.AddrPortFrom(tb.Server.Addr, 8080)
	var ln net.Listener
	if err := inNS(tb.Server.NS, func() (err error) {
		ln, err = net.Listen("tcp4", addr.String())
		return err
	}); err != nil {
		return nil, fmt.Errorf("backend listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/app/", func(w http.ResponseWriter, r *http.Request) {
		body, ok := site.Content[strings.TrimPrefix(r.URL.Path, "/app")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if ms, err := strconv.Atoi(r.URL.Query().Get("ms")); err == nil && ms > 0 && ms <= 10000 {
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})
	b := &Backend{Addr: addr, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go b.srv.Serve(ln)
	tb.onClose(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := b.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("backend shutdown: %w", err)
		}
		return nil
	})
	return b, nil
}

// pngBody is a 1x1 grey PNG of exactly size bytes (at least pngMinSize):
// a private ancillary chunk of random bytes before the image data pads it,
// and decoders skip it.
func pngBody(path string, size int) []byte {
	size = max(size, pngMinSize)
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		var hdr [8]byte
		binary.BigEndian.PutUint32(hdr[:4], uint32(len(data)))
		copy(hdr[4:], typ)
		b.Write(hdr[:])
		b.Write(data)
		crc := crc32.NewIEEE()
		crc.Write(hdr[4:])
		crc.Write(data)
		binary.BigEndian.PutUint32(hdr[:4], crc.Sum32())
		b.Write(hdr[:4])
	}
	// width 1, height 1, bit depth 8, colour type 0 (grey), no interlace.
	chunk("IHDR", []byte{0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0})
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write([]byte{0, 0x80}) // filter none, one grey pixel
	zw.Close()
	pad := size - pngMinSize - z.Len() + pngZlibGuess
	chunk("rtMn", fileBody(path, max(pad, 0)))
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	return b.Bytes()
}

// pngMinSize is signature + IHDR + empty padding chunk + IEND + IDAT with a
// pngZlibGuess-byte stream; pngBody corrects for the real stream length.
const (
	pngZlibGuess = 10
	pngMinSize   = 8 + 25 + 12 + 12 + 12 + pngZlibGuess
)
