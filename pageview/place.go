package pageview

import (
	"slices"
	"strings"
	"time"

	"github.com/rtmon/rtmon/pageview/embeds"
	"github.com/rtmon/rtmon/reconstruct"
)

// process places one settled transaction: a redirect waits for its target,
// a navigation opens a pageview, an object joins one (see Grouper) or
// waits as an orphan.
func (g *Grouper) process(h heldTx) {
	tx := h.tx
	if tx.Start < g.lastStart {
		g.stats.Late++
	} else {
		g.lastStart = tx.Start
	}
	defer g.shed()
	key := clientKey{tx.Client, tx.UserAgent}
	c := g.clients[key]
	if isKeyless(tx) {
		g.placeKeyless(c, key, h)
		return
	}
	if isNavigation(tx) && !g.embedded(c, tx) {
		if c == nil {
			c = g.client(key)
		}
		if tx.Location != "" && tx.Status/100 == 3 {
			g.awaitRedirect(c, tx)
			return
		}
		g.open(c, h)
		return
	}
	ref := uint64(0)
	if tx.Referer != "" {
		host, path := splitReferer(tx.Referer, tx.Host)
		ref = g.urlHash(host, path)
		if c != nil {
			c.referers++
		}
	}
	if c != nil {
		if p := g.place(c, tx, ref); p != nil {
			g.attach(p, h)
			return
		}
	}
	if g.norphans >= g.cfg.MaxOrphans {
		g.stats.OrphanOverflow++
		g.standAlone(tx)
		return
	}
	if c == nil {
		c = g.client(key)
	}
	o := &orphan{h: h, c: c, key: refKey{c.id, ref}, expires: tx.Start + int64(g.cfg.OrphanWait)}
	g.orphans[o.key] = append(g.orphans[o.key], o)
	g.orphanQ = append(g.orphanQ, o)
	g.norphans++
	c.orphans++
}

// place finds the open pageview of c an object joins: by Referer, by the
// pages' HTML, by time (see Grouper); nil when none.
func (g *Grouper) place(c *client, tx *reconstruct.Transaction, ref uint64) *pv {
	if ref != 0 {
		if p := g.refs[refKey{c.id, ref}]; p != nil && g.canTake(p, tx, false) {
			g.stats.ByReferer++
			p.referer = true
			return p
		}
	}
	if p := g.declaring(c, tx); p != nil {
		g.stats.ByHTML++
		return p
	}
	if ref != 0 {
		return nil // it names a page we have not seen (yet): an orphan
	}
	// By time alone: the newest page whose HTML had begun to reach the
	// client when the object started (a browser finds a page's objects in
	// its HTML); an object that started earlier belongs to an older page
	// still open, such as a beacon its timer sends while the next page's
	// navigation is under way. A client that sends Referers sent this one
	// without for a page whose HTML asked so, not for one that did not;
	// only the favicon, which some browsers fetch themselves, is exempt.
	favicon := isFavicon(tx)
	if favicon {
		if p := g.faviconOf(c, tx); p != nil {
			g.stats.ByWindow++
			return p
		}
	}
	strict := c.referers > 0 && !favicon
	for i := len(c.open) - 1; i >= 0; i-- {
		p := c.open[i]
		if strict && p.htmlRead && !p.noReferrer || favicon && p.favicon || p.keyless {
			continue
		}
		if tx.Start >= p.firstByte && g.canTake(p, tx, true) {
			g.stats.ByWindow++
			return p
		}
	}
	return nil
}

// faviconOf is the page a browser asked for its favicon, by time: it does
// so once per page, after the page's load, so with several tabs loading
// at once the favicon is the page that has no favicon yet and whose
// requests ended most recently before it. nil when no page has finished;
// then the newest page without one takes it (place).
func (g *Grouper) faviconOf(c *client, tx *reconstruct.Transaction) *pv {
	var best *pv
	for i := len(c.open) - 1; i >= 0; i-- {
		p := c.open[i]
		if p.favicon || tx.Start < p.firstByte || p.end > tx.Start || best != nil && p.end <= best.end {
			continue
		}
		if g.canTake(p, tx, true) {
			best = p
		}
	}
	return best
}

