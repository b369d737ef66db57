package http1

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// expMsg is what a generated stream must parse to, computed by the
// generator independently of the parser.
type expMsg struct {
	start, headerEnd, end int64
	status                int
	method, url           string
	bodyLen               int64
	bodyStart             int64 // first body byte, for placing gaps
	clBody                bool  // Content-Length body with at least one byte
}

type gen struct {
	rng     *rand.Rand
	sb      strings.Builder
	exp     []expMsg
	methods []string
}

func (g *gen) eol() string {
	if g.rng.IntN(8) == 0 {
		return "\n"
	}
	return "\r\n"
}

func (g *gen) name(s string) string {
	b := []byte(s)
	for i := range b {
		if g.rng.IntN(3) == 0 && b[i] >= 'a' && b[i] <= 'z' {
			b[i] -= 'a' - 'A'
		}
	}
	return string(b)
}

func (g *gen) filler() {
	for range g.rng.IntN(4) {
		fmt.Fprintf(&g.sb, "%s: %s%s", g.name("x-filler"), strings.Repeat("v", g.rng.IntN(40)), g.eol())
	}
}

// body writes a Content-Length or chunked body (headers already ended by
// the caller's blank line is not yet written); it returns the payload size.
func (g *gen) body(m *expMsg, chunked bool, size int) {
	if !chunked {
		fmt.Fprintf(&g.sb, "%s: %d%s%s", g.name("content-length"), size, g.eol(), g.eol())
		m.headerEnd = int64(g.sb.Len())
		m.bodyStart = m.headerEnd
		g.sb.WriteString(strings.Repeat("b", size))
		m.bodyLen = int64(size)
		m.clBody = size > 0
		return
	}
	fmt.Fprintf(&g.sb, "%s: %s%s%s", g.name("transfer-encoding"), g.name("chunked"), g.eol(), g.eol())
	m.headerEnd = int64(g.sb.Len())
	for size > 0 {
		c := 1 + g.rng.IntN(size)
		ext := ""
		if g.rng.IntN(3) == 0 {
			ext = ";e=" + strings.Repeat("x", g.rng.IntN(10))
		}
		fmt.Fprintf(&g.sb, "%x%s%s%s%s", c, ext, g.eol(), strings.Repeat("c", c), g.eol())
		size -= c
		m.bodyLen += int64(c)
	}
	g.sb.WriteString("0" + g.eol())
	for range g.rng.IntN(3) {
		g.sb.WriteString("X-Trailer: t" + g.eol())
	}
	g.sb.WriteString(g.eol())
}

func (g *gen) request() {
	m := expMsg{start: int64(g.sb.Len())}
	m.method = []string{"GET", "POST", "PUT", "HEAD", "DELETE", "OPTIONS"}[g.rng.IntN(6)]
	m.url = fmt.Sprintf("/p/%d?q=%d", g.rng.IntN(1000), g.rng.IntN(1000))
	fmt.Fprintf(&g.sb, "%s %s HTTP/1.1%s%s: h%s", m.method, m.url, g.eol(), g.name("host"), g.eol())
	g.filler()
	switch g.rng.IntN(3) {
	case 0:
		g.sb.WriteString(g.eol())
		m.headerEnd = int64(g.sb.Len())
	default:
		g.body(&m, g.rng.IntN(2) == 0, g.rng.IntN(3000))
	}
	m.end = int64(g.sb.Len())
	g.exp = append(g.exp, m)
	if g.rng.IntN(5) == 0 {
		g.sb.WriteString("\r\n") // tolerated empty line between messages
	}
}

