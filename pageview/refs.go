package pageview

import (
	"github.com/rtmon/rtmon/pageview/embeds"
	"github.com/rtmon/rtmon/reconstruct"
)

// pageRefs is what one HTML or CSS body references, by urlHash, and
// whether the page suppresses Referer. html: read from the body as a
// container's HTML (a replayed Declared string says whether it was).
type pageRefs struct {
	urls       map[uint64]embeds.Kind
	noReferrer bool
	html       bool
}

// readPage reads a transaction's body for the objects it references; nil
// when it names none or nothing could be read (an unknown content coding, a
// body cut before anything parsable). A body read only in part still
// counts, as an error.
func (g *Grouper) readPage(tx *reconstruct.Transaction) *pageRefs {
	host := tx.Host
	if host == "" {
		host = tx.Server.String()
	}
	h, path := splitURL(tx.URL, host)
	page, err := embeds.Extract(tx.Body, tx.ContentType, tx.ContentEncoding, "http://"+h+path)
	refs := page.Refs
	g.stats.PagesRead++
	if err != nil || tx.BodyCut {
		g.stats.PageReadErrors++
	}
	if len(refs) == 0 {
		// Nothing named (or nothing readable): no evidence either way, and
		// a page that names nothing is judged by Referer and timing.
		return nil
	}
	m := make(map[uint64]embeds.Kind, len(refs))
	for _, r := range refs {
		rh, rp := splitURL(r.URL, "")
		k := g.urlHash(rh, rp)
		if m[k] != embeds.Blocking {
			m[k] = r.Kind
		}
	}
	return &pageRefs{urls: m, noReferrer: page.NoReferrer, html: true}
}
