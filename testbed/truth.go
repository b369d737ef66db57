package testbed

import (
	"fmt"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// PageWire is a page's truth from the client's wire: its transactions and
// its span, timed by the client capture.
//
// A page is its navigation chain (redirect hops, then the container) and
// the objects that belong to it: in load (Chromium: in Resource Timing with
// responseEnd at or before loadEventStart; Go client: what it parsed from
// the HTML) and after load (favicon, beacons, anything else the page
// requested later). Start is the Start of its first transaction, End the
// largest End of the chain and the in-load objects; after-load ones are
// outside the span.
type PageWire struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	Total int64 `json:"total_ns"`
	// Chain: redirect hops, then the container.
	Chain     []WireID `json:"chain"`
	InLoad    []WireID `json:"in_load"`
	AfterLoad []WireID `json:"after_load,omitempty"`
	// Missing lists requests the client reported that the wire does not
	// hold ("GET /path"); Incomplete ones whose response did not arrive
	// whole. A page with either in its chain or in-load objects has no
	// usable truth (Valid false); an after-load request the next
	// navigation cancelled (an image beacon) is only counted.
	Missing    []string `json:"missing,omitempty"`
	Incomplete []string `json:"incomplete,omitempty"`
	Valid      bool     `json:"valid"`
	// AfterLoadIncomplete counts after-load transactions without their
	// whole response, AfterLoadMissing after-load requests the client
	// named that the wire does not hold for this page.
	AfterLoadIncomplete int `json:"after_load_incomplete,omitempty"`
	AfterLoadMissing    int `json:"after_load_missing,omitempty"`
	// ByWindow counts after-load transactions given to the page by the
	// window rule (no word from the browser).
	ByWindow int `json:"by_window,omitempty"`
	// Abandoned: a browser's attempts at a request that got no whole
	// response on a connection that failed, and that it sent again (the
	// retry is the request's truth).
	Abandoned []WireID `json:"abandoned,omitempty"`
}

// WireID is one wire transaction of a page, with the client's own view of
// it when there is one (Own*: its clock or the browser's timing API).
type WireID struct {
	Client    string `json:"client"`
	Port      uint16 `json:"port"`
	Seq       int    `json:"seq,omitempty"` // connection with this port (reuse)
	Index     int    `json:"index"`
	Method    string `json:"method"`
	URL       string `json:"url"`
	Status    int    `json:"status"`
	Referer   bool   `json:"referer"`
	Fresh     bool   `json:"fresh"`
	Start     int64  `json:"start"`
	End       int64  `json:"end"`
	Total     int64  `json:"total_ns"`
	ReqFirst  int64  `json:"req_first"`
	ReqRetran bool   `json:"req_retrans,omitempty"`
	RespDup   bool   `json:"resp_dup,omitempty"`
	Complete  bool   `json:"complete"`
	Role      string `json:"role"`

	OwnStart   int64 `json:"own_start,omitempty"`
	OwnRequest int64 `json:"own_request,omitempty"`
	OwnEnd     int64 `json:"own_end,omitempty"`
}

func wireID(r WireRef, role string) WireID {
	c, x := r.Conn, r.Txn
	return WireID{Client: c.Client.String(), Port: c.ClientPort, Seq: c.Seq, Index: x.Index, Method: x.Method,
		URL: x.URL, Status: x.Status, Referer: x.Referer != "", Fresh: x.Fresh, Start: x.Start, End: x.End,
		Total: x.Total, ReqFirst: x.ReqFirst, ReqRetran: x.ReqRetrans, RespDup: x.RespDup, Complete: x.Complete,
		Role: role}
}

