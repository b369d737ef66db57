package synth

import (
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// The extended model's pageview: browser-like requests, optional redirect,
// real HTML, after-load fetches and keep-alive reuse across pageviews.

// dest is what a request fetches, which decides its Accept and Sec-Fetch-*.
type dest uint8

const (
	destDocument dest = iota
	destStyle
	destScript
	destImage
	destIcon  // favicon: an image request with Chrome's image Accept
	destEmpty // beacon
)

const (
	renderMin, renderMax = 5 * time.Millisecond, 60 * time.Millisecond // load event -> after-load fetches
	htmlCtype            = "text/html; charset=utf-8"
)

// redirectBody is nginx's 302 page.
var redirectBody = []byte("<html>\r\n<head><title>302 Found</title></head>\r\n<body>\r\n" +
	"<center><h1>302 Found</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")

// newClient draws a client's extended-model traits.
func (g *gen) newClient(cl *client) {
	if g.wl.NoRefererRate > 0 {
		cl.noRef = g.rng.Float64() < g.wl.NoRefererRate
	}
	cl.srv = cl.idx % len(g.servers)
	if g.wl.RequestBodies[1] > 0 && g.rng.IntN(3) == 0 {
		cl.cookie = g.cookie(1500 + g.rng.IntN(2500))
	}
}

// pageviewExt plans one page load by cl starting at tc (client clock) in
// the extended model.
func (g *gen) pageviewExt(cl *client, tc int64) *stream {
	g.pvID++
	g.sum.Pageviews++
	cl.npv++
	g.takeEv()
	si := cl.srv
	if !cl.noRef {
		si = g.rng.IntN(len(g.servers))
	}
	srv := g.servers[si]
	host := "www" + strconv.Itoa(si+1) + ".example.com"
	page := "/site/" + strconv.Itoa(g.rng.IntN(500)) + "/index.html"
	pageURL := "http://" + host + page
	referer := pageURL
	if cl.noRef {
		referer = ""
	}
	objs := make([]object, g.wl.ObjectsPerPage[0]+g.rng.IntN(g.wl.ObjectsPerPage[1]-g.wl.ObjectsPerPage[0]+1))
	for k := range objs {
		objs[k] = g.object(k)
	}
	htmlSize := 4000 + g.rng.IntN(76000)
	var html []byte
	if g.wl.HTML {
		html, objs = g.htmlPage(host, page, objs, htmlSize)
	}

	// The navigation goes on an idle keep-alive connection when there is one.
	conns := g.reusable(cl, srv, tc)
	conns = conns[:min(len(conns), g.wl.ConnsPerClient)]
	if len(conns) == 0 {
		conns = append(conns, g.open(cl, srv, tc))
	}
	c0 := conns[0]
	c0.free = max(c0.free, tc)
	redirected := g.wl.Redirects > 0 && g.rng.Float64() < g.wl.Redirects
	if redirected {
		u := "/go/" + strconv.Itoa(g.rng.IntN(1000))
		req := g.request(cl, "GET", host, u, destDocument, "", nil, "")
		head := ResponseHeader(302, "text/html", len(redirectBody), "Server: synth", "Location: "+pageURL, "Connection: keep-alive")
		i := g.exchangeExt(c0, req, head, redirectBody, len(redirectBody), g.uniform(g.wl.ServerTime))
		g.label(i, cl, "GET", host, u, 302, "text/html", "")
		g.recs[i].Redirect = true
	}
	method, form := "GET", []byte(nil)
	if g.wl.RequestBodies[1] > 0 && !redirected && g.rng.IntN(5) == 0 {
		// A form submission; a redirect is always followed by a GET.
		method, form = "POST", formBody(g.wl.RequestBodies[0]+g.rng.IntN(g.wl.RequestBodies[1]-g.wl.RequestBodies[0]+1))
	}
	req := g.request(cl, method, host, page, destDocument, "", form, "application/x-www-form-urlencoded")
	head, wire, payload := g.containerResponse(html, htmlSize)
	wireLen := len(wire)
	if wire == nil {
		wireLen = htmlSize
	}
	i := g.exchangeExt(c0, req, head, wire, wireLen, g.uniform(g.wl.ContainerTime))
	g.label(i, cl, method, host, page, 200, htmlCtype, "")
	g.recs[i].Container, g.recs[i].BodyBytes = true, payload
	load := g.recs[i].End

	if len(objs) > 0 {
		tp := c0.free + int64(parseDelay)
		for _, pc := range conns {
			pc.free = max(pc.free, tp)
		}
		for len(conns) < min(len(objs), g.wl.ConnsPerClient) {
			conns = append(conns, g.open(cl, srv, tp))
		}
		for _, o := range objs {
			pc := g.idlest(cl, srv, &conns, tp, false)
			req := g.request(cl, "GET", host, o.url, o.dest, referer, nil, "")
			head := ResponseHeader(200, o.ctype, o.size, "Server: synth", "Cache-Control: max-age=3600", "Connection: keep-alive")
			i := g.exchangeExt(pc, req, head, nil, o.size, g.uniform(g.wl.ServerTime))
			g.label(i, cl, "GET", host, o.url, 200, o.ctype, referer)
			load = max(load, g.recs[i].End)
		}
	}
	if g.wl.AfterLoad {
		g.afterLoad(cl, srv, host, referer, &conns, load+int64(renderMin)+g.rng.Int64N(int64(renderMax-renderMin)))
	}
	return g.finish(cl, conns)
}

// containerResponse is the container's head and wire body (nil: a filler
// body of size bytes) and its payload length as rtmon counts it: the bytes
// after content coding, without chunk framing.
func (g *gen) containerResponse(html []byte, size int) (head, wire []byte, payload int) {
	if html == nil {
		return ResponseHeader(200, htmlCtype, size, "Server: synth", "Connection: keep-alive"), nil, size
	}
	if g.wl.GzipRate > 0 && g.rng.Float64() < g.wl.GzipRate {
		gz := gzipped(html)
		if g.rng.IntN(2) == 0 {
			head = headOnly(200, htmlCtype, "Transfer-Encoding: chunked", "Content-Encoding: gzip", "Vary: Accept-Encoding",
				"Server: synth", "Connection: keep-alive")
			return head, g.chunked(gz), len(gz)
		}
		head = ResponseHeader(200, htmlCtype, len(gz), "Content-Encoding: gzip", "Vary: Accept-Encoding",
			"Server: synth", "Connection: keep-alive")
		return head, gz, len(gz)
	}
	return ResponseHeader(200, htmlCtype, len(html), "Server: synth", "Connection: keep-alive"), html, len(html)
}

// afterLoad plans the favicon and the beacon a browser sends after the
// load event, at t (client clock), on the page's connections.
func (g *gen) afterLoad(cl *client, srv netip.AddrPort, host, referer string, conns *[]*pconn, t int64) {
	pc := g.idlest(cl, srv, conns, t, true)
	req := g.request(cl, "GET", host, "/favicon.ico", destIcon, referer, nil, "")
	size := 1150 + g.rng.IntN(14000)
	head := ResponseHeader(200, "image/x-icon", size, "Server: synth", "Cache-Control: max-age=86400", "Connection: keep-alive")
	i := g.exchangeExt(pc, req, head, nil, size, g.uniform(g.wl.ServerTime))
	g.label(i, cl, "GET", host, "/favicon.ico", 200, "image/x-icon", referer)
	g.recs[i].AfterLoad = true

	bc := g.idlest(cl, srv, conns, t, true)
	body := beaconBody(40 + g.rng.IntN(360))
	req = g.request(cl, "POST", host, "/beacon", destEmpty, referer, body, "text/plain;charset=UTF-8")
	head = headOnly(204, "", "Server: synth", "Connection: keep-alive")
	i = g.exchangeExt(bc, req, head, []byte{}, 0, g.uniform(g.wl.ServerTime))
	g.label(i, cl, "POST", host, "/beacon", 204, "", referer)
	g.recs[i].AfterLoad = true
}

// label fills in a planned transaction's HTTP fields.
func (g *gen) label(i int, cl *client, method, host, url string, status int, ctype, referer string) {
	r := &g.recs[i]
	r.PageviewID = g.pvID
	r.Method, r.Host, r.URL, r.Status, r.ContentType = method, host, url, status, ctype
	r.UserAgent, r.Referer = cl.ua, referer
}

// alive reports whether the server still keeps pc open for a request the
// client sends at t: its idle timeout runs from its last packet.
func alive(pc *pconn, t int64) bool { return t+pc.d < pc.lastCap+int64(keepAlive) }

// reusable returns cl's idle keep-alive connections to srv still open at tc.
func (g *gen) reusable(cl *client, srv netip.AddrPort, tc int64) []*pconn {
	var out []*pconn
	open := cl.conns[:0]
	for _, pc := range cl.conns {
		if pc.closed {
			continue
		}
		open = append(open, pc)
		if pc.srv == srv && pc.used && pc.free <= tc && pc.lastCap <= tc+pc.d && alive(pc, tc) {
			out = append(out, pc)
		}
	}
	clear(cl.conns[len(open):])
	cl.conns = open
	return out
}

// idlest returns the page connection that can send first at or after t,
// opening one when none is still open then. used keeps to connections that
// have carried a request: after the load event the browser has no use for
// one whose connect it started for objects.
func (g *gen) idlest(cl *client, srv netip.AddrPort, conns *[]*pconn, t int64, used bool) *pconn {
	var best *pconn
	for _, pc := range *conns {
		at := max(pc.free, t)
		if alive(pc, at) && (pc.used || !used) && (best == nil || at < max(best.free, t)) {
			best = pc
		}
	}
	if best == nil {
		best = g.open(cl, srv, t)
		*conns = append(*conns, best)
	}
	best.free = max(best.free, t)
	return best
}

// exchangeExt plans one request/response on pc in the extended model, the
// request sent at pc.free (client clock), and returns the index of its
// truth in g.recs. body is the response body on the wire (nil: filler of
// wireLen bytes).
func (g *gen) exchangeExt(pc *pconn, req, head, body []byte, wireLen int, srvTime int64) int {
	d := pc.d
	tReq := pc.free
	var reorder int64
	if g.wl.ReorderRate > 0 && len(req) > mss && pc.tail == nil && g.rng.Float64() < g.wl.ReorderRate {
		// Not behind a pending tail: its D-SACKs could be sent inside the
		// delay, which event.idOff does not account for.
		reorder = int64(500*time.Microsecond) + g.rng.Int64N(4500)*int64(time.Microsecond) // whole µs: event.lag
	}
	newConn := !pc.used
	res := g.sendRequest(pc, tReq, req, srvTime, reorder)
	if pc.tail != nil {
		g.resolveTail(pc, res.firstArr)
	}
	if res.reordered {
		g.sum.Reordered++
	}
	tr := TruthRecord{NewConn: newConn, Client: pc.c.ClientAddr, Server: pc.srv, RTT: 2 * d, RequestBytes: len(req),
		ServerTime: srvTime, ReqFirstCap: res.firstCap, ReqLastCap: res.doneCap, Start: tReq,
		UpstreamLost: res.lost, Reordered: res.reordered, HandshakeACKLost: res.hsLost}
	if newConn {
		tr.SYNs, tr.SYNACKs, tr.SYNCap = pc.syns, pc.synacks, pc.sSYN
		if tReq == pc.ready {
			tr.Start, tr.Tconn = pc.start, pc.ready-pc.start
		} else {
			tr.Preconnected = true
		}
	}
	pc.used = true
	g.recs = append(g.recs, tr)
	i := len(g.recs) - 1
	r := &g.recs[i]
	respStart := res.doneCap + srvTime
	g.respond(pc, r, i, head, body, len(head)+wireLen, respStart)
	r.Trequest = res.doneCap - d - tReq
	r.Tserver = respStart + d - (res.doneCap - d)
	r.Ttransfer = r.End - (respStart + d)
	return i
}

// finish completes a pageview's connections, reports its truth and seals
// its stream. A no-Referer client's connections stay open for its next
// pageview; their closes are heap items, cancelled when reused.
func (g *gen) finish(cl *client, conns []*pconn) *stream {
	for _, pc := range conns {
		if pc.hsAck != 0 {
			g.add(pc.hsAck, pc.c, evACK, 0, nil) // a spare connection's ACK
			pc.hsAck = 0
		}
		if pc.tail != nil {
			g.resolveTail(pc, noNext)
		}
	}
	for _, pc := range conns {
		if !cl.noRef {
			g.close(pc)
			continue
		}
		pc.closeAt = pc.lastCap + int64(keepAlive)
		g.push(&item{t: pc.closeAt, pc: pc})
		known := false
		for _, x := range cl.conns {
			known = known || x == pc
		}
		if !known {
			cl.conns = append(cl.conns, pc)
		}
	}
	cl.lastEnd = 0
	for _, tr := range g.recs {
		g.sum.Transactions++
		cl.lastEnd = max(cl.lastEnd, tr.End)
		if g.truth != nil {
			g.truth(tr)
		}
	}
	g.recs = g.recs[:0]
	return g.seal()
}

// lazyClose plans a keep-alive close whose time has come, unless the
// connection was reused since (a later close item then stands).
func (g *gen) lazyClose(it *item) *stream {
	pc := it.pc
	if pc.closed || pc.closeAt != it.t {
		return nil
	}
	pc.closed = true
	g.takeEv()
	g.close(pc)
	return g.seal()
}

// request builds a request as cl's browser sends it for dst; body (with
// content type ctype) makes it a POST-style request. It is cut to initCwnd
// segments so it leaves in one flight.
func (g *gen) request(cl *client, method, host, url string, dst dest, referer string, body []byte, ctype string) []byte {
	family := cl.idx % len(userAgents) // 0 Firefox, 1 Chrome, 2 Safari
	var b strings.Builder
	h := func(name, value string) {
		if value != "" {
			b.WriteString(name)
			b.WriteString(": ")
			b.WriteString(value)
			b.WriteString("\r\n")
		}
	}
	b.WriteString(method + " " + url + " HTTP/1.1\r\n")
	h("Host", host)
	accept := acceptFor(family, dst)
	site := "same-origin"
	if dst == destDocument && method == "GET" {
		site = "none"
	}
	length, origin := "", ""
	if body != nil {
		length, origin = strconv.Itoa(len(body)), "http://"+host
	} else {
		ctype = ""
	}
	nav := dst == destDocument
	mode, fdest, user, upgrade := "no-cors", fetchDest(dst), "", ""
	if nav {
		mode, user, upgrade = "navigate", "?1", "1"
	}
	lang := "en-US,en;q=0.9"
	switch family {
	case 1: // Chrome
		h("Connection", "keep-alive")
		h("Content-Length", length)
		h("Upgrade-Insecure-Requests", upgrade)
		h("Origin", origin)
		h("Content-Type", ctype)
		h("User-Agent", cl.ua)
		h("Accept", accept)
		h("Sec-Fetch-Site", site)
		h("Sec-Fetch-Mode", mode)
		h("Sec-Fetch-User", user)
		h("Sec-Fetch-Dest", fdest)
		h("Referer", referer)
		h("Accept-Encoding", "gzip, deflate")
		h("Accept-Language", lang)
		h("Cookie", cl.cookie)
	case 0: // Firefox
		h("User-Agent", cl.ua)
		h("Accept", accept)
		h("Accept-Language", "en-US,en;q=0.5")
		h("Accept-Encoding", "gzip, deflate")
		h("Content-Type", ctype)
		h("Content-Length", length)
		h("Origin", origin)
		h("Connection", "keep-alive")
		h("Referer", referer)
		h("Cookie", cl.cookie)
		h("Upgrade-Insecure-Requests", upgrade)
		h("Sec-Fetch-Dest", fdest)
		h("Sec-Fetch-Mode", mode)
		h("Sec-Fetch-Site", site)
		h("Sec-Fetch-User", user)
	default: // Safari sends no Sec-Fetch-* here, leaving rtmon its fallbacks
		h("Content-Type", ctype)
		h("Origin", origin)
		h("Accept", accept)
		h("Accept-Language", lang)
		h("Content-Length", length)
		h("Connection", "keep-alive")
		h("Accept-Encoding", "gzip, deflate")
		h("User-Agent", cl.ua)
		h("Referer", referer)
		h("Cookie", cl.cookie)
	}
	b.WriteString("\r\n")
	out := append([]byte(b.String()), body...)
	if limit := initCwnd * mss; len(out) > limit && len(body) > 0 {
		// Keep Content-Length true: cut the body and say so.
		cut := len(body) - (len(out) - limit)
		return g.request(cl, method, host, url, dst, referer, body[:max(cut-8, 0)], ctype)
	}
	return out
}

func fetchDest(d dest) string {
	switch d {
	case destDocument:
		return "document"
	case destStyle:
		return "style"
	case destScript:
		return "script"
	case destImage, destIcon:
		return "image"
	}
	return "empty"
}

// acceptFor is each browser's Accept by destination.
func acceptFor(family int, d dest) string {
	switch d {
	case destDocument:
		if family == 1 {
			return "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8"
		}
		return "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	case destStyle:
		return "text/css,*/*;q=0.1"
	case destImage:
		switch family {
		case 0:
			return "image/avif,image/webp,*/*"
		case 2:
			return "image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,video/*;q=0.8,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5"
		}
		return "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"
	case destIcon:
		return "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"
	}
	return "*/*"
}

// cookie is a Cookie header value of about n bytes.
func (g *gen) cookie(n int) string {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	var b strings.Builder
	for k := 0; b.Len() < n; k++ {
		if k > 0 {
			b.WriteString("; ")
		}
		b.WriteString("c" + strconv.Itoa(k) + "=")
		for range 16 + g.rng.IntN(48) {
			b.WriteByte(alnum[g.rng.IntN(len(alnum))])
		}
	}
	return b.String()
}

// formBody and beaconBody are n-byte request bodies.
func formBody(n int) []byte   { return repeatTo("q=synthetic+search&page=2&filter=all&", n) }
func beaconBody(n int) []byte { return repeatTo(`{"t":"load","ms":1234,"ok":true}`, n) }

func repeatTo(pat string, n int) []byte {
	b := make([]byte, 0, n+len(pat))
	for len(b) < n {
		b = append(b, pat...)
	}
	return b[:n]
}
