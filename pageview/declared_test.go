package pageview

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rtmon/rtmon/pageview/embeds"
	"github.com/rtmon/rtmon/reconstruct"
)

// What a container's HTML declared survives the pageview record's
// Declared string: a replay of the container with it (no body) groups as
// reading the body did.
func TestDeclaredReplayGroupsAsBody(t *testing.T) {
	body := `<html><meta name="referrer" content="no-referrer"><link rel="icon" href="/i.png">` +
		`<script src="/a.js"></script><img src="/b.png" loading="lazy"><img src="/c.png"></html>`
	txs := func() []*reconstruct.Transaction {
		c := html("c1", 0, "/index.html", 0, 10, 20, 10)
		c.Body = []byte(body)
		// Declared objects long after the container, without Referer: only
		// the HTML places them in the load.
		return []*reconstruct.Transaction{c, obj("c2", 0, "/a.js", "", 600, 10, 20, 10),
			obj("c2", 1, "/c.png", "", 700, 0, 20, 10), obj("c2", 2, "/x.png", "", 1200, 0, 20, 10)}
	}
	live, _ := run(t, Config{}, txs()...)
	if len(live.pvs) != 1 {
		t.Fatalf("%d pageviews, want 1", len(live.pvs))
	}
	want := live.pvs[0]
	if want.Declared == "" || want.Evidence != "html" || want.Objects != 2 {
		t.Fatalf("live: declared %q, evidence %s, %d objects", want.Declared, want.Evidence, want.Objects)
	}
	r := decodeDeclared(want.Declared)
	if r == nil || !r.html || !r.noReferrer || len(r.urls) != 4 {
		t.Fatalf("decoded %+v, want the HTML's 4 references, no-referrer", r)
	}

	replayed := newCollector(t)
	g := NewGrouper(Config{}, nil, replayed)
	for i, tx := range txs() {
		tx.Body = nil
		if i == 0 {
			g.Replay(tx, want.Declared)
		} else {
			g.Replay(tx, "")
		}
	}
	g.Flush()
	if len(replayed.pvs) != 1 {
		t.Fatalf("replay: %d pageviews, want 1", len(replayed.pvs))
	}
	got := replayed.pvs[0]
	if got.Objects != want.Objects || got.AfterLoad != want.AfterLoad || got.End != want.End ||
		got.Evidence != want.Evidence || got.Declared != want.Declared {
		t.Errorf("replay: %d objects, %d after load, end %d, evidence %s, declared %q; live: %d, %d, %d, %s, %q",
			got.Objects, got.AfterLoad, got.End, got.Evidence, got.Declared,
			want.Objects, want.AfterLoad, want.End, want.Evidence, want.Declared)
	}
}

// A hostile page's thousands of references are cut to MaxDeclaredKeys,
// blocking ones kept first, within MaxDeclaredLen; anything not a
// Declared string decodes to nothing.
func TestDeclaredBounded(t *testing.T) {
	p := &pv{declared: map[uint64]embeds.Kind{}, htmlRead: true}
	for i := range 3 * MaxDeclaredKeys {
		kind := embeds.Deferred
		if i%3 == 0 {
			kind = embeds.Blocking
		}
		p.declared[uint64(i+1)] = kind
	}
	s := encodeDeclared(p)
	if len(s) > MaxDeclaredLen {
		t.Errorf("%d bytes, bound %d", len(s), MaxDeclaredLen)
	}
	r := decodeDeclared(s)
	if r == nil || len(r.urls) != MaxDeclaredKeys {
		t.Fatalf("decoded %d keys, want %d", len(r.urls), MaxDeclaredKeys)
	}
	for k, kind := range r.urls {
		if kind != embeds.Blocking || p.declared[k] != embeds.Blocking {
			t.Fatalf("key %d kept as %v (was %v): the blocking ones go first", k, kind, p.declared[k])
		}
	}
	if encodeDeclared(&pv{}) != "" {
		t.Error("nothing read encodes as something")
	}
	for _, bad := range []string{"", "!!!", "AQ", "AQEAAAAAAAAA", "AQUAAAAAAAAAAQ", strings.Repeat("A", MaxDeclaredLen+4), s[:len(s)-3]} {
		if r := decodeDeclared(bad); r != nil {
			t.Errorf("%q decoded to %d keys", bad, len(r.urls))
		}
	}
}

// The keys are of redacted URLs, as the grouping matches them: a secret
// in a declared URL's query leaves no trace in the stored form that the
// redacted URL does not.
func TestDeclaredRedacted(t *testing.T) {
	cfg := Config{Redaction: reconstruct.URLRedaction{Params: []string{"token"}}}
	mkPage := func(secret string) string {
		c := html("c1", 0, "/index.html", 0, 10, 20, 10)
		c.Body = []byte(fmt.Sprintf(`<html><img src="/a.png?token=%s"></html>`, secret))
		col, _ := run(t, cfg, c)
		if len(col.pvs) != 1 {
			t.Fatalf("%d pageviews", len(col.pvs))
		}
		return col.pvs[0].Declared
	}
	if a, b := mkPage("s3cret"), mkPage("other"); a == "" || a != b {
		t.Errorf("declared %q and %q differ by the redacted query", a, b)
	}
}

// FuzzDecodeDeclared: a stored Declared string comes back from a store a
// hand or a clip may have changed; decoding it never panics, stays within
// its bound, and whatever decodes re-encodes to the same keys.
func FuzzDecodeDeclared(f *testing.F) {
	f.Add("")
	f.Add("AQE")
	f.Add(encodeDeclared(&pv{declared: map[uint64]embeds.Kind{1: embeds.Blocking, 2: embeds.Deferred}, htmlRead: true}))
	f.Fuzz(func(t *testing.T, s string) {
		r := decodeDeclared(s)
		if r == nil {
			return
		}
		if len(r.urls) > MaxDeclaredKeys+1 {
			t.Fatalf("%d keys from %d bytes", len(r.urls), len(s))
		}
		again := decodeDeclared(encodeDeclared(&pv{declared: r.urls, htmlRead: r.html, noReferrer: r.noReferrer}))
		if again == nil || len(again.urls) != len(r.urls) || again.html != r.html || again.noReferrer != r.noReferrer {
			t.Fatalf("re-encoding changed the references: %d keys to %v", len(r.urls), again)
		}
		for k, kind := range r.urls {
			if again.urls[k] != kind {
				t.Fatalf("key %x: %v, then %v", k, kind, again.urls[k])
			}
		}
	})
}
