package pageview

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct"
)

const ms = int64(time.Millisecond)

// base keeps test times far from zero, as capture times are.
const base = int64(1_700_000_000) * int64(time.Second)

type collector struct {
	t     *testing.T
	conns []*reconstruct.Connection
	txs   []*reconstruct.Transaction
	tags  map[string]tags
	pvs   []*Pageview
	byID  map[string]*Pageview
	// members as the Grouper reported them in Pageview.Transactions.
	members map[string][]string
}

// groupFile reconstructs and groups a capture file wired as the pipeline
// does it (the Grouper watching what the tracker has in flight), or blind
// to what is in flight; wrap, if set, sits between the two.
func groupFile(t *testing.T, path string, blind bool, wrap func(reconstruct.Sink) reconstruct.Sink) (*collector, *Grouper) {
	t.Helper()
	src, err := capture.OpenFiles([]string{path}, capture.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out := newCollector(t)
	g := NewGrouper(Config{}, nil, out)
	var sink reconstruct.Sink = g
	if wrap != nil {
		sink = wrap(g)
	}
	tr := reconstruct.NewTracker(reconstruct.Config{}, sink)
	if !blind {
		g.WatchInFlight(tr)
	}
	if err := tr.ReadFrom(src, nil); err != nil {
		t.Fatal(err)
	}
	g.Flush()
	return out, g
}

func newCollector(t *testing.T) *collector {
	return &collector{t: t, tags: map[string]tags{}, byID: map[string]*Pageview{}, members: map[string][]string{}}
}

func (c *collector) Connection(x *reconstruct.Connection) {
	c.conns = append(c.conns, x)
	if err := x.Invariants(); err != nil {
		c.t.Error(err)
	}
}

// tags are what the pageview stage stamped on a transaction when it
// forwarded it.
type tags struct{ PageviewID, Class, Priority string }

func (c *collector) Transaction(x *reconstruct.Transaction) {
	if x.Class == "" {
		c.t.Errorf("unclassified transaction %s", x.ID)
	}
	if _, dup := c.tags[x.ID]; dup {
		c.t.Errorf("transaction %s forwarded twice", x.ID)
	}
	c.txs = append(c.txs, x)
	c.tags[x.ID] = tags{x.PageviewID, x.Class, x.Priority}
	if err := x.Invariants(); err != nil {
		c.t.Error(err)
	}
}
func (c *collector) Pageview(p *Pageview) {
	if c.byID[p.ID] != nil {
		c.t.Errorf("pageview %s emitted twice", p.ID)
	}
	cp := *p
	cp.Transactions = nil
	c.pvs = append(c.pvs, &cp)
	c.byID[p.ID] = &cp
	for _, tx := range p.Transactions {
		if c.tags[tx.ID].PageviewID != p.ID {
			c.t.Errorf("pageview %s lists %s tagged %q", p.ID, tx.ID, c.tags[tx.ID].PageviewID)
		}
		c.members[p.ID] = append(c.members[p.ID], tx.ID)
	}
	if err := p.Invariants(); err != nil {
		c.t.Error(err)
	}
}

// pv returns the pageview id a transaction was tagged with.
func (c *collector) pv(id string) string {
	tg, ok := c.tags[id]
	if !ok {
		c.t.Fatalf("transaction %s never forwarded", id)
	}
	return tg.PageviewID
}

var (
	cl1 = netip.MustParseAddr("198.51.100.7")
	srv = netip.MustParseAddr("203.0.113.10")
	ua1 = "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0"
	ua2 = "Mozilla/5.0 (Windows NT 10.0) Chrome/142.0"
)

// txSpec builds a transaction: times in ms after base, components laid out
// from start: tconn (fresh connection only), then server, then transfer.
type txSpec struct {
	conn      string
	idx       int
	client    netip.Addr
	ua        string
	url, ct   string
	ref       string
	start     int64 // ms
	tconn     int64 // ms
	tserver   int64
	ttransfer int64
}

func mk(s txSpec) *reconstruct.Transaction {
	if !s.client.IsValid() {
		s.client = cl1
	}
	if s.ua == "" {
		s.ua = ua1
	}
	tx := &reconstruct.Transaction{
		ID: fmt.Sprintf("%s-%d", s.conn, s.idx), ConnectionID: s.conn, Index: s.idx,
		Client: s.client, ClientPort: 40000, Server: srv, ServerPort: 80,
		Start: base + s.start*ms, Tconn: s.tconn * ms, Tserver: s.tserver * ms, Ttransfer: s.ttransfer * ms,
		Method: "GET", Host: "www.example.com", URL: s.url, Status: 200, ContentType: s.ct, Referer: s.ref,
		UserAgent: s.ua, ResponseBytes: 1000, RetransBytes: 10,
	}
	tx.Total = tx.Tconn + tx.Tserver + tx.Ttransfer
	tx.End = tx.Start + tx.Total
	tx.RequestFirst = tx.Start + tx.Tconn
	tx.RequestLast = tx.RequestFirst
	tx.ResponseFirst = tx.RequestLast + tx.Tserver
	tx.ResponseLast, tx.ResponseAcked = tx.End, tx.End
	return tx
}

const page = "http://www.example.com/index.html"

func html(conn string, idx int, url string, start, tconn, tserver, ttransfer int64) *reconstruct.Transaction {
	return mk(txSpec{conn: conn, idx: idx, url: url, ct: "text/html; charset=utf-8", start: start, tconn: tconn, tserver: tserver, ttransfer: ttransfer})
}

func obj(conn string, idx int, url, ref string, start, tconn, tserver, ttransfer int64) *reconstruct.Transaction {
	return mk(txSpec{conn: conn, idx: idx, url: url, ct: "image/png", ref: ref, start: start, tconn: tconn, tserver: tserver, ttransfer: ttransfer})
}

// run feeds transactions in the given (completion) order and flushes.
func run(t *testing.T, cfg Config, txs ...*reconstruct.Transaction) (*collector, *Grouper) {
	t.Helper()
	c := newCollector(t)
	g := NewGrouper(cfg, nil, c)
	for _, tx := range txs {
		g.Transaction(tx)
	}
	g.Flush()
	if len(c.txs) != len(txs) {
		t.Fatalf("forwarded %d of %d transactions", len(c.txs), len(txs))
	}
	return c, g
}

func same(t *testing.T, c *collector, ids ...string) string {
	t.Helper()
	want := c.pv(ids[0])
	if want == "" {
		t.Fatalf("%s in no pageview", ids[0])
	}
	for _, id := range ids[1:] {
		if got := c.pv(id); got != want {
			t.Errorf("%s in pageview %q, want %q (with %s)", id, got, want, ids[0])
		}
	}
	return want
}

func TestCriticalPath(t *testing.T) {
	// Container [0,1000): connect 100, server 600, transfer 300.
	// A [900,1500) reused: server 400, transfer 200 (starts while the HTML streams).
	// B [1600,2000) fresh: connect 200, server 100, transfer 100.
	// The page names both objects: B, though it starts 100 ms after the
	// rest is over, is part of the load.
	cont := html("c1", 0, "/index.html", 0, 100, 600, 300)
	cont.Body = []byte(`<img src="/a.png"><img src="/b.png">`)
	a := obj("c1", 1, "/a.png", page, 900, 0, 400, 200)
	b := obj("c2", 0, "/b.png", page, 1600, 200, 100, 100)
	c, _ := run(t, Config{}, a, cont, b)
	id := same(t, c, cont.ID, a.ID, b.ID)
	p := c.byID[id]
	if p == nil {
		t.Fatal("no pageview record")
	}
	if p.Start != cont.Start || p.End != b.End || p.Total != 2000*ms {
		t.Errorf("start %d end %d total %d", p.Start-base, p.End-base, p.Total)
	}
	// B whole; 100 ms gap; A whole; the container up to A's start (900 ms:
	// connect 100, server 600, transfer 200 of its 300).
	if p.Tconn != 300*ms || p.Tserver != 1100*ms || p.Ttransfer != 500*ms || p.Tother != 100*ms {
		t.Errorf("components conn %d server %d transfer %d other %d", p.Tconn/ms, p.Tserver/ms, p.Ttransfer/ms, p.Tother/ms)
	}
	if p.Objects != 2 || p.Connections != 2 || p.Bytes != 3000 || p.RetransBytes != 30 || p.ContainerID != cont.ID ||
		p.URL != "/index.html" || p.Class != "default" || p.ID != ID(cont.ID) {
		t.Errorf("pageview fields %+v", p)
	}
	if got := c.members[id]; len(got) != 3 || got[0] != cont.ID {
		t.Errorf("members %v", got)
	}
}

func TestCriticalPathProperties(t *testing.T) {
	// Random overlapping layouts: components always add up and are >= 0.
	for seed := int64(1); seed < 200; seed++ {
		n := int(seed%9) + 1
		var txs []*reconstruct.Transaction
		x := seed
		next := func(m int64) int64 { x = (x*6364136223846793005 + 1442695040888963407) & (1<<62 - 1); return x % m }
		for i := range n {
			s := int64(0)
			if i > 0 {
				s = next(3000)
			}
			txs = append(txs, obj(fmt.Sprint("c", i), 0, "/x", "", s, next(300), next(500), next(800)))
		}
		start, end := txs[0].Start, txs[0].End
		for _, tx := range txs {
			end = max(end, tx.End)
		}
		a, b, c, d := CriticalPath(txs, start, end)
		if a+b+c+d != end-start || a < 0 || b < 0 || c < 0 || d < 0 {
			t.Fatalf("seed %d: %d+%d+%d+%d != %d", seed, a, b, c, d, end-start)
		}
	}
}

func TestRefererAndWindow(t *testing.T) {
	cont := html("c1", 0, "/index.html", 0, 100, 200, 100)
	withRef := obj("c2", 0, "/a.png", page, 420, 100, 10, 10)
	relRef := obj("c2", 1, "/b.png", "/index.html", 700, 0, 10, 10) // relative Referer
	caseRef := obj("c2", 2, "/c.png", "HTTP://WWW.Example.COM/index.html#top", 800, 0, 10, 10)
	noRef := obj("c1", 1, "/d.png", "", 900, 0, 10, 10)
	// Beyond the 10 s window, though within the idle gap of a long object.
	long := obj("c3", 0, "/e.mp4", page, 1000, 100, 10, 9000)
	long.ContentType = "video/mp4" // the load event does not wait for it
	lateNoRef := obj("c1", 2, "/f.png", "", 10500, 0, 10, 10)
	c, g := run(t, Config{}, cont, withRef, relRef, caseRef, noRef, long, lateNoRef)
	same(t, c, cont.ID, withRef.ID, relRef.ID, caseRef.ID, noRef.ID, long.ID)
	if c.pv(lateNoRef.ID) != "" {
		t.Errorf("object outside the window joined pageview %s", c.pv(lateNoRef.ID))
	}
	s := g.Stats()
	if s.ByReferer != 4 || s.ByWindow != 1 || s.StandAlone != 1 || s.Pageviews != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestNATUserAgents(t *testing.T) {
	// Two browsers behind one address load the same page at the same time.
	c1 := mk(txSpec{conn: "a1", url: "/index.html", ct: "text/html", start: 0, tconn: 50, tserver: 100, ttransfer: 50})
	c2 := mk(txSpec{conn: "b1", url: "/index.html", ct: "text/html", ua: ua2, start: 10, tconn: 50, tserver: 300, ttransfer: 50})
	o1 := mk(txSpec{conn: "a1", idx: 1, url: "/x.png", ct: "image/png", ref: page, start: 300, tserver: 10, ttransfer: 10})
	o2 := mk(txSpec{conn: "b1", idx: 1, url: "/x.png", ct: "image/png", ref: page, ua: ua2, start: 450, tserver: 10, ttransfer: 10})
	o2b := mk(txSpec{conn: "b2", url: "/y.png", ct: "image/png", ua: ua2, start: 460, tconn: 50, tserver: 10, ttransfer: 10})
	c, _ := run(t, Config{}, c1, o1, c2, o2, o2b)
	a := same(t, c, c1.ID, o1.ID)
	b := same(t, c, c2.ID, o2.ID, o2b.ID)
	if a == b {
		t.Error("the two browsers share a pageview")
	}
	if p := c.byID[b]; p.UserAgent != ua2 || p.Objects != 2 || p.Connections != 2 {
		t.Errorf("pageview b %+v", p)
	}
}

func TestPipelinedContainers(t *testing.T) {
	// Two pages requested back to back on one connection; the first page's
	// objects keep arriving after the second page started. Without a
	// Referer (or HTML naming them) an object belongs to the client's newest
	// page, whichever connection carries it: a browser moves its keep-alive
	// connections on to the page it is loading now.
	p1 := html("c1", 0, "/one.html", 0, 100, 100, 100)
	p2 := html("c1", 1, "/two.html", 310, 0, 100, 100)
	o1 := obj("c2", 0, "/1.png", "http://www.example.com/one.html", 380, 100, 10, 10)
	o2 := obj("c3", 0, "/2.png", "http://www.example.com/two.html", 530, 100, 10, 10)
	o3 := obj("c4", 0, "/3.png", "", 700, 100, 10, 10) // no Referer, new connection: the newest page
	o4 := obj("c2", 1, "/4.png", "", 710, 0, 10, 10)   // no Referer, on page one's connection: still the newest
	c, _ := run(t, Config{}, p1, p2, o1, o2, o3, o4)
	a := same(t, c, p1.ID, o1.ID)
	b := same(t, c, p2.ID, o2.ID, o3.ID, o4.ID)
	if a == b {
		t.Fatal("pipelined containers share a pageview")
	}
	if c.byID[a].Total != o1.End-p1.Start || c.byID[b].Start != p2.Start {
		t.Errorf("a %+v\nb %+v", c.byID[a], c.byID[b])
	}
	if c.byID[a].Connections != 2 || c.byID[b].Connections != 4 {
		t.Errorf("connections %d %d", c.byID[a].Connections, c.byID[b].Connections)
	}
}

func TestObjectBeforeContainer(t *testing.T) {
	// The container streams for 8 s; its objects complete long before it.
	cont := html("c1", 0, "/slow.html", 0, 100, 100, 8000)
	o := obj("c2", 0, "/a.png", "http://www.example.com/slow.html", 500, 100, 10, 10)
	nr := obj("c2", 1, "/b.png", "", 800, 0, 10, 10)
	tick := obj("z", 0, "/tick.png", "", 4000, 0, 0, 0) // another client's traffic advances time
	tick.Client = netip.MustParseAddr("198.51.100.99")
	c, g := run(t, Config{}, o, nr, tick, cont)
	same(t, c, cont.ID, o.ID, nr.ID)
	if s := g.Stats(); s.Adopted != 2 {
		t.Errorf("stats %+v", s)
	}
	if p := c.byID[c.pv(cont.ID)]; p.Start != cont.Start || p.End != cont.End {
		t.Errorf("pageview %+v", p)
	}
	// Within Settle, no adoption is needed: the heap orders them.
	c, g = run(t, Config{}, obj("c2", 0, "/a.png", "http://www.example.com/slow.html", 500, 100, 10, 10),
		html("c1", 0, "/slow.html", 0, 100, 100, 1000))
	same(t, c, "c1-0", "c2-0")
	if s := g.Stats(); s.Adopted != 0 || s.ByReferer != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestIdleGapClose(t *testing.T) {
	cont := html("c1", 0, "/index.html", 0, 100, 100, 100)
	o1 := obj("c1", 1, "/a.png", page, 400, 0, 10, 10)
	// Starts 6 s after the pageview's last End: past the 5 s idle gap.
	o2 := obj("c1", 2, "/b.png", page, 6500, 0, 10, 10)
	c := newCollector(t)
	g := NewGrouper(Config{}, nil, c)
	g.Transaction(cont)
	g.Transaction(o1)
	if len(c.pvs) != 0 {
		t.Fatal("pageview emitted before it went idle")
	}
	g.Transaction(o2)
	g.Connection(&reconstruct.Connection{ID: "c1", Client: cl1, LastSeen: o1.End})
	// o2 is not processed yet (it waits for Settle), but packet time is past
	// the idle gap once it is: feed a later record to move time on.
	g.Transaction(obj("z", 0, "/z.png", "", 9000, 0, 0, 0))
	if len(c.pvs) != 1 || c.pvs[0].Objects != 1 {
		t.Fatalf("pageviews %d", len(c.pvs))
	}
	g.Flush()
	same(t, c, cont.ID, o1.ID)
	if c.pv(o2.ID) != "" {
		t.Error("object after the idle gap joined the pageview")
	}
}

func TestNewContainerCloses(t *testing.T) {
	p1 := html("c1", 0, "/one.html", 0, 100, 100, 100)
	p2 := html("c1", 1, "/two.html", 2000, 0, 100, 100)
	o := obj("c2", 0, "/x.png", "", 2300, 100, 10, 10)
	late1 := obj("c3", 0, "/y.png", "http://www.example.com/one.html", 2400, 100, 10, 10)
	c, _ := run(t, Config{}, p1, p2, o, late1)
	same(t, c, p2.ID, o.ID)
	// A Referer still names the older page.
	same(t, c, p1.ID, late1.ID)
	if len(c.pvs) != 2 {
		t.Errorf("%d pageviews", len(c.pvs))
	}
}

func TestOrphanStandAlone(t *testing.T) {
	o := obj("c1", 0, "/a.png", "http://elsewhere.example/page.html", 0, 100, 10, 10)
	n := obj("c2", 0, "/api/x.json", "", 100, 100, 10, 10)
	n.ContentType = "application/json"
	c, g := run(t, Config{}, o, n)
	if c.pv(o.ID) != "" || c.pv(n.ID) != "" || len(c.pvs) != 0 {
		t.Error("orphans joined a pageview")
	}
	if s := g.Stats(); s.StandAlone != 2 || s.Orphans != 0 {
		t.Errorf("stats %+v", s)
	}
	if c.tags[o.ID].Class != "default" {
		t.Errorf("class %q", c.tags[o.ID].Class)
	}
}

func TestConnectionLosses(t *testing.T) {
	cont := html("c1", 0, "/index.html", 0, 3100, 100, 100)
	o := obj("c2", 0, "/a.png", page, 3400, 100, 10, 10)
	reused := obj("c1", 1, "/b.png", page, 3500, 0, 10, 10)
	c := newCollector(t)
	g := NewGrouper(Config{}, nil, c)
	// c2 closes (and is reported) before its transaction is processed.
	g.Transaction(cont)
	g.Transaction(o)
	g.Connection(&reconstruct.Connection{ID: "c2", Client: cl1, SYNACKLosses: 1, LastSeen: o.End})
	g.Transaction(reused)
	g.Transaction(obj("z", 0, "/z.png", "", 12000, 0, 0, 0)) // time passes: the pageview closes
	if len(c.pvs) != 0 {
		t.Fatal("pageview emitted before its connection records")
	}
	g.Connection(&reconstruct.Connection{ID: "c1", Client: cl1, SYNLosses: 2, LastSeen: base + 12000*ms})
	if len(c.pvs) != 1 {
		t.Fatal("pageview not emitted once its connections were in")
	}
	p := c.pvs[0]
	if p.SYNLosses != 2 || p.SYNACKLosses != 1 || p.Flags&reconstruct.FlagIncomplete != 0 {
		t.Errorf("losses %d %d flags %v", p.SYNLosses, p.SYNACKLosses, p.Flags)
	}
	if len(c.conns) != 2 || c.conns[0].Class != "default" {
		t.Errorf("connections %d", len(c.conns))
	}
	g.Flush()

	// Without its connection record the pageview still goes out, flagged.
	c, g = run(t, Config{ConnWait: time.Second}, html("c9", 0, "/index.html", 0, 100, 100, 100))
	if len(c.pvs) != 1 || c.pvs[0].Flags&reconstruct.FlagIncomplete == 0 || g.Stats().MissingConnections != 1 {
		t.Errorf("pageviews %d", len(c.pvs))
	}
}

func TestBounds(t *testing.T) {
	var txs []*reconstruct.Transaction
	for i := range 50 {
		cl := netip.AddrFrom4([4]byte{198, 51, 100, byte(i + 1)})
		cont := mk(txSpec{conn: fmt.Sprint("p", i), client: cl, url: "/index.html", ct: "text/html", start: int64(i) * 10, tconn: 50, tserver: 50, ttransfer: 50})
		o := mk(txSpec{conn: fmt.Sprint("o", i), client: cl, url: "/x.png", ct: "image/png", ref: page, start: int64(i)*10 + 200, tconn: 50, tserver: 5, ttransfer: 5})
		txs = append(txs, o, cont) // objects complete first
	}
	c, g := run(t, Config{MaxHeld: 4, MaxOpen: 5, MaxOrphans: 3, MaxPending: 2, MaxObjects: 2}, txs...)
	s := g.Stats()
	if s.HeldOverflow == 0 || s.OrphanOverflow == 0 || s.Transactions != 100 || s.Held != 0 || s.Open != 0 || s.Pending != 0 {
		t.Errorf("stats %+v", s)
	}
	if len(c.pvs) != 50 {
		t.Errorf("%d pageviews", len(c.pvs))
	}
	// Transactions held by pageviews altogether.
	c, g = run(t, Config{MaxMembers: 5}, txs...)
	if s := g.Stats(); s.MemberOverflow == 0 || len(c.pvs) != 50 {
		t.Errorf("stats %+v, %d pageviews", s, len(c.pvs))
	}
	// Per-client bound: a client opening page after page.
	txs = txs[:0]
	for i := range 20 {
		txs = append(txs, html("c", i, fmt.Sprintf("/p%d.html", i), int64(i)*100, 0, 10, 10))
	}
	_, g = run(t, Config{MaxPerClient: 3}, txs...)
	if s := g.Stats(); s.PerClientOverflow != 17 || s.Pageviews != 20 {
		t.Errorf("stats %+v", s)
	}
}

func TestIsContainer(t *testing.T) {
	for _, tc := range []struct {
		ct, accept, url string
		want            bool
	}{
		{"text/html; charset=utf-8", "", "/x.png", true},
		{"application/xhtml+xml", "", "/", true},
		{"TEXT/HTML", "", "/", true},
		{"image/png", "text/html", "/", false},
		{"", "text/html,application/xhtml+xml;q=0.9", "/logo", true},
		{"", "image/avif,image/webp,*/*", "/logo", false},
		{"", "*/*", "/page.php?id=1", true},
		{"", "", "/dir/", true},
		{"", "", "/about", true},
		{"", "", "/a.HTM", true},
		{"", "", "/x.aspx", true},
		{"", "", "/app.js", false},
		{"", "", "http://h.example/p.jsp", true},
		{"", "", "http://h.example", true},
		{"", "", "", false},
	} {
		tx := &reconstruct.Transaction{ContentType: tc.ct, Accept: tc.accept, URL: tc.url, Method: "GET", Status: 200}
		if got := IsContainer(tx); got != tc.want {
			t.Errorf("%+v: got %v", tc, got)
		}
	}
	// Beacons and API calls answered without content are no pages.
	for _, tx := range []*reconstruct.Transaction{
		{Method: "POST", URL: "/beacon", Status: 204},
		{Method: "GET", URL: "/track", Status: 204},
		{Method: "PUT", URL: "/api/items/7", Status: 200},
	} {
		if IsContainer(tx) {
			t.Errorf("%s %s %d: a container", tx.Method, tx.URL, tx.Status)
		}
	}
	if !IsContainer(&reconstruct.Transaction{Method: "POST", URL: "/login", Status: 200, ContentType: "text/html"}) {
		t.Error("a form POST answered with HTML is a page")
	}
}

func TestStableIDs(t *testing.T) {
	mkAll := func() []*reconstruct.Transaction {
		return []*reconstruct.Transaction{html("c1", 0, "/index.html", 0, 100, 100, 100), obj("c1", 1, "/a.png", page, 400, 0, 10, 10)}
	}
	a, _ := run(t, Config{}, mkAll()...)
	b, _ := run(t, Config{}, mkAll()...)
	if a.pvs[0].ID != b.pvs[0].ID || a.pvs[0].ID != ID("c1-0") || len(a.pvs[0].ID) != 16 {
		t.Errorf("ids %s %s", a.pvs[0].ID, b.pvs[0].ID)
	}
}

// A browser's spare connection opened just before the page (its SYN earlier
// than the container's request) and then used, within the preconnect
// threshold, for a stylesheet: the request follows the page, so the object
// joins it by Referer; the pageview still starts at its container.
func TestObjectOnEarlierConnection(t *testing.T) {
	cont := html("c1", 0, "/index.html", 100, 0, 200, 100)
	early := obj("c2", 0, "/s.css", page, 90, 250, 10, 10) // SYN at 90 ms, request at 340 ms
	c, _ := run(t, Config{}, cont, early)
	id := same(t, c, cont.ID, early.ID)
	if p := c.byID[id]; p.Start != cont.Start || p.End != cont.End || p.Objects != 1 {
		t.Errorf("pageview %d..%d with %d objects, want %d..%d with 1", p.Start, p.End, p.Objects, cont.Start, cont.End)
	}
	// Without a Referer the same object is not taken: nothing ties it to a
	// page that started after it.
	anon := obj("c2", 0, "/s.css", "", 90, 250, 10, 10)
	c, _ = run(t, Config{}, cont, anon)
	if c.pv(anon.ID) != "" {
		t.Error("an object that started before the page joined it without a Referer")
	}
}

func TestConfigSplitSharesBounds(t *testing.T) {
	got := Config{MaxHeld: 6400}.Split(64)
	if got.MaxHeld != 100 || got.MaxOpen != DefaultMaxOpen/64 || got.MaxConnCache != DefaultMaxConnCache/64 {
		t.Errorf("Split(64): held %d, open %d, connection cache %d", got.MaxHeld, got.MaxOpen, got.MaxConnCache)
	}
	if got.MaxPerClient != DefaultMaxPerClient || got.MaxObjects != DefaultMaxObjects {
		t.Errorf("Split changed per-client bounds: %d, %d", got.MaxPerClient, got.MaxObjects)
	}
}
