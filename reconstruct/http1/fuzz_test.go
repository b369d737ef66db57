package http1

import (
	"math/rand/v2"
	"testing"
)

// fuzzParser checks, for arbitrary bytes: no panic, well-formed event
// streams with offsets inside what was fed, identical events however the
// bytes are split (the parser is split-invariant for every input, valid or
// not), and sane behaviour with a gap inserted.
func fuzzParser(t *testing.T, kind Kind, data []byte, seed uint64, max int) {
	methods := []string{"GET", "HEAD", "POST", "CONNECT", "GET", "HEAD"}
	rng := rand.New(rand.NewPCG(seed, seed>>32|1))
	max = MinMaxHeaderBytes + max%2048
	nm := int(seed % 7)
	mk := func() *Parser {
		p := NewParser(kind, max)
		for i := 0; i < nm; i++ {
			p.PushRequestMethod(methods[i%len(methods)])
		}
		return p
	}
	closeIt := seed&1 == 0

	p := mk()
	want := feedChunks(p, data, nil, closeIt).ev
	checkEvents(t, want, int64(len(data)))
	if p.Offset() != int64(len(data)) {
		t.Fatalf("offset %d after %d bytes", p.Offset(), len(data))
	}

	var cuts []int
	for i := 0; i < len(data); {
		i += 1 + rng.IntN(16)
		if i < len(data) {
			cuts = append(cuts, i)
		}
	}
	sameEvents(t, "random split", feedChunks(mk(), data, cuts, closeIt).ev, want)
	checkBodySplitInvariant(t, kind, data, seed, mk, closeIt)

	if len(data) > 2 {
		a := rng.IntN(len(data))
		g := 1 + rng.IntN(len(data)-a)
		p := mk()
		r := &recorder{}
		p.Feed(data[:a], r)
		p.Gap(int64(g), r)
		p.Feed(data[a+g:], r)
		p.Close(r)
		checkEvents(t, r.ev, int64(len(data)))
		var holes int64
		for _, m := range r.ends() {
			holes += m.Hole
		}
		if holes > int64(g) {
			t.Fatalf("holes %d > gap %d", holes, g)
		}
	}
}

func addSeeds(f *testing.F, kind Kind) {
	for _, tc := range tableCases() {
		if tc.kind == kind {
			f.Add([]byte(tc.in), uint64(len(tc.in)), 0)
		}
	}
	f.Add([]byte(getA+getB+"\r\n"+getA), uint64(3), 1)
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nwiki\r\n5;a=b\r\npedia\r\n0\r\nT: x\r\n\r\nHTTP/1.1 304 NM\r\n\r\n"), uint64(2), 7)
}

func FuzzRequestParser(f *testing.F) {
	addSeeds(f, Request)
	f.Fuzz(func(t *testing.T, data []byte, seed uint64, max int) {
		fuzzParser(t, Request, data, seed, abs(max))
	})
}

func FuzzResponseParser(f *testing.F) {
	addSeeds(f, Response)
	f.Fuzz(func(t *testing.T, data []byte, seed uint64, max int) {
		fuzzParser(t, Response, data, seed, abs(max))
	})
}

func abs(x int) int {
	if x < 0 {
		x = -(x + 1)
	}
	return x
}