// AttachWireTruth finds every request of every page on the client's wire
// and sets each page's Wire. It returns the wire transactions no page
// claimed (none expected).
//
// Matching: a Go or pipeline client knows the local port of each request,
// so a request is the first unclaimed transaction with its method and URL
// on that port (exact). Chromium cannot say which socket it used: its
// pages are taken in the order their navigations were issued, and each
// request is the earliest unclaimed transaction of that client, not from
// another client program, with its method and URL, sent after the
// navigation was issued. The site gives every page's objects and beacons
// their own URLs, so only the favicon is shared, and that is fetched at
// the load event of the first page of a browser session. A Chromium
// transaction the browser did not name for any page goes, by the window
// rule, to the last page of that client whose navigation was issued before
// it (counted in ByWindow).
func AttachWireTruth(pages []PageTruth, w *ClientWire) []WireID {
	m := newWireMatcher(w)
	order := pagesByNavigation(pages)
	// Chains and in-load objects first, then after-load requests, so a
	// late beacon of one page never takes another page's object.
	for _, pi := range order {
		p := &pages[pi]
		p.Wire = &PageWire{}
		for k := range p.Redirects {
			m.resolve(p, &p.Redirects[k], RoleRedirect, &p.Wire.Chain)
		}
		m.resolve(p, &p.Container, RoleContainer, &p.Wire.Chain)
		for k := range p.Objects {
			m.resolve(p, &p.Objects[k], RoleObject, &p.Wire.InLoad)
		}
	}
	for _, pi := range order {
		p := &pages[pi]
		for k := range p.AfterLoad {
			m.resolve(p, &p.AfterLoad[k], RoleAfterLoad, &p.Wire.AfterLoad)
		}
	}
	rest := m.claimByWindow(pages, order)
	settlePageSpans(pages)
	return rest
}

// wireMatcher holds a client wire's transactions in the order their
// requests were sent, indexed by port and by client, and which of them a
// page has claimed.
type wireMatcher struct {
	all      []WireRef
	byPort   map[connKey][]int
	byClient map[netip.Addr][]int
	claimed  []bool
}

func newWireMatcher(w *ClientWire) *wireMatcher {
	all := w.Txns()
	sort.SliceStable(all, func(i, j int) bool { return all[i].Txn.ReqFirst < all[j].Txn.ReqFirst })
	m := &wireMatcher{all: all, byPort: map[connKey][]int{}, byClient: map[netip.Addr][]int{},
		claimed: make([]bool, len(all))}
	for i, r := range all {
		k := connKey{r.Conn.Client, r.Conn.ClientPort}
		m.byPort[k] = append(m.byPort[k], i)
		m.byClient[r.Conn.Client] = append(m.byClient[r.Conn.Client], i)
	}
	return m
}

// pagesByNavigation is the indexes of pages in the order their navigations
// were issued.
func pagesByNavigation(pages []PageTruth) []int {
	order := make([]int, len(pages))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		pa, pb := &pages[order[a]], &pages[order[b]]
		return pa.NavIssued < pb.NavIssued
	})
	return order
}

// isChromiumTxn: the transaction came from neither the Go client nor
// another testbed client program.
func isChromiumTxn(r WireRef) bool {
	ua := r.Txn.UserAgent
	return ua != GoClientUA && !strings.HasPrefix(ua, "rtmon-testbed-")
}

// objectMethod is the request method of o (GET when the client left it
// empty).
func objectMethod(o *ObjectTruth) string {
	if o.Method == "" {
		return "GET"
	}
	return o.Method
}

// find claims the transaction of p's request o (see AttachWireTruth), or
// returns -1.
func (m *wireMatcher) find(p *PageTruth, o *ObjectTruth) int {
	client, err := netip.ParseAddr(p.Client)
	if err != nil {
		return -1
	}
	method := objectMethod(o)
	var cands []int
	if p.Source == BrowserChromium {
		cands = m.byClient[client]
	} else {
		cands = m.byPort[connKey{client, uint16(o.LocalPort)}]
	}
	for _, i := range cands {
		r := m.all[i]
		if m.claimed[i] || r.Txn.Method != method || r.Txn.URL != o.URL {
			continue
		}
		if p.Source == BrowserChromium && (!isChromiumTxn(r) || r.Txn.ReqFirst < p.NavIssued || refersToOtherPage(r, p)) {
			continue
		}
		m.claimed[i] = true
		return i
	}
	return -1
}

