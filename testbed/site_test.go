package testbed

import (
	"bytes"
	"image/png"
	"strings"
	"testing"
)

// TestSite: every object is the size the generator chose and every image
// decodes (Chromium aborts downloads of images that fail to decode).
func TestSite(t *testing.T) {
	s := GenerateSite(12, 1)
	counts := map[int]bool{}
	big := 0
	for _, p := range s.Pages {
		counts[len(p.Objects)] = true
		html := string(s.Content[p.Path])
		for _, o := range p.Objects {
			if !strings.Contains(html, `"`+o.Path+`"`) {
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
	}
	if len(counts) != 11 || big == 0 {
		t.Errorf("object counts %v, %d big images; want all of 1..11 and some %d-byte images", counts, big, BigImage)
	}
}
