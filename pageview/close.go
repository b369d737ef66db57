package pageview

import (
	"slices"
	"strings"
	"time"

	"github.com/rtmon/rtmon/pageview/embeds"
	"github.com/rtmon/rtmon/reconstruct"
)

// close ends a pageview: it takes no more objects, its load end is decided
// and the members forwarded at close go out; its record follows once its
// connections' records are in.
func (g *Grouper) close(p *pv) {
	if p.closed {
		return
	}
	p.closed = true
	c := p.c
	if i := slices.Index(c.open, p); i >= 0 {
		c.open = slices.Delete(c.open, i, i+1)
	}
	g.dropClientIfIdle(c)
	for _, k := range p.urlKeys {
		rk := refKey{c.id, k}
		if g.refs[rk] == p {
			delete(g.refs, rk)
		}
	}
	p.urlKeys = nil
	p.prev.next, p.next.prev = p.next, p.prev
	p.prev, p.next = nil, nil
	g.nopen--
	g.finish(p)
	for _, tx := range p.undecided {
		g.forward(tx, p.rec.ID)
	}
	p.undecided = nil
	p.declared = nil
	p.closedAt = g.now
	if p.missing == 0 {
		g.emit(p)
		return
	}
	g.pending = append(g.pending, p)
}

func (g *Grouper) emit(p *pv) {
	p.emitted = true
	all := make([]*reconstruct.Transaction, 0, len(p.members)+len(p.redirs))
	all = append(all, p.members[0])
	all = append(all, p.redirs...)
	all = append(all, p.members[1:]...)
	p.rec.Transactions = all
	g.next.Pageview(&p.rec)
	// The record now belongs to the sink; only our own reference goes.
	g.nmember -= len(all)
	p.members, p.redirs = nil, nil
}

// shed keeps the transactions held by pageviews under MaxMembers: pending
// pageviews go out first (they only wait for SYN loss counts), then the
// least recently joined open ones close early.
func (g *Grouper) shed() {
	for g.nmember > g.cfg.MaxMembers {
		if len(g.pending) > 0 {
			p := g.pending[0]
			g.pending[0] = nil
			g.pending = g.pending[1:]
			if !p.emitted {
				g.stats.PendingOverflow++
				g.expirePending(p)
			}
			continue
		}
		if g.nopen == 0 {
			return
		}
		g.stats.MemberOverflow++
		g.lru.next.rec.Flags |= reconstruct.FlagEvicted
		g.close(g.lru.next)
	}
}

// scriptSlack and parserSlack are how long after the load seemed over an
// object the HTML does not name as blocking may start and still count, if
// it is of a kind a page waits for (image, script, style, font, frame).
// With the HTML read, such an object was inserted by a script, which does
// so as soon as it ran, within milliseconds of its own arrival. Without
// it, the page's own objects are undeclared too, and a browser finds those
// behind a blocking script only once the script ran: more slack. Beacons,
// XHR and pings get none (browsers send them after the load event), and an
// image beacon a page's script delays past the load (a 50 ms timer, say)
// starts later than the slack.
const (
	scriptSlack = int64(20 * time.Millisecond)
	parserSlack = int64(100 * time.Millisecond)
)