// refersToOtherPage: r's Referer names a page of the site other than p
// (another tab's: the favicon both tabs fetch is told apart by it). A
// Referer naming a stylesheet or nothing says nothing.
func refersToOtherPage(r WireRef, p *PageTruth) bool {
	if r.Txn.Referer == "" {
		return false
	}
	u, err := url.Parse(r.Txn.Referer)
	if err != nil || pageIndexOf(u.Path) < 0 {
		return false
	}
	if u.RequestURI() == p.URL {
		return false
	}
	for _, h := range p.Redirects {
		if u.RequestURI() == h.URL {
			return false
		}
	}
	return true
}

// resolve finds p's request o on the wire and appends it to into, or
// records it as missing.
func (m *wireMatcher) resolve(p *PageTruth, o *ObjectTruth, role string, into *[]WireID) {
	i := m.find(p, o)
	if i < 0 {
		if role == RoleAfterLoad {
			// Outside the page's span: counted, the page's truth stands.
			// (Chromium names the favicon it fetched for the tab's next
			// document under the page it was loading before.)
			p.Wire.AfterLoadMissing++
			return
		}
		p.Wire.Missing = append(p.Wire.Missing, objectMethod(o)+" "+o.URL)
		return
	}
	id := wireID(m.all[i], role)
	if !id.Complete && p.Source == BrowserChromium {
		// Chromium sends a request again when the keep-alive connection
		// it used fails (a lossy link resets it): the retry is the
		// request, the first attempt abandoned.
		if j := m.retryOf(p, i); j >= 0 {
			p.Wire.Abandoned = append(p.Wire.Abandoned, id)
			i, id = j, wireID(m.all[j], role)
		}
	}
	if p.Source == BrowserGo {
		// Go's Transport resends a GET whose reused connection failed,
		// and its client reports the retry's connection: the attempt
		// before it, on another, was abandoned.
		if k := m.abandonedBefore(i); k >= 0 {
			p.Wire.Abandoned = append(p.Wire.Abandoned, wireID(m.all[k], role))
		}
	}
	setOwnTiming(&id, o)
	switch {
	case id.Complete:
	case role == RoleAfterLoad:
		p.Wire.AfterLoadIncomplete++
	default:
		p.Wire.Incomplete = append(p.Wire.Incomplete, id.Method+" "+id.URL)
	}
	*into = append(*into, id)
}

// retryOf claims the first later unclaimed Chromium transaction of p's
// client with the method and URL of transaction i that got its whole
// response, or returns -1.
func (m *wireMatcher) retryOf(p *PageTruth, i int) int {
	first := m.all[i]
	for _, j := range m.byClient[first.Conn.Client] {
		r := m.all[j]
		if m.claimed[j] || r.Txn.ReqFirst <= first.Txn.ReqFirst || !isChromiumTxn(r) ||
			r.Txn.Method != first.Txn.Method || r.Txn.URL != first.Txn.URL {
			continue
		}
		if !wireID(r, "").Complete {
			continue
		}
		m.claimed[j] = true
		return j
	}
	return -1
}

// abandonedBefore finds and claims an unclaimed incomplete attempt of the
// Go client's request i sent before it on another connection, -1 if none.
func (m *wireMatcher) abandonedBefore(i int) int {
	req := m.all[i]
	for _, j := range m.byClient[req.Conn.Client] {
		r := m.all[j]
		if m.claimed[j] || r.Conn == req.Conn || r.Txn.ReqFirst >= req.Txn.ReqFirst || r.Txn.UserAgent != GoClientUA ||
			r.Txn.Method != req.Txn.Method || r.Txn.URL != req.Txn.URL || wireID(r, "").Complete {
			continue
		}
		m.claimed[j] = true
		return j
	}
	return -1
}

