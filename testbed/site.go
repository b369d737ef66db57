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

	"github.com/andybalholm/brotli"
)

// Site is a generated web site shaped like a real one: container pages
// embedding 1..11 objects (stylesheets, scripts, images) referenced the ways
// real pages do (preload, async and defer scripts, srcset, an inline style
// url()), HTML served gzip-compressed (brotli from the back end to clients
// that ask for it), a favicon.ico that no page declares (browsers ask for it
// anyway, after the load event), a beacon after load, redirects to the
// containers and some pages whose subresource requests carry no Referer.
type Site struct {
	Pages []Page
	// Content holds every body by URL path, for NginxOptions.Content.
	Content map[string][]byte
}

// Page is one container page.
type Page struct {
	Path    string // static copy served by nginx, "/p3.html"
	Objects []Object
	// Index is the page's number (p3: 3).
	Index int
	// NoReferrer pages declare <meta name="referrer" content="no-referrer">:
	// browsers send no Referer for their subresources and beacons.
	NoReferrer bool
	// Beacon is what the page's script sends 50 ms after its load event:
	// BeaconPost (navigator.sendBeacon to /beacon?p=N, answered 204) or
	// BeaconImage (new Image().src = /b.gif?p=N); "" for none.
	Beacon string
}

// Beacon kinds.
const (
	BeaconPost  = "post"
	BeaconImage = "image"
)

// AppPath is the page's URL through the back end, which answers after ms
// milliseconds of server time.
func (p Page) AppPath(ms int) string {
	return "/app" + p.Path + "?ms=" + strconv.Itoa(ms)
}

// RedirectPath is a URL nginx answers with 302 to the page's static copy.
func (p Page) RedirectPath() string { return fmt.Sprintf("/r/p%d", p.Index) }

// AppRedirectPath is a URL nginx answers with 302 to AppPath(ms).
func (p Page) AppRedirectPath(ms int) string { return fmt.Sprintf("/ra/p%d?ms=%d", p.Index, ms) }

// BeaconPath is the URL of the page's beacon ("" without one).
func (p Page) BeaconPath() string {
	switch p.Beacon {
	case BeaconPost:
		return fmt.Sprintf("/beacon?p=%d", p.Index)
	case BeaconImage:
		return fmt.Sprintf("/b.gif?p=%d", p.Index)
	}
	return ""
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

// Site-wide paths: the undeclared favicon and the image beacon's body.
const (
	FaviconPath = "/favicon.ico"
	BeaconGIF   = "/b.gif"
)

// GenerateSite makes n pages deterministically from seed. Page i has
// 1 + i%11 objects when n >= 11, so all counts 1..11 occur. Pages 3, 7, 11,
// ... have no Referer; even pages post a beacon, odd ones load a beacon
// image.
func GenerateSite(n int, seed uint64) *Site {
	r := rand.New(rand.NewPCG(seed, 0x5173))
	s := &Site{Content: map[string][]byte{}}
	for i := range n {
		p := Page{Path: fmt.Sprintf("/p%d.html", i), Index: i, NoReferrer: i%4 == 3, Beacon: BeaconImage}
		if i%2 == 0 {
			p.Beacon = BeaconPost
		}
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
			if k == 2 {
				// The srcset's 2x candidate: served, never fetched at
				// device pixel ratio 1.
				s.Content[hiDPI(o.Path)] = objectBody(hiDPI(o.Path), ext, 2*size)
			}
		}
		s.Content[p.Path] = pageHTML(p)
		s.Pages = append(s.Pages, p)
	}
	s.Content[FaviconPath] = icoBody(1150)
	s.Content[BeaconGIF] = gifBody()
	return s
}

// hiDPI is the 2x variant's path of an image.
func hiDPI(path string) string {
	return strings.TrimSuffix(path, ".png") + "@2x.png"
}

