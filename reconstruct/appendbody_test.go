package reconstruct

import (
	"bytes"
	"testing"
)

// appendBody keeps every byte in order, never holds more than the
// Content-Length or the per-body bound allow (beyond what was appended),
// and leaves no more unused capacity than the length again or 4 KiB, so the
// body budget, which counts lengths, still bounds the memory.
func TestAppendBodyBoundsCapacity(t *testing.T) {
	for _, tc := range []struct {
		name          string
		contentLength int64
		maxBody       int
		total, step   int
	}{
		{"known length", 200_000, 256 << 10, 200_000, 1448},
		{"chunked", -1, 256 << 10, 200_000, 1448},
		{"length past the bound", 1 << 20, 64 << 10, 64 << 10, 1448},
		{"tiny", 10, 256 << 10, 10, 3},
		{"lying length", 100, 256 << 10, 5000, 1448},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want, body []byte
			growths := 0
			for len(want) < tc.total {
				n := min(tc.step, tc.total-len(want))
				data := bytes.Repeat([]byte{byte(len(want) / tc.step)}, n)
				want = append(want, data...)
				before := cap(body)
				body = appendBody(body, data, tc.contentLength, tc.maxBody)
				if cap(body) != before {
					growths++
				}
				bound := max(2*len(body), len(body)+4096)
				if tc.contentLength > 0 && int(tc.contentLength) >= len(body) {
					bound = min(bound, max(int(tc.contentLength), len(body)))
				}
				bound = max(min(bound, max(tc.maxBody, len(body))), len(body))
				// size classes round an allocation up by at most 1/8
				if cap(body) > bound+bound/8+16 {
					t.Fatalf("cap %d for %d bytes (bound %d)", cap(body), len(body), bound)
				}
			}
			if !bytes.Equal(body, want) {
				t.Fatal("body differs from the bytes appended")
			}
			if tc.total > 100_000 && growths > 7 {
				t.Errorf("a 200 KB body grew %d times, want doubling (<= 7)", growths)
			}
		})
	}
}
