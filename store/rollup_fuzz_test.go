package store

import (
	"strings"
	"testing"
)

// The rollup texts are written by this package, but a store is a file or
// a server that others can write to: decoding must reject, not panic on,
// anything, and what it accepts must encode back to an equivalent text.
func FuzzDecodeRollupText(f *testing.F) {
	f.Add("0:1,5:2,1601:9")
	f.Add("total=5,tconn=-3")
	f.Add("")
	f.Add("1602:1")
	f.Add("3:,4:1")
	f.Add(strings.Repeat("9", 30) + ":1")
	f.Fuzz(func(t *testing.T, s string) {
		if h, err := decodeHist(nil, s); err == nil {
			for _, x := range h {
				if x.b < 0 || x.b >= len(RollupEdges) || x.c < 0 {
					t.Fatalf("decodeHist(%q) accepted bucket %d count %d", s, x.b, x.c)
				}
			}
			again, err := decodeHist(nil, encodeHist(h))
			if err != nil || len(again) != len(h) {
				t.Fatalf("round trip of %q: %v %v", s, again, err)
			}
		}
		if m, err := decodeSums(s); err == nil {
			names := make([]string, 0, len(m))
			for k := range m {
				names = append(names, k)
			}
			again, err := decodeSums(encodeSums(names, m))
			if err == nil && len(again) != len(m) {
				t.Fatalf("round trip of %q: %v -> %v", s, m, again)
			}
		}
	})
}