// setOwnTiming gives id the client's own view of request o, if it timed it.
func setOwnTiming(id *WireID, o *ObjectTruth) {
	if o.Begin() == 0 && o.ResponseEnd == 0 {
		return
	}
	id.OwnRequest, id.OwnEnd = o.RequestStart, o.ResponseEnd
	switch {
	case id.Fresh && o.ConnectStart != 0:
		id.OwnStart = o.ConnectStart
	case !id.Fresh:
		id.OwnStart = o.RequestStart
	}
	// Else the client did not time this connection's start: Go's
	// transport may give a connection dialled for one request to
	// another, whose trace then has no ConnectStart.
}

// claimByWindow applies the window rule to the Chromium transactions
// nobody named and returns the transactions still unclaimed: each goes
// to the last page of its client navigated before it, or, when its
// Referer or beacon names a page, the last such page.
func (m *wireMatcher) claimByWindow(pages []PageTruth, order []int) []WireID {
	var rest []WireID
	for i, r := range m.all {
		if m.claimed[i] {
			continue
		}
		var best *PageTruth
		if isChromiumTxn(r) {
			// The site's beacons name their page (?p=N): one a busy
			// machine delayed past the next navigation is still its own
			// page's, not the newer one's.
			named, isBeacon := beaconPageIndex(r.Txn.URL)
			for _, pi := range order {
				p := &pages[pi]
				if p.Source == BrowserChromium && p.Client == r.Conn.Client.String() && p.NavIssued <= r.Txn.ReqFirst &&
					(!isBeacon || pageIndexOf(p.URL) == named) && !refersToOtherPage(r, p) {
					best = p
				}
			}
		}
		id := wireID(r, RoleAfterLoad)
		if best == nil {
			rest = append(rest, id)
			continue
		}
		m.claimed[i] = true
		best.Wire.AfterLoad = append(best.Wire.AfterLoad, id)
		best.Wire.ByWindow++
		if !id.Complete {
			best.Wire.AfterLoadIncomplete++
		}
	}
	return rest
}

// beaconPageIndex reads the page index a site beacon names (Page.BeaconPath:
// /b.gif?p=N or /beacon?p=N).
func beaconPageIndex(u string) (int, bool) {
	path, query, _ := strings.Cut(u, "?")
	if path != BeaconGIF && path != "/beacon" {
		return 0, false
	}
	v, err := url.ParseQuery(query)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(v.Get("p"))
	return n, err == nil
}

// pageIndexOf is N of a container path .../pN.html, -1 for another.
func pageIndexOf(u string) int {
	path, _, _ := strings.Cut(u, "?")
	base := path[strings.LastIndexByte(path, '/')+1:]
	num, ok := strings.CutPrefix(strings.TrimSuffix(base, ".html"), "p")
	if !ok || !strings.HasSuffix(base, ".html") {
		return -1
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return -1
	}
	return n
}

// settlePageSpans sets each page's validity and its span from its chain
// and in-load objects.
func settlePageSpans(pages []PageTruth) {
	for i := range pages {
		pw := pages[i].Wire
		pw.Valid = len(pw.Chain) == 1+len(pages[i].Redirects) && len(pw.Missing) == 0 && len(pw.Incomplete) == 0
		if len(pw.Chain) == 0 {
			continue
		}
		pw.Start = pw.Chain[0].Start
		for _, x := range append(append([]WireID(nil), pw.Chain...), pw.InLoad...) {
			pw.End = max(pw.End, x.End)
		}
		pw.Total = pw.End - pw.Start
	}
}

// String is a short description of a page for logs.
func (p *PageTruth) String() string {
	s := fmt.Sprintf("%s %s %s", p.Source, p.Client, p.URL)
	if p.NavURL != "" && p.NavURL != p.URL {
		s = fmt.Sprintf("%s %s %s->%s", p.Source, p.Client, p.NavURL, p.URL)
	}
	if p.Source == BrowserChromium {
		s += fmt.Sprintf(" (tab %d)", p.Tab)
	}
	return s
}