func (g *gen) response(last bool) {
	method := []string{"GET", "GET", "HEAD", "POST"}[g.rng.IntN(4)]
	g.methods = append(g.methods, method)
	for range g.rng.IntN(3) {
		m := expMsg{start: int64(g.sb.Len()), status: 100 + 3*g.rng.IntN(2)}
		fmt.Fprintf(&g.sb, "HTTP/1.1 %d Interim%s", m.status, g.eol())
		g.filler()
		g.sb.WriteString(g.eol())
		m.headerEnd, m.end = int64(g.sb.Len()), int64(g.sb.Len())
		g.exp = append(g.exp, m)
	}
	m := expMsg{start: int64(g.sb.Len()), method: method, status: []int{200, 200, 404, 204, 304}[g.rng.IntN(5)]}
	fmt.Fprintf(&g.sb, "HTTP/1.1 %d R%s", m.status, g.eol())
	g.filler()
	switch {
	case m.status == 204 || m.status == 304 || method == "HEAD":
		if g.rng.IntN(2) == 0 {
			fmt.Fprintf(&g.sb, "Content-Length: %d%s", 1+g.rng.IntN(100), g.eol())
		}
		g.sb.WriteString(g.eol())
		m.headerEnd = int64(g.sb.Len())
	case last && g.rng.IntN(3) == 0:
		g.sb.WriteString("Connection: close" + g.eol() + g.eol())
		m.headerEnd = int64(g.sb.Len())
		n := g.rng.IntN(2000)
		g.sb.WriteString(strings.Repeat("d", n))
		m.bodyLen = int64(n)
	default:
		g.body(&m, g.rng.IntN(2) == 0, g.rng.IntN(5000))
	}
	m.end = int64(g.sb.Len())
	g.exp = append(g.exp, m)
}

func generate(kind Kind, seed uint64) *gen {
	g := &gen{rng: rand.New(rand.NewPCG(seed, 99))}
	n := 1 + g.rng.IntN(8)
	for i := range n {
		if kind == Request {
			g.request()
		} else {
			g.response(i == n-1)
		}
	}
	return g
}

func checkGenerated(t *testing.T, what string, got []Message, exp []expMsg, gapMsg int, gap int64) {
	t.Helper()
	if len(got) != len(exp) {
		t.Fatalf("%s: %d messages, want %d:\n%+v", what, len(got), len(exp), got)
	}
	for i, e := range exp {
		m := got[i]
		hole := int64(0)
		if i == gapMsg {
			hole = gap
		}
		if m.Start != e.start || m.HeaderEnd != e.headerEnd || m.End != e.end || m.Status != e.status ||
			m.Method != e.method || m.URL != e.url || m.BodyLen != e.bodyLen || m.Incomplete || m.Hole != hole {
			t.Fatalf("%s: message %d = %+v\nwant %+v (hole %d)", what, i, m, e, hole)
		}
	}
}

// TestGeneratedStreams parses random valid pipelined streams, split at
// random places and with random gaps inside Content-Length bodies, against
// offsets computed by the generator.
func TestGeneratedStreams(t *testing.T) {
	var interim, chunked, noBody, closeDelim, gaps, total int
	for _, kind := range []Kind{Request, Response} {
		for seed := uint64(0); seed < 300; seed++ {
			g := generate(kind, seed)
			data := []byte(g.sb.String())
			mk := func() *Parser { return newP(kind, 0, g.methods...) }
			what := fmt.Sprintf("%v seed %d", kind, seed)

			r := feedChunks(mk(), data, nil, true)
			if len(r.desyncs()) != 0 {
				t.Fatalf("%s: desync %v\n%q", what, r.desyncs(), data)
			}
			checkGenerated(t, what, r.ends(), g.exp, -1, 0)
			for _, m := range r.ends() {
				total++
				switch {
				case m.Interim:
					interim++
				case m.Chunked:
					chunked++
				case m.CloseDelimited:
					closeDelim++
				case m.Kind == Response && m.End == m.HeaderEnd:
					noBody++
				}
			}

			var cuts []int
			for i := 0; i < len(data); {
				i += 1 + g.rng.IntN(300)
				if i < len(data) {
					cuts = append(cuts, i)
				}
			}
			sameEvents(t, what+" split", feedChunks(mk(), data, cuts, true).ev, r.ev)

			for i, e := range g.exp {
				if !e.clBody {
					continue
				}
				a := e.bodyStart + g.rng.Int64N(e.end-e.bodyStart)
				gap := 1 + g.rng.Int64N(e.end-a)
				p := mk()
				gr := &recorder{}
				p.Feed(data[:a], gr)
				p.Gap(gap, gr)
				p.Feed(data[a+gap:], gr)
				p.Close(gr)
				if len(gr.desyncs()) != 0 {
					t.Fatalf("%s gap: desync %v", what, gr.desyncs())
				}
				checkGenerated(t, what+" gap", gr.ends(), g.exp, i, gap)
				gaps++
				break
			}
		}
	}
	// The generator must have exercised every framing.
	if interim < 50 || chunked < 100 || noBody < 50 || closeDelim < 10 || gaps < 100 {
		t.Fatalf("weak coverage: %d messages, interim %d chunked %d no-body %d close-delimited %d gaps %d",
			total, interim, chunked, noBody, closeDelim, gaps)
	}
}
