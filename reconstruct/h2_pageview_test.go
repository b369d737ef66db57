package reconstruct_test

import (
	"crypto/tls"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/reconstruct/tlsdecrypt"
	"github.com/rtmon/rtmon/synth"
)

// pvCollector keeps what the pageview stage forwards.
type pvCollector struct {
	conns []*reconstruct.Connection
	txs   []*reconstruct.Transaction
	pvs   []*pageview.Pageview
	// members: each pageview's transaction ids, as it listed them.
	members map[string][]string
}

func (c *pvCollector) Connection(x *reconstruct.Connection)   { c.conns = append(c.conns, x) }
func (c *pvCollector) Transaction(x *reconstruct.Transaction) { c.txs = append(c.txs, x) }
func (c *pvCollector) Pageview(p *pageview.Pageview) {
	cp := *p
	cp.Transactions = nil
	c.pvs = append(c.pvs, &cp)
	for _, tx := range p.Transactions {
		c.members[p.ID] = append(c.members[p.ID], tx.ID)
	}
}

// groupScripted reconstructs a scripted capture and groups it into
// pageviews, wired as the pipeline does (the Grouper watching what the
// tracker has in flight).
func groupScripted(t *testing.T, cfg reconstruct.Config, script func(w *synth.Writer)) (*pvCollector, pageview.Stats) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scripted.pcap")
	if err := synth.WriteFile(path, defaultOpts(), func(w *synth.Writer) error { script(w); return nil }); err != nil {
		t.Fatal(err)
	}
	src, err := capture.OpenFiles([]string{path}, capture.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out := &pvCollector{members: map[string][]string{}}
	g := pageview.NewGrouper(pageview.Config{}, nil, out)
	tr := reconstruct.NewTracker(cfg, g)
	g.WatchInFlight(tr)
	if err := tr.ReadFrom(src, nil); err != nil {
		t.Fatal(err)
	}
	g.Flush()
	if st := tr.Stats(); st.MemoryInUse != 0 || st.BodiesCut != 0 {
		t.Errorf("tracker: memory %d, %d bodies cut", st.MemoryInUse, st.BodiesCut)
	}
	return out, g.Stats()
}

// A page and its five objects (a stylesheet, a script, two images the
// HTML names and one the stylesheet names), fetched over one decrypted
// HTTP/2 connection as multiplexed streams, make one pageview holding them
// all: by Referer when the browser sends them (after a redirect, which
// joins by its Location), by the page's HTML and CSS bodies (the HTML
// gzip-coded, as on the wire) when it sends none. Without the fields
// and bodies HTTP/2 streams did not carry, the objects joined by time
// window at best.
func TestDecryptedHTTP2Pageview(t *testing.T) {
	for _, tc := range []struct {
		name      string
		noReferer bool
		gz        bool
	}{{"referer", false, false}, {"html", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			handler, _ := h2Site(tc.gz, 1000)
			kl := tlsdecrypt.NewKeyLog(tlsdecrypt.KeyLogOptions{})
			waves := h2PageWaves("/index.html", tc.noReferer)
			redirects := 0
			if !tc.noReferer {
				waves = append([][]h2Fetch{{{path: "/old.html", header: []string{"Accept", "text/html", "Sec-Fetch-Dest", "document"}}}}, waves...)
				redirects = 1
			}
			writes := recordH2Waves(t, tls.VersionTLS13, kl, handler, waves...)
			out, st := groupScripted(t, reconstruct.Config{KeyLog: kl}, scriptH2(writes))
			checkH2Pageview(t, out, redirects)
			objects := uint64(5)
			if tc.noReferer && (st.ByHTML != objects || st.ByReferer != 0) ||
				!tc.noReferer && st.ByReferer != objects || st.ByWindow != 0 || st.PageReadErrors != 0 {
				t.Errorf("attached by referer %d, html %d, window %d; page read errors %d", st.ByReferer, st.ByHTML,
					st.ByWindow, st.PageReadErrors)
			}
		})
	}
}

func checkH2Pageview(t *testing.T, out *pvCollector, redirects int) {
	t.Helper()
	if len(out.conns) != 1 || out.conns[0].Flags&reconstruct.FlagHTTP2 == 0 {
		t.Fatalf("%d connections", len(out.conns))
	}
	if len(out.pvs) != 1 {
		t.Fatalf("%d pageviews, want 1", len(out.pvs))
	}
	p := out.pvs[0]
	if len(out.txs) != 6+redirects {
		t.Fatalf("%d transactions, want %d", len(out.txs), 6+redirects)
	}
	var ids []string
	for _, tx := range out.txs {
		ids = append(ids, tx.ID)
		if tx.PageviewID != p.ID || tx.Flags&reconstruct.FlagHTTP2 == 0 {
			t.Errorf("%s %s: pageview %q, flags %v", tx.ID, tx.URL, tx.PageviewID, tx.Flags)
		}
		if strings.HasPrefix(tx.URL, "/index.html") && tx.ID != p.ContainerID {
			t.Errorf("container %s, page %s", p.ContainerID, tx.ID)
		}
	}
	got := slices.Clone(out.members[p.ID])
	slices.Sort(got)
	slices.Sort(ids)
	if !slices.Equal(got, ids) || p.Objects != 5 || p.Redirects != redirects || p.Connections != 1 {
		t.Errorf("pageview %s lists %v of %v; %d objects, %d redirects, %d connections, evidence %q", p.URL, got, ids,
			p.Objects, p.Redirects, p.Connections, p.Evidence)
	}
}