// pageHTML writes a page the way real ones reference their objects: the
// first object preloaded from the head, stylesheets, scripts in turn plain,
// async and defer, the first image (object 2) with a srcset, the second
// (object 3) as an inline style's background url(), others as <img>. No
// icon is declared, so browsers fetch /favicon.ico after the load event. A
// script sends the page's beacon 50 ms after the load event.
func pageHTML(p Page) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title>\n", p.Path)
	if p.NoReferrer {
		b.WriteString("<meta name=\"referrer\" content=\"no-referrer\">\n")
	}
	if len(p.Objects) > 0 {
		o := p.Objects[0]
		as := map[string]string{"css": "style", "js": "script", "png": "image"}[objectExt(o.Path)]
		fmt.Fprintf(&b, "<link rel=\"preload\" href=\"%s\" as=\"%s\">\n", o.Path, as)
	}
	for k, o := range p.Objects {
		switch objectExt(o.Path) {
		case "css":
			fmt.Fprintf(&b, "<link rel=\"stylesheet\" href=\"%s\">\n", o.Path)
		case "js":
			attr := []string{"", " async", " defer"}[(k/4)%3]
			fmt.Fprintf(&b, "<script src=\"%s\"%s></script>\n", o.Path, attr)
		}
	}
	if path := p.BeaconPath(); path != "" {
		send := fmt.Sprintf("navigator.sendBeacon('%s', 'loaded')", path)
		if p.Beacon == BeaconImage {
			send = fmt.Sprintf("new Image().src = '%s'", path)
		}
		fmt.Fprintf(&b, "<script>window.addEventListener('load', function () { setTimeout(function () { %s; }, 50); });</script>\n", send)
	}
	b.WriteString("</head><body>\n")
	for k, o := range p.Objects {
		if objectExt(o.Path) != "png" {
			continue
		}
		switch k {
		case 2:
			fmt.Fprintf(&b, "<img src=\"%s\" srcset=\"%s 1x, %s 2x\" width=\"10\" height=\"10\" alt=\"\">\n", o.Path, o.Path, hiDPI(o.Path))
		case 3:
			fmt.Fprintf(&b, "<div style=\"width:10px;height:10px;background-image:url('%s')\"></div>\n", o.Path)
		default:
			fmt.Fprintf(&b, "<img src=\"%s\" width=\"10\" height=\"10\" alt=\"\">\n", o.Path)
		}
	}
	// Some text so the container itself spans a few segments (before
	// compression).
	for i := range 40 {
		fmt.Fprintf(&b, "<p>paragraph %d of the rtmon testbed page %s</p>\n", i, p.Path)
	}
	b.WriteString("</body></html>\n")
	return []byte(b.String())
}

// icoBody is a Windows icon holding one PNG image, size bytes long.
func icoBody(size int) []byte {
	img := pngBody(FaviconPath, size-22)
	var b bytes.Buffer
	b.Write([]byte{0, 0, 1, 0, 1, 0}) // reserved, type icon, one image
	var e [16]byte
	e[0], e[1] = 1, 1                        // 1x1 pixel
	binary.LittleEndian.PutUint16(e[4:], 1)  // planes
	binary.LittleEndian.PutUint16(e[6:], 32) // bits per pixel
	binary.LittleEndian.PutUint32(e[8:], uint32(len(img)))
	binary.LittleEndian.PutUint32(e[12:], 22)
	b.Write(e[:])
	b.Write(img)
	return b.Bytes()
}

// gifBody is the classic 1x1 transparent GIF of beacons (43 bytes).
func gifBody() []byte {
	return []byte("GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")
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
// proxies /app/ to. It serves the site's pages after sleeping ?ms=,
// brotli-compressed for clients that accept br.
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
		w.Header().Set("Vary", "Accept-Encoding")
		if acceptsBrotli(r.Header.Get("Accept-Encoding")) {
			// Compressed here; nginx leaves an encoded response alone
			// (and gzips the plain one for clients without br).
			var z bytes.Buffer
			bw := brotli.NewWriterLevel(&z, 5)
			bw.Write(body)
			bw.Close()
			body = z.Bytes()
			w.Header().Set("Content-Encoding", "br")
		}
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

// acceptsBrotli reports whether an Accept-Encoding value allows br.
func acceptsBrotli(v string) bool {
	for _, part := range strings.Split(v, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "br") && strings.ReplaceAll(params, " ", "") != "q=0" {
			return true
		}
	}
	return false
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