// declaring is the newest open pageview of c whose HTML (or stylesheets)
// names tx's URL and that can take it.
func (g *Grouper) declaring(c *client, tx *reconstruct.Transaction) *pv {
	if c == nil || tx.URL == "" {
		return nil
	}
	host, path := splitURL(tx.URL, tx.Host)
	k := g.urlHash(host, path)
	for i := len(c.open) - 1; i >= 0; i-- {
		if p := c.open[i]; p.declared[k] != 0 && g.canTake(p, tx, false) {
			return p
		}
	}
	return nil
}

// embedded reports whether an HTML response is an object of an open page
// of c rather than a navigation: the page embeds it (an iframe, which the
// load waits for), or names it as a prefetch and the request was not a
// browser navigation (whose Accept leads with text/html).
func (g *Grouper) embedded(c *client, tx *reconstruct.Transaction) bool {
	if c == nil || strings.EqualFold(tx.SecFetchDest, "document") {
		return false
	}
	p := g.declaring(c, tx)
	if p == nil {
		return false
	}
	host, path := splitURL(tx.URL, tx.Host)
	if p.declared[g.urlHash(host, path)] == embeds.Blocking {
		return true
	}
	return !isHTML(tx.Accept)
}

// loadContinues stretches Window for a page still loading when it ends:
// an object that starts within this long of the page's load so far is part
// of it or follows it (the favicon and beacons a browser sends at the load
// event), however long an overloaded server made the load. A long download
// the load does not wait for (a video, an XHR) does not stretch it. A page
// stretches so at most maxWindowStretch times Window.
const (
	loadContinues    = time.Second
	maxWindowStretch = 6
)

func (g *Grouper) canTake(p *pv, tx *reconstruct.Transaction, window bool) bool {
	earliest := tx.Start
	if !window && tx.RequestFirst != 0 {
		// An object named by its Referer or the page's HTML may sit on a
		// connection the browser opened before the page started (a spare
		// socket used within the preconnect threshold); what must follow
		// the page is the request.
		earliest = tx.RequestFirst - tx.RTTClient/2
	}
	if p.closed || earliest < p.rec.Start || tx.Start > p.end+int64(g.cfg.IdleGap) {
		return false
	}
	if window && tx.Start > p.rec.Start+int64(g.cfg.Window) &&
		(tx.Start > p.loadSoFar+int64(loadContinues) || tx.Start > p.rec.Start+int64(maxWindowStretch)*int64(g.cfg.Window)) {
		return false
	}
	if len(p.members) >= g.cfg.MaxObjects {
		g.stats.ObjectOverflow++
		return false
	}
	return true
}

func (g *Grouper) client(key clientKey) *client {
	c := g.clients[key]
	if c == nil {
		g.nextCID++
		c = &client{id: g.nextCID, key: key}
		g.clients[key] = c
	}
	return c
}

func (g *Grouper) dropClientIfIdle(c *client) {
	if len(c.open) == 0 && c.orphans == 0 && len(c.redirs) == 0 && g.clients[c.key] == c {
		delete(g.clients, c.key)
	}
}

// awaitRedirect holds a redirected navigation until the client requests
// its Location; a redirect to a redirect joins the same chain.
func (g *Grouper) awaitRedirect(c *client, tx *reconstruct.Transaction) {
	host, path := splitURL(tx.URL, tx.Host)
	self := g.urlHash(host, path)
	lhost, lpath := resolveLocation(tx.Location, host, path)
	target := g.urlHash(lhost, lpath)
	for _, r := range c.redirs {
		if !r.done && r.target == self {
			r.txs = append(r.txs, tx)
			r.target = target
			r.expires = tx.Start + int64(g.cfg.OrphanWait)
			return
		}
	}
	if g.norphans >= g.cfg.MaxOrphans {
		g.stats.OrphanOverflow++
		g.standAlone(tx)
		return
	}
	r := &redirect{txs: []*reconstruct.Transaction{tx}, c: c, target: target, expires: tx.Start + int64(g.cfg.OrphanWait)}
	c.redirs = append(c.redirs, r)
	g.redirQ = append(g.redirQ, r)
	g.norphans++
}

