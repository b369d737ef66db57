package synth

import (
	"net/netip"
	"strconv"
	"time"
)

// Clients browsing: pageviews, the objects they fetch and the addresses of
// clients and servers.

type client struct {
	idx  int
	addr netip.Addr
	rtt  int64
	port uint16
	ua   string
	npv  int

	// Extended model.
	noRef bool
	// lastEnd: when the client's latest page, after-load fetches
	// included, ended at the client (extended model).
	lastEnd int64
	srv     int      // the one server a no-Referer client browses
	conns   []*pconn // its keep-alive connections (no-Referer clients)
	cookie  string
}

var userAgents = []string{
	"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
}

type object struct {
	url, ctype string
	size       int
	dest       dest
}

func (g *gen) uniform(r [2]time.Duration) int64 {
	if r[1] <= r[0] {
		return int64(r[0])
	}
	return int64(r[0]) + g.rng.Int64N(int64(r[1]-r[0]))
}

// pageview plans one page load by cl starting at tc (client clock) and emits
// its truth records.
func (g *gen) pageview(cl *client, tc int64) *stream {
	g.pvID++
	g.sum.Pageviews++
	cl.npv++
	g.takeEv()
	si := g.rng.IntN(len(g.servers))
	srv := g.servers[si]
	host := "www" + strconv.Itoa(si+1) + ".example.com"
	page := "/site/" + strconv.Itoa(g.rng.IntN(500)) + "/index.html"
	referer := "http://" + host + page
	emit := func(tr TruthRecord, o object, container bool, method string) {
		tr.PageviewID, tr.Container = g.pvID, container
		tr.Method, tr.Host, tr.URL, tr.Status, tr.ContentType = method, host, o.url, 200, o.ctype
		tr.UserAgent = cl.ua
		if !container {
			tr.Referer = referer
		}
		g.sum.Transactions++
		if g.truth != nil {
			g.truth(tr)
		}
	}

	c0 := g.open(cl, srv, tc)
	htmlSize := 4000 + g.rng.IntN(76000)
	req := Request("GET", host, page, "User-Agent: "+cl.ua,
		"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
		"Accept-Encoding: gzip, deflate", "Connection: keep-alive")
	head := ResponseHeader(200, "text/html; charset=utf-8", htmlSize, "Server: synth", "Connection: keep-alive")
	from := len(g.ev) // the container's planned segments, for Markup
	tr := g.exchange(c0, req, head, htmlSize, g.uniform(g.wl.ContainerTime))
	to := len(g.ev)
	tr.Client, tr.Server = c0.c.ClientAddr, srv
	emit(tr, object{url: page, ctype: "text/html; charset=utf-8", size: htmlSize}, true, "GET")

	nobj := g.wl.ObjectsPerPage[0] + g.rng.IntN(g.wl.ObjectsPerPage[1]-g.wl.ObjectsPerPage[0]+1)
	conns := []*pconn{c0}
	if nobj > 0 {
		tp := c0.free + int64(parseDelay)
		c0.free = tp
		for range min(nobj, g.wl.ConnsPerClient) - 1 {
			conns = append(conns, g.open(cl, srv, tp))
		}
	}
	var urls []string
	for k := range nobj {
		o := g.object(k)
		pc := conns[0]
		for _, x := range conns[1:] {
			if x.free < pc.free {
				pc = x
			}
		}
		req := Request("GET", host, o.url, "User-Agent: "+cl.ua, "Accept: */*",
			"Referer: "+referer, "Accept-Encoding: gzip, deflate", "Connection: keep-alive")
		head := ResponseHeader(200, o.ctype, o.size, "Server: synth", "Cache-Control: max-age=3600", "Connection: keep-alive")
		tr := g.exchange(pc, req, head, o.size, g.uniform(g.wl.ServerTime))
		tr.Client, tr.Server = pc.c.ClientAddr, srv
		emit(tr, o, false, "GET")
		urls = append(urls, o.url)
	}
	if g.wl.Markup {
		g.markup(g.ev[from:to], head, host, page, urls, htmlSize)
	}
	for _, pc := range conns {
		g.close(pc)
	}
	return g.seal()
}

func (g *gen) object(k int) object {
	n := strconv.Itoa(k)
	switch r := g.rng.IntN(10); {
	case r < 2:
		return object{url: "/static/app" + n + ".js", ctype: "application/javascript", size: 2000 + g.rng.IntN(58000), dest: destScript}
	case r < 3:
		return object{url: "/static/style" + n + ".css", ctype: "text/css", size: 2000 + g.rng.IntN(38000), dest: destStyle}
	case r < 9:
		if r&1 == 0 {
			return object{url: "/img/photo" + n + ".jpg", ctype: "image/jpeg", size: 1000 + g.rng.IntN(119000), dest: destImage}
		}
		return object{url: "/img/icon" + n + ".png", ctype: "image/png", size: 500 + g.rng.IntN(20000), dest: destImage}
	default:
		// The large images the REWRITE EMBEDS what-if is about.
		return object{url: "/img/hero" + n + ".jpg", ctype: "image/jpeg", size: 240000 + g.rng.IntN(30000), dest: destImage}
	}
}

// clientAddr spreads clients over the documentation ranges while they fit
// (198.51.100.0/24 then 203.0.113.0/24 from .101), else over the benchmark
// range 198.18.0.0/15.
func clientAddr(i int, v6 bool) netip.Addr {
	if v6 {
		j := i + 1
		return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 13: byte(j >> 16), 14: byte(j >> 8), 15: byte(j)})
	}
	switch {
	case i < 254:
		return netip.AddrFrom4([4]byte{198, 51, 100, byte(i + 1)})
	case i < 254+150:
		return netip.AddrFrom4([4]byte{203, 0, 113, byte(i - 254 + 101)})
	}
	j := i - 404 + 1
	return netip.AddrFrom4([4]byte{198, 18 + byte(j>>16&1), byte(j >> 8), byte(j)})
}

// serverAddr uses 203.0.113.1-100 (at most 100 servers).
func serverAddr(i int, v6 bool) netip.Addr {
	if v6 {
		return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 2, 15: byte(i + 1)})
	}
	return netip.AddrFrom4([4]byte{203, 0, 113, byte(i%100 + 1)})
}
