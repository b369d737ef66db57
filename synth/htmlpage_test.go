package synth

import (
	"bytes"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// docRefs parses doc as a browser would and returns the absolute URLs its
// src, href and inline style attributes name, resolved against pageURL.
func docRefs(t *testing.T, doc []byte, pageURL string) []string {
	t.Helper()
	z := html.NewTokenizer(bytes.NewReader(doc))
	for z.Next() != html.ErrorToken {
	}
	if err := z.Err(); err != io.EOF {
		t.Fatalf("tokenizer: %v", err)
	}
	root, err := html.Parse(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	base, err := url.Parse(pageURL)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	add := func(ref string) {
		u, err := base.Parse(ref)
		if err != nil {
			t.Errorf("reference %q: %v", ref, err)
			return
		}
		out = append(out, u.String())
	}
	for n := range root.Descendants() {
		for _, a := range n.Attr {
			switch {
			case a.Key == "src" || a.Key == "href":
				add(a.Val)
			case a.Key == "style" && strings.Contains(a.Val, "url('"):
				v := a.Val[strings.Index(a.Val, "url('")+5:]
				add(v[:strings.IndexByte(v, '\'')])
			}
		}
	}
	return out
}

func TestHTMLDocumentExactAndParses(t *testing.T) {
	const host, page = "www7.example.com", "/site/42/index.html"
	refs := []string{"/static/style0.css", "/static/app1.js", "/img/photo2.jpg", "/img/icon3.png",
		"/static/app4.js", "/img/hero5.jpg", "/static/style6.css", "/img/photo7.jpg"}
	for _, n := range []int{4000, 4001, 4097, 9999, 31337, 52000, 79999} {
		for seed := range uint64(4) {
			doc := HTMLDocument(seed, host, page, refs, n)
			if len(doc) != n {
				t.Fatalf("n=%d seed=%d: got %d bytes", n, seed, len(doc))
			}
			if !bytes.HasPrefix(doc, []byte("<!DOCTYPE html>\n<html")) || !bytes.HasSuffix(doc, []byte("</html>\n")) {
				t.Fatalf("n=%d seed=%d: not a whole document: %q ... %q", n, seed, doc[:40], doc[n-40:])
			}
			got := docRefs(t, doc, "http://"+host+page)
			for _, r := range refs {
				if !slices.Contains(got, "http://"+host+r) {
					t.Errorf("n=%d seed=%d: %s not referenced; refs %v", n, seed, r, got)
				}
			}
			if c := bytes.Count(doc, []byte("<")); c < n/100 {
				t.Errorf("n=%d seed=%d: only %d tags", n, seed, c)
			}
		}
	}
	a, b := HTMLDocument(1, host, page, refs, 20000), HTMLDocument(1, host, page, refs, 20000)
	if !bytes.Equal(a, b) {
		t.Error("same seed, different documents")
	}
	if bytes.Equal(a, HTMLDocument(2, host, page, refs, 20000)) {
		t.Error("different seeds, same document")
	}
}

func TestHTMLDocumentTooSmall(t *testing.T) {
	for _, n := range []int{0, 1, 100, 1500} {
		if doc := HTMLDocument(3, "h", "/site/1/index.html", []string{"/img/a.png"}, n); len(doc) != n {
			t.Errorf("n=%d: got %d bytes", n, len(doc))
		}
	}
}

// serverStreams reassembles each connection's server bytes (retransmissions
// dropped) keyed by the client's address.
func serverStreams(pkts []capPkt) map[string][]byte {
	type seg struct {
		seq  uint32
		data []byte
	}
	segs := map[string][]seg{}
	for _, p := range pkts {
		if p.src.Port() == 80 && len(p.payload) > 0 {
			k := p.dst.String()
			segs[k] = append(segs[k], seg{p.seq, p.payload})
		}
	}
	out := map[string][]byte{}
	for k, ss := range segs {
		slices.SortStableFunc(ss, func(a, b seg) int { return int(int32(a.seq - b.seq)) })
		var b []byte
		next := ss[0].seq
		for _, s := range ss {
			if s.seq == next {
				b = append(b, s.data...)
				next += uint32(len(s.data))
			}
		}
		out[k] = b
	}
	return out
}

func TestWorkloadMarkup(t *testing.T) {
	wl := Workload{Seed: 11, Clients: 20, Duration: 20 * 1e9, DataLossRate: 0.05, SYNLossRate: 0.05}
	plainRaw, plainTruth, plainSum := generate(t, Options{}, wl)
	wl.Markup = true
	raw, truth, sum := generate(t, Options{}, wl)
	plainSum.Elapsed, sum.Elapsed = 0, 0
	if sum != plainSum || len(raw) != len(plainRaw) || !slices.Equal(truth, plainTruth) {
		t.Fatalf("Markup changed the workload: %+v vs %+v, %d vs %d bytes", sum, plainSum, len(raw), len(plainRaw))
	}
	if sum.DataRetrans == 0 {
		t.Fatal("no retransmissions: the test does not cover them")
	}
	plain, pkts := decodeFile(t, plainRaw), decodeFile(t, raw)
	for i := range pkts {
		a, b := plain[i], pkts[i]
		if a.ts != b.ts || a.src != b.src || a.dst != b.dst || a.seq != b.seq || a.ack != b.ack || len(a.payload) != len(b.payload) {
			t.Fatalf("packet %d differs beyond its payload bytes", i)
		}
	}
	objs := map[uint64][]string{}
	for _, tr := range truth {
		if !tr.Container {
			objs[tr.PageviewID] = append(objs[tr.PageviewID], "http://"+tr.Host+tr.URL)
		}
	}
	streams := serverStreams(pkts)
	checked := 0
	for _, tr := range truth {
		if !tr.Container {
			continue
		}
		s := streams[tr.Client.String()]
		head := bytes.Index(s, []byte("\r\n\r\n")) + 4
		if head < 4 || len(s) < head+tr.BodyBytes || !strings.Contains(string(s[:head]), "Content-Length: "+strconv.Itoa(tr.BodyBytes)) {
			t.Fatalf("pageview %d: no container response on %s", tr.PageviewID, tr.Client)
		}
		doc := s[head : head+tr.BodyBytes]
		if !bytes.HasPrefix(doc, []byte("<!DOCTYPE html>")) {
			t.Fatalf("pageview %d: body starts %q", tr.PageviewID, doc[:min(len(doc), 40)])
		}
		got := docRefs(t, doc, "http://"+tr.Host+tr.URL)
		for _, o := range objs[tr.PageviewID] {
			if !slices.Contains(got, o) {
				t.Errorf("pageview %d: %s not referenced", tr.PageviewID, o)
			}
		}
		checked++
	}
	if checked != sum.Pageviews || checked == 0 {
		t.Errorf("checked %d of %d containers", checked, sum.Pageviews)
	}
	if bytes.Contains(raw, []byte("rtmon-synth-")) == false {
		t.Error("no filler left: objects should keep theirs")
	}
}