// claimRedirect takes c's redirect chain that led to url, if any.
func (g *Grouper) claimRedirect(c *client, tx *reconstruct.Transaction) []*reconstruct.Transaction {
	host, path := splitURL(tx.URL, tx.Host)
	k := g.urlHash(host, path)
	for i, r := range c.redirs {
		if !r.done && r.target == k && r.txs[len(r.txs)-1].Start <= tx.Start {
			r.done = true
			g.norphans--
			c.redirs = slices.Delete(c.redirs, i, i+1)
			return r.txs
		}
	}
	return nil
}

func (g *Grouper) expireRedirect(r *redirect) {
	if r.done {
		return
	}
	r.done = true
	g.norphans--
	if i := slices.Index(r.c.redirs, r); i >= 0 {
		r.c.redirs = slices.Delete(r.c.redirs, i, i+1)
	}
	g.dropClientIfIdle(r.c)
	for _, tx := range r.txs {
		g.standAlone(tx)
	}
}

func (g *Grouper) expireOrphan(o *orphan) {
	if o.done {
		return
	}
	o.done = true
	g.norphans--
	o.c.orphans--
	if list := g.orphans[o.key]; len(list) > 0 {
		// Orphans expire in the order they came, so o is almost always
		// the list's head: a service client's thousands of Referer-less
		// requests must not each scan all the others (that was O(n) per
		// request, 48 us at 1,000 requests a second).
		if list[0] == o {
			list[0] = nil
			list = list[1:]
		} else if i := slices.Index(list, o); i >= 0 {
			list = slices.Delete(list, i, i+1)
		}
		if len(list) == 0 {
			delete(g.orphans, o.key)
		} else {
			g.orphans[o.key] = list
		}
	}
	g.dropClientIfIdle(o.c)
	g.standAlone(o.h.tx)
}

// open starts a pageview at container h (after the redirects that led to
// it) and adopts the orphans it would have taken.
func (g *Grouper) open(c *client, h heldTx) *pv {
	tx := h.tx
	for len(c.open) >= g.cfg.MaxPerClient {
		g.stats.PerClientOverflow++
		c.open[0].rec.Flags |= reconstruct.FlagEvicted
		g.close(c.open[0])
	}
	if g.nopen >= g.cfg.MaxOpen {
		g.stats.OpenOverflow++
		g.lru.next.rec.Flags |= reconstruct.FlagEvicted
		g.close(g.lru.next)
	}
	g.stats.Pageviews++
	p := &pv{c: c, end: tx.End, firstByte: tx.Start + tx.Tconn + tx.Ttls + tx.Trequest + tx.Tserver, rec: Pageview{
		ID: ID(tx.ID), Interface: tx.Interface, Client: tx.Client, UserAgent: tx.UserAgent,
		Class: tx.Class, Priority: tx.Priority, Server: tx.Server, Host: tx.Host, URL: tx.URL,
		Status: tx.Status, ContainerID: tx.ID, Start: tx.Start,
	}}
	if h.refs != nil {
		p.declared, p.htmlRead, p.noReferrer = h.refs.urls, h.refs.html, h.refs.noReferrer
	}
	p.keyless = isKeyless(tx) // it adopts nothing a parsed page might take
	if r := g.claimRedirect(c, tx); r != nil {
		p.redirs = r
		p.rec.Start = min(p.rec.Start, r[0].Start)
		g.stats.Redirects += uint64(len(r))
	}
	i := len(c.open)
	for i > 0 && c.open[i-1].rec.Start > p.rec.Start {
		i--
	}
	c.open = slices.Insert(c.open, i, p)
	p.prev, p.next = g.lru.prev, &g.lru
	g.lru.prev.next = p
	g.lru.prev = p
	g.nopen++
	for _, r := range p.redirs {
		g.join(p, r)
		g.forward(r, p.rec.ID)
	}
	g.attach(p, h)
	if p.keyless {
		return p
	}

	adopt := func(k refKey, window bool) {
		list := g.orphans[k]
		if len(list) == 0 {
			return
		}
		kept := list[:0]
		for _, o := range list {
			if !o.done && (g.canTake(p, o.h.tx, window) || !window && g.declares(p, o.h.tx) && g.canTake(p, o.h.tx, false)) {
				o.done = true
				g.norphans--
				c.orphans--
				g.stats.Adopted++
				g.attach(p, o.h)
				continue
			}
			if !o.done {
				kept = append(kept, o)
			}
		}
		if len(kept) == 0 {
			delete(g.orphans, k)
		} else {
			g.orphans[k] = kept
		}
	}
	if tx.URL != "" {
		host, path := splitURL(tx.URL, tx.Host)
		adopt(refKey{c.id, g.urlHash(host, path)}, false)
	}
	adopt(refKey{c.id, 0}, p.declared == nil)
	return p
}