// finish decides the pageview's load end, flags its after-load members and
// fills its totals (see Grouper for the rules).
func (g *Grouper) finish(p *pv) {
	r := &p.rec
	cont := p.members[0]
	loadEnd := cont.End
	for _, tx := range p.redirs {
		loadEnd = max(loadEnd, tx.End)
	}
	// Objects the HTML names as blocking count whatever their timing; the
	// others are judged in Start order against the load so far.
	var rest []*reconstruct.Transaction
	for _, tx := range p.members[1:] {
		if g.blocking(p, tx) {
			loadEnd = max(loadEnd, tx.End)
		} else {
			rest = append(rest, tx)
		}
	}
	sortByStart(rest)
	inLoad := make([]*reconstruct.Transaction, 0, len(p.members)+len(p.redirs))
	inLoad = append(inLoad, cont)
	inLoad = append(inLoad, p.redirs...)
	for _, tx := range p.members[1:] {
		if g.blocking(p, tx) {
			inLoad = append(inLoad, tx)
		}
	}
	for _, tx := range rest {
		if g.inLoad(p, tx, loadEnd) {
			loadEnd = max(loadEnd, tx.End)
			inLoad = append(inLoad, tx)
			continue
		}
		tx.Flags |= reconstruct.FlagAfterLoad
		r.AfterLoad++
		g.stats.AfterLoad++
	}
	r.Redirects = len(p.redirs)
	r.Start, r.End = cont.Start, loadEnd
	if len(p.redirs) > 0 {
		r.Start = min(r.Start, p.redirs[0].Start)
	}
	ids := make([]string, 0, len(p.members)+len(p.redirs))
	for _, tx := range inLoad {
		r.Bytes += tx.ResponseBytes
		r.RetransBytes += tx.RetransBytes
		r.Flags |= tx.Flags
	}
	for _, tx := range p.members {
		ids = append(ids, tx.ConnectionID)
	}
	for _, tx := range p.redirs {
		ids = append(ids, tx.ConnectionID)
	}
	slices.Sort(ids)
	r.Connections = len(slices.Compact(ids))
	r.Objects = len(inLoad) - 1 - len(p.redirs)
	r.Total = r.End - r.Start
	r.Tconn, r.Tserver, r.Ttransfer, r.Tother = CriticalPath(inLoad, r.Start, r.End)
	r.Declared = encodeDeclared(p)
	switch {
	case p.htmlRead:
		r.Evidence = "html"
	case p.referer:
		r.Evidence = "referer"
	default:
		r.Evidence = "timing"
	}
}

// inLoad judges a member the HTML does not name as blocking, given the
// load's end so far: an undeclared favicon never counts (browsers ask for
// it after the load event); an icon, prefetch or lazy image the HTML names
// counts only if it was over within the load; an object of a kind the
// load waits for counts if it started before the load was over (see
// parserSlack); a beacon, ping, fetch or XHR only if it was over within
// the load, since the load event never waits for one. Its Start is no
// guide either: on a fresh connection it is the connection's first SYN,
// which a client may have sent for another request long before (a Go
// client's beacon took over a connection dialled 1.1 s earlier, during a
// SYN retransmission, for an object that got another one).
func (g *Grouper) inLoad(p *pv, tx *reconstruct.Transaction, loadEnd int64) bool {
	switch {
	case isFavicon(tx) && !g.declares(p, tx):
		return false
	case p.keyless:
		// Of unknown kind: taken for an object the parser found.
		return tx.Start <= loadEnd+parserSlack
	case g.declares(p, tx):
		return tx.End <= loadEnd
	case subresource(tx) && p.htmlRead:
		return tx.Start <= loadEnd+scriptSlack
	case subresource(tx):
		return tx.Start <= loadEnd+parserSlack
	}
	return tx.End <= loadEnd
}

// isFavicon: the icon browsers fetch by convention when a page declares none.
func isFavicon(tx *reconstruct.Transaction) bool {
	_, path := splitURL(tx.URL, "")
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	return path == "/favicon.ico"
}

// subresource reports whether a request is for the kind of object an HTML
// parser finds (image, script, style, font, frame), not a beacon, ping or
// XHR: by Sec-Fetch-Dest where sent, else by what the response was.
func subresource(tx *reconstruct.Transaction) bool {
	switch strings.ToLower(tx.SecFetchDest) {
	case "image", "script", "style", "font", "iframe", "frame", "video", "audio", "track", "object", "embed":
		return true
	case "":
	default:
		return false // empty (fetch, XHR, beacon), report, worker, ...
	}
	if tx.Method != "" && tx.Method != "GET" {
		return false
	}
	mt := strings.ToLower(tx.ContentType)
	if mt == "" {
		mt = strings.ToLower(tx.Accept)
	}
	for _, p := range []string{"image/", "text/css", "font/", "text/javascript", "application/javascript",
		"application/x-javascript", "application/ecmascript", "text/html"} {
		if strings.HasPrefix(mt, p) {
			return true
		}
	}
	return false
}

// maxDeclared bounds the objects one page's HTML and stylesheets may name.
const maxDeclared = 4 * embeds.MaxRefs
