package store

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// encodeSums writes name=value pairs: readable in the table, and a sum
// added later reads as absent (0) in old rows rather than as another's.
func encodeSums(names []string, s map[string]int64) string {
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n)
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(s[n], 10))
	}
	return b.String()
}

func decodeSums(s string) (map[string]int64, error) {
	out := map[string]int64{}
	if s == "" {
		return out, nil
	}
	for _, f := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(f, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("rollup sums %q: bad field %q", s, f)
		}
		out[k] = n
	}
	return out, nil
}

// encodeHist writes the non-empty buckets as bucket:count pairs.
func encodeHist(h []bucketCount) string {
	var sb strings.Builder
	for i, x := range h {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(x.b))
		sb.WriteByte(':')
		sb.WriteString(strconv.FormatInt(x.c, 10))
	}
	return sb.String()
}

// decodeHist appends the pairs of s to dst. It is on the overview's path
// (a day is ~4000 rows of ~150 pairs each), hence no splitting.
func decodeHist(dst []bucketCount, s string) ([]bucketCount, error) {
	bad := func() ([]bucketCount, error) { return dst, fmt.Errorf("rollup histogram %.40q: malformed", s) }
	if s != "" {
		dst = slices.Grow(dst, strings.Count(s, ",")+1)
	}
	for i := 0; i < len(s); {
		var b, c int64
		j := i
		for ; j < len(s) && s[j] >= '0' && s[j] <= '9'; j++ {
			b = b*10 + int64(s[j]-'0')
		}
		if j == i || j-i > 6 || j >= len(s) || s[j] != ':' || b >= int64(len(RollupEdges)) {
			return bad()
		}
		k := j + 1
		for j = k; j < len(s) && s[j] >= '0' && s[j] <= '9'; j++ {
			c = c*10 + int64(s[j]-'0')
		}
		if j == k || j-k > 18 || (j < len(s) && s[j] != ',') {
			return bad()
		}
		dst = append(dst, bucketCount{int(b), c})
		i = j + 1
	}
	return dst, nil
}
