package pageview

import (
	"encoding/hex"
	"hash/fnv"
	"strings"

	"github.com/rtmon/rtmon/reconstruct"
)

// ID is the pageview id of a container transaction id: stable across
// re-ingests of the same capture, and safe as a file name (hex).
func ID(containerTxID string) string {
	h := fnv.New64a()
	h.Write([]byte("pageview\x00"))
	h.Write([]byte(containerTxID))
	return hex.EncodeToString(h.Sum(nil))
}

// IsContainer reports whether a transaction is an HTML page that starts a
// pageview: its response's Content-Type says HTML; without one (a 304, a
// HEAD, a cut response) the request's Accept decides when it is specific
// (text/html or xhtml first: container; another type: object), else the
// URL shape (ends in "/", .html, .htm, .php, .asp, .aspx, .jsp, or has no
// extension). A 204 or a request other than GET or HEAD without an HTML
// response (a beacon, an API call) is never one: there was nothing to show.
func IsContainer(tx *reconstruct.Transaction) bool {
	if tx.ContentType != "" {
		return isHTML(tx.ContentType)
	}
	if tx.Status == 204 || tx.Method != "" && tx.Method != "GET" && tx.Method != "HEAD" {
		return false
	}
	if a := strings.TrimSpace(tx.Accept); a != "" && !strings.HasPrefix(a, "*/*") {
		return isHTML(a)
	}
	if tx.URL == "" {
		return false
	}
	_, path := splitURL(tx.URL, "")
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	if path == "" || strings.HasSuffix(path, "/") {
		return true
	}
	seg := path[strings.LastIndexByte(path, '/')+1:]
	dot := strings.LastIndexByte(seg, '.')
	if dot < 0 {
		return true
	}
	switch ext := seg[dot+1:]; {
	case strings.EqualFold(ext, "html"), strings.EqualFold(ext, "htm"), strings.EqualFold(ext, "php"),
		strings.EqualFold(ext, "asp"), strings.EqualFold(ext, "aspx"), strings.EqualFold(ext, "jsp"):
		return true
	}
	return false
}

// isHTML reports whether a media type (or an Accept list, by its first
// entry) is HTML.
func isHTML(v string) bool {
	v = strings.TrimSpace(v)
	if i := strings.IndexAny(v, ";,"); i >= 0 {
		v = strings.TrimSpace(v[:i])
	}
	return strings.EqualFold(v, "text/html") || strings.EqualFold(v, "application/xhtml+xml")
}

// splitURL splits a request target into host and path+query: an
// absolute-form target ("http://h/p") carries its own host, an origin-form
// one ("/p") takes host.
func splitURL(u, host string) (string, string) {
	rest, ok := cutScheme(u)
	if !ok {
		return host, u
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return rest[:i], rest[i:]
	}
	return rest, "/"
}

// splitReferer splits a Referer like splitURL and drops a fragment.
func splitReferer(ref, host string) (string, string) {
	h, p := splitURL(ref, host)
	if i := strings.IndexByte(p, '#'); i >= 0 {
		p = p[:i]
	}
	if p == "" {
		p = "/"
	}
	return h, p
}

func cutScheme(u string) (string, bool) {
	switch {
	case len(u) >= 7 && strings.EqualFold(u[:7], "http://"):
		return u[7:], true
	case len(u) >= 8 && strings.EqualFold(u[:8], "https://"):
		return u[8:], true
	case strings.HasPrefix(u, "//"):
		return u[2:], true
	}
	return u, false
}

// urlHash keys a URL for Referer matching: host without userinfo or a
// default port, lower-cased, then path and query redacted as the tracker
// redacts them (Config.Redaction), so a redacted URL or Referer matches the
// page's HTML, which names it as written. Never 0 (0 means "no Referer").
func (g *Grouper) urlHash(host, path string) uint64 {
	path = g.cfg.Redaction.Redact(path)
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		host = host[i+1:]
	}
	host = strings.TrimSuffix(host, ":80")
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(host); i++ {
		b := host[i]
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		h = (h ^ uint64(b)) * prime
	}
	h = (h ^ 0) * prime
	for i := 0; i < len(path); i++ {
		h = (h ^ uint64(path[i])) * prime
	}
	if h == 0 {
		h = 1
	}
	return h
}

// isNavigation reports whether a transaction is a page the user navigated
// to: Sec-Fetch-Dest says so where browsers send it (secure origins);
// elsewhere the response (HTML), the request's Accept and the URL's shape
// decide (IsContainer).
func isNavigation(tx *reconstruct.Transaction) bool {
	switch strings.ToLower(tx.SecFetchDest) {
	case "document":
		return true
	case "":
		return IsContainer(tx)
	}
	return false // an iframe, image, fetch, ... of some page
}

// resolveLocation resolves a redirect's Location against the request's host
// and path: absolute, scheme-relative, absolute-path or relative forms.
func resolveLocation(loc, host, path string) (string, string) {
	if _, ok := cutScheme(loc); ok {
		return splitURL(loc, host)
	}
	if strings.HasPrefix(loc, "/") {
		return host, loc
	}
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	dir := path[:strings.LastIndexByte(path, '/')+1]
	if dir == "" {
		dir = "/"
	}
	return host, dir + loc
}
