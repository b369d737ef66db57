package testbed

import (
	"bytes"
	"image/png"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// TestSite: every object is the size the generator chose, every image
// decodes (Chromium aborts downloads of images that fail to decode), the
// pages reference their objects the ways real pages do, and what the Go
// client parses from each page is exactly its objects.
func TestSite(t *testing.T) {
	s := GenerateSite(12, 1)
	counts := map[int]bool{}
	big := 0
	features := map[string]int{}
	for _, p := range s.Pages {
		counts[len(p.Objects)] = true
		html := string(s.Content[p.Path])
		for _, o := range p.Objects {
			if !strings.Contains(html, o.Path) {
				t.Errorf("%s does not reference %s", p.Path, o.Path)
			}
			b := s.Content[o.Path]
			if len(b) != o.Size {
				t.Errorf("%s: %d bytes, want %d", o.Path, len(b), o.Size)
			}
			if o.Size == BigImage {
				big++
			}
			if strings.HasSuffix(o.Path, ".png") {
				if _, err := png.Decode(bytes.NewReader(b)); err != nil {
					t.Errorf("%s: %v", o.Path, err)
				}
			}
		}
		for name, marker := range map[string]string{"preload": `rel="preload"`, "async": " async>", "defer": " defer>",
			"srcset": "srcset=", "style url": "background-image:url(", "no-referrer": `content="no-referrer"`,
			"sendBeacon": "navigator.sendBeacon(", "image beacon": "new Image().src", "icon": `rel="icon"`} {
			if strings.Contains(html, marker) {
				features[name]++
			}
		}
		page, _ := url.Parse("http://203.0.113.2" + p.Path)
		var want []string
		for _, o := range p.Objects {
			want = append(want, o.Path)
		}
		got := embeddedObjects(s.Content[p.Path], page)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the Go client parses %v, the page has %v", p.Path, got, want)
		}
	}
	if len(counts) != 11 || big == 0 {
		t.Errorf("object counts %v, %d big images; want all of 1..11 and some %d-byte images", counts, big, BigImage)
	}
	for _, f := range []string{"preload", "async", "defer", "srcset", "style url", "no-referrer", "sendBeacon", "image beacon"} {
		if features[f] == 0 {
			t.Errorf("no page has %s", f)
		}
	}
	if features["icon"] != 0 {
		t.Errorf("%d pages declare an icon; browsers must find /favicon.ico themselves", features["icon"])
	}
	if len(s.Content[FaviconPath]) == 0 || len(s.Content[BeaconGIF]) != 43 {
		t.Errorf("favicon %d bytes, beacon gif %d bytes", len(s.Content[FaviconPath]), len(s.Content[BeaconGIF]))
	}
	// The srcset's 2x candidates are served but never part of a page.
	if _, ok := s.Content[hiDPI(s.Pages[3].Objects[2].Path)]; !ok {
		t.Errorf("no 2x variant of %s", s.Pages[3].Objects[2].Path)
	}
}

// The truth's window rule gives a site beacon to the page it names: the
// names it reads are the ones the site writes.
func TestBeaconNamesItsPage(t *testing.T) {
	beacons := 0
	for _, p := range GenerateSite(16, 7).Pages {
		for _, u := range []string{p.Path, p.AppPath(50)} {
			if got := pageIndexOf(u); got != p.Index {
				t.Errorf("pageIndexOf(%q) = %d, want %d", u, got, p.Index)
			}
		}
		if bp := p.BeaconPath(); bp != "" {
			beacons++
			if n, ok := beaconPageIndex(bp); !ok || n != p.Index {
				t.Errorf("beaconPageIndex(%q) = %d %v, want %d", bp, n, ok, p.Index)
			}
		}
	}
	if _, ok := beaconPageIndex("/o/p1-0.css"); ok || beacons == 0 {
		t.Errorf("an object taken for a beacon, or no page with one (%d)", beacons)
	}
}