// declares reports whether p's HTML names tx.
func (g *Grouper) declares(p *pv, tx *reconstruct.Transaction) bool {
	if p.declared == nil || tx.URL == "" {
		return false
	}
	host, path := splitURL(tx.URL, tx.Host)
	return p.declared[g.urlHash(host, path)] != 0
}

// attach makes h a member of p: forwarded now when its place in the load is
// certain (the container, an object the HTML names as blocking), else when
// p closes. A stylesheet's references join the page's declared set.
func (g *Grouper) attach(p *pv, h heldTx) {
	tx := h.tx
	p.members = append(p.members, tx)
	g.join(p, tx)
	if h.refs != nil && len(p.members) > 1 {
		if p.declared == nil {
			p.declared = map[uint64]embeds.Kind{}
		}
		for k, kind := range h.refs.urls {
			if len(p.declared) >= maxDeclared {
				break
			}
			if p.declared[k] != embeds.Blocking {
				p.declared[k] = kind
			}
		}
	}
	if len(p.members) == 1 || g.blocking(p, tx) {
		g.forward(tx, p.rec.ID)
		return
	}
	p.undecided = append(p.undecided, tx)
}

// join does the bookkeeping of a new member: the pageview's extent, the
// URLs Referers may name, the connections whose records it waits for.
func (g *Grouper) join(p *pv, tx *reconstruct.Transaction) {
	g.nmember++
	p.end = max(p.end, tx.End)
	if p.loadSoFar == 0 || g.blocking(p, tx) || g.inLoad(p, tx, p.loadSoFar) {
		p.loadSoFar = max(p.loadSoFar, tx.End)
	}
	if isFavicon(tx) && !g.declares(p, tx) {
		p.favicon = true
	}
	if len(p.urlKeys) < maxURLKeys && tx.URL != "" {
		host, path := splitURL(tx.URL, tx.Host)
		k := g.urlHash(host, path)
		p.urlKeys = append(p.urlKeys, k)
		g.refs[refKey{p.c.id, k}] = p
	}
	if p.next != &g.lru { // most recently joined last
		p.prev.next, p.next.prev = p.next, p.prev
		p.prev, p.next = g.lru.prev, &g.lru
		g.lru.prev.next = p
		g.lru.prev = p
	}
	if tx.Index == 0 && tx.ConnectionID != "" {
		// The pageview opened this connection: its SYN losses are ours.
		if l, ok := g.connInfo[tx.ConnectionID]; ok {
			delete(g.connInfo, tx.ConnectionID)
			p.rec.SYNLosses += l.syn
			p.rec.SYNACKLosses += l.synack
		} else if g.want[tx.ConnectionID] == nil {
			g.want[tx.ConnectionID] = p
			p.missing++
		}
	}
}

// blocking reports whether p's HTML names tx as an object the load waits
// for.
func (g *Grouper) blocking(p *pv, tx *reconstruct.Transaction) bool {
	if p.declared == nil || tx.URL == "" {
		return false
	}
	host, path := splitURL(tx.URL, tx.Host)
	return p.declared[g.urlHash(host, path)] == embeds.Blocking
}
