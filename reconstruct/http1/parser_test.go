package http1

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

const (
	getA = "GET /a?x=1 HTTP/1.1\r\nHost: example.test\r\nUser-Agent: UA/1.0\r\nAccept: text/html\r\nReferer: http://example.test/\r\n\r\n"
	getB = "GET /b.png HTTP/1.1\r\nhost: img.test\r\n\r\n"
)

func n(s string) int64 { return int64(len(s)) }

type tcase struct {
	name    string
	kind    Kind
	methods []string // pushed before feeding (responses)
	in      string
	close   bool
	want    []Message // at MessageEnd
	desyncs []event   // Type "desync" with Off and Reason
}

func tableCases() []tcase {
	chunkedResp := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" +
		"5;name=val;x=\"q\"\r\nhello\r\nA \r\n0123456789\r\n0\r\nX-Trailer: t\r\nX-Other: o\r\n\r\n"
	chunkedHead := strings.Index(chunkedResp, "\r\n\r\n") + 4
	post := "POST /form HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
	cont := "HTTP/1.1 100 Continue\r\n\r\n"
	early := "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
	ok0 := "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
	ok2 := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"
	head := "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nContent-Type: text/plain\r\n\r\n"
	r204 := "HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n"
	r304 := "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"
	r10 := "HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<html>body</html>"
	sw := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
	return []tcase{
		{name: "get", kind: Request, in: getA, want: []Message{{
			Kind: Request, Start: 0, HeaderEnd: n(getA), End: n(getA), Method: "GET", URL: "/a?x=1",
			Host: "example.test", Referer: "http://example.test/", UserAgent: "UA/1.0", Accept: "text/html",
			Proto: "HTTP/1.1", KeepAlive: true, ContentLength: -1}}},
		{name: "pipelined-with-blank-lines", kind: Request, in: getB + "\r\n" + getB + getB, want: []Message{
			{Kind: Request, Start: 0, HeaderEnd: n(getB), End: n(getB), Method: "GET", URL: "/b.png", Host: "img.test", Proto: "HTTP/1.1", KeepAlive: true, ContentLength: -1},
			{Kind: Request, Start: n(getB) + 2, HeaderEnd: 2*n(getB) + 2, End: 2*n(getB) + 2, Method: "GET", URL: "/b.png", Host: "img.test", Proto: "HTTP/1.1", KeepAlive: true, ContentLength: -1},
			{Kind: Request, Start: 2*n(getB) + 2, HeaderEnd: 3*n(getB) + 2, End: 3*n(getB) + 2, Method: "GET", URL: "/b.png", Host: "img.test", Proto: "HTTP/1.1", KeepAlive: true, ContentLength: -1},
		}},
		{name: "post-body-then-get", kind: Request, in: post + getB, want: []Message{
			{Kind: Request, HeaderEnd: n(post) - 5, End: n(post), Method: "POST", URL: "/form", Host: "h", Proto: "HTTP/1.1", KeepAlive: true, ContentLength: 5, BodyLen: 5, BodyWire: 5},
			{Kind: Request, Start: n(post), HeaderEnd: n(post) + n(getB), End: n(post) + n(getB), Method: "GET", URL: "/b.png", Host: "img.test", Proto: "HTTP/1.1", KeepAlive: true, ContentLength: -1},
		}},
		{name: "http10-request", kind: Request, in: "GET / HTTP/1.0\r\n\r\nGET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", want: []Message{
			{Kind: Request, HeaderEnd: 18, End: 18, Method: "GET", URL: "/", Proto: "HTTP/1.0", ContentLength: -1},
			{Kind: Request, Start: 18, HeaderEnd: 60, End: 60, Method: "GET", URL: "/", Proto: "HTTP/1.0", KeepAlive: true, ContentLength: -1},
		}},
		{name: "http11-connection-close", kind: Request, in: "GET / HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n", want: []Message{
			{Kind: Request, HeaderEnd: 49, End: 49, Method: "GET", URL: "/", Proto: "HTTP/1.1", ContentLength: -1}}},
		{name: "chunked-request", kind: Request, in: "POST /u HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-T: 1\r\n\r\n", want: []Message{
			{Kind: Request, HeaderEnd: 48, End: 48 + 29, Method: "POST", URL: "/u", Proto: "HTTP/1.1", KeepAlive: true, ContentLength: -1, Chunked: true, BodyLen: 5, BodyWire: 29}}},
		{name: "unknown-method-in-sync", kind: Request, in: "PROPFIND /dav HTTP/1.1\r\nContent-Length: 2\r\n\r\nxy", want: []Message{
			{Kind: Request, HeaderEnd: 45, End: 47, Method: "PROPFIND", URL: "/dav", Proto: "HTTP/1.1", KeepAlive: true, ContentLength: 2, BodyLen: 2, BodyWire: 2}}},
		{name: "bare-lf-and-case", kind: Request, in: "POST /x HTTP/1.1\nHOST: a\ncontent-LENGTH:   3  \n\nabc", want: []Message{
			{Kind: Request, HeaderEnd: 48, End: 51, Method: "POST", URL: "/x", Host: "a", Proto: "HTTP/1.1", KeepAlive: true, ContentLength: 3, BodyLen: 3, BodyWire: 3}}},
		{name: "expect-continue", kind: Request, in: "PUT /up HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 4\r\n\r\ndata", want: []Message{
			{Kind: Request, HeaderEnd: 61, End: 65, Method: "PUT", URL: "/up", Proto: "HTTP/1.1", KeepAlive: true, ExpectContinue: true, ContentLength: 4, BodyLen: 4, BodyWire: 4}}},
		{name: "cl-list-equal", kind: Request, in: "POST / HTTP/1.1\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nok", want: []Message{
			{Kind: Request, HeaderEnd: 60, End: 62, Method: "POST", URL: "/", Proto: "HTTP/1.1", KeepAlive: true, ContentLength: 2, BodyLen: 2, BodyWire: 2}}},
		{name: "cl-conflict", kind: Request, in: "POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc\r\n" + getB, want: []Message{
			{Kind: Request, HeaderEnd: 57, End: 57, Method: "POST", URL: "/", Proto: "HTTP/1.1", KeepAlive: true, ContentLength: -1, Incomplete: true},
			{Kind: Request, Start: 62, HeaderEnd: 62 + n(getB), End: 62 + n(getB), Method: "GET", URL: "/b.png", Host: "img.test", Proto: "HTTP/1.1", KeepAlive: true, ContentLength: -1},
		}, desyncs: []event{{Type: "desync", Off: 57, Reason: ReasonCLConflict}}},
		{name: "request-te-not-chunked", kind: Request, in: "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", want: []Message{
			{Kind: Request, HeaderEnd: 44, End: 44, Method: "POST", URL: "/", Proto: "HTTP/1.1", KeepAlive: true, ContentLength: -1, Incomplete: true}},
			desyncs: []event{{Type: "desync", Off: 44, Reason: ReasonRequestTE}}},
		{name: "garbage-then-request", kind: Request, in: "\x16\x03\x01junk GET / HTTP/1.1\r\nGET nope\r\nPOSTX / HTTP/1.1\r\n" + getB, want: []Message{
			{Kind: Request, Start: 52, HeaderEnd: 52 + n(getB), End: 52 + n(getB), Method: "GET", URL: "/b.png", Host: "img.test", Proto: "HTTP/1.1", KeepAlive: true, ContentLength: -1}},
			desyncs: []event{{Type: "desync", Off: 0, Reason: ReasonBadRequestLine}}},

		{name: "response-cl", kind: Response, methods: []string{"GET"}, in: ok2, want: []Message{
			{Kind: Response, HeaderEnd: n(ok2) - 2, End: n(ok2), Method: "GET", Status: 200, Proto: "HTTP/1.1", KeepAlive: true, ContentLength: 2, BodyLen: 2, BodyWire: 2}}},
		{name: "response-chunked", kind: Response, methods: []string{"GET"}, in: chunkedResp, want: []Message{
			{Kind: Response, HeaderEnd: int64(chunkedHead), End: n(chunkedResp), Method: "GET", Status: 200, Proto: "HTTP/1.1",
				ContentType: "text/html; charset=utf-8", KeepAlive: true, ContentLength: -1, Chunked: true, BodyLen: 15,
				BodyWire: n(chunkedResp) - int64(chunkedHead)}}},
		{name: "te-and-cl", kind: Response, methods: []string{"GET"}, in: "HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: gzip, chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n", want: []Message{
			{Kind: Response, HeaderEnd: 73, End: 73 + 11, Method: "GET", Status: 200, Proto: "HTTP/1.1", ContentLength: 99, Chunked: true, BodyLen: 1, BodyWire: 11}}},
		{name: "head-then-get", kind: Response, methods: []string{"HEAD", "GET"}, in: head + ok2, want: []Message{
			{Kind: Response, HeaderEnd: n(head), End: n(head), Method: "HEAD", Status: 200, Proto: "HTTP/1.1", ContentType: "text/plain", KeepAlive: true, ContentLength: 100},
			{Kind: Response, Start: n(head), HeaderEnd: n(head) + n(ok2) - 2, End: n(head) + n(ok2), Method: "GET", Status: 200, Proto: "HTTP/1.1", KeepAlive: true, ContentLength: 2, BodyLen: 2, BodyWire: 2},
		}},
		{name: "204-304", kind: Response, methods: []string{"GET", "GET"}, in: r204 + r304, want: []Message{
			{Kind: Response, HeaderEnd: n(r204), End: n(r204), Method: "GET", Status: 204, Proto: "HTTP/1.1", KeepAlive: true, ContentLength: 7},
			{Kind: Response, Start: n(r204), HeaderEnd: n(r204) + n(r304), End: n(r204) + n(r304), Method: "GET", Status: 304, Proto: "HTTP/1.1", KeepAlive: true, ContentLength: -1},
		}},
		{name: "close-delimited", kind: Response, methods: []string{"GET"}, in: r10, close: true, want: []Message{
			{Kind: Response, HeaderEnd: n(r10) - 17, End: n(r10), Method: "GET", Status: 200, Proto: "HTTP/1.0", ContentType: "text/html", ContentLength: -1, CloseDelimited: true, BodyLen: 17, BodyWire: 17}}},
		{name: "te-not-chunked-response", kind: Response, in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzz", close: true, want: []Message{
			{Kind: Response, HeaderEnd: 44, End: 46, Status: 200, Proto: "HTTP/1.1", NoRequest: true, ContentLength: -1, CloseDelimited: true, BodyLen: 2, BodyWire: 2}}},
		{name: "continue-early-hints", kind: Response, methods: []string{"POST"}, in: cont + early + ok0, want: []Message{
			{Kind: Response, HeaderEnd: n(cont), End: n(cont), Status: 100, Interim: true, Proto: "HTTP/1.1", KeepAlive: true, ContentLength: -1},
			{Kind: Response, Start: n(cont), HeaderEnd: n(cont) + n(early), End: n(cont) + n(early), Status: 103, Interim: true, Proto: "HTTP/1.1", KeepAlive: true, ContentLength: -1},
			{Kind: Response, Start: n(cont) + n(early), HeaderEnd: n(cont) + n(early) + n(ok0), End: n(cont) + n(early) + n(ok0), Method: "POST", Status: 200, Proto: "HTTP/1.1", KeepAlive: true, ContentLength: 0},
		}},
		{name: "switching-protocols", kind: Response, methods: []string{"GET"}, in: sw + "\x81\x05hello HTTP/1.1 200 OK\r\n\r\n", close: true, want: []Message{
			{Kind: Response, HeaderEnd: n(sw), End: n(sw), Method: "GET", Status: 101, Proto: "HTTP/1.1", ContentLength: -1}}},
		{name: "connect-tunnel", kind: Response, methods: []string{"CONNECT"}, in: "HTTP/1.1 200 Connection established\r\n\r\n\x16\x03\x01\x00", close: true, want: []Message{
			{Kind: Response, HeaderEnd: 39, End: 39, Method: "CONNECT", Status: 200, Proto: "HTTP/1.1", ContentLength: -1}}},
		{name: "no-reason-phrase", kind: Response, methods: []string{"GET"}, in: "HTTP/1.1 404\r\nContent-Length: 1\r\n\r\nx", want: []Message{
			{Kind: Response, HeaderEnd: 35, End: 36, Method: "GET", Status: 404, Proto: "HTTP/1.1", KeepAlive: true, ContentLength: 1, BodyLen: 1, BodyWire: 1}}},
		{name: "garbage-then-response", kind: Response, methods: []string{"GET"}, in: "xx HTTP/1.1 200 OK\r\nHTTP/2 200\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", want: []Message{
			{Kind: Response, Start: 32, HeaderEnd: 32 + 38, End: 32 + 38, Method: "GET", Status: 200, Proto: "HTTP/1.1", KeepAlive: true, ContentLength: 0}},
			desyncs: []event{{Type: "desync", Off: 0, Reason: ReasonBadStatusLine}}},
		{name: "bad-chunk-size", kind: Response, methods: []string{"GET"}, in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", want: []Message{
			{Kind: Response, HeaderEnd: 47, End: 47, Method: "GET", Status: 200, Proto: "HTTP/1.1", KeepAlive: true, ContentLength: -1, Chunked: true, Incomplete: true}},
			desyncs: []event{{Type: "desync", Off: 47, Reason: ReasonChunkSize}}},
		{name: "chunked-bare-lf", kind: Response, methods: []string{"GET"}, in: "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n3\nabc\n0\n\n", want: []Message{
			{Kind: Response, HeaderEnd: 44, End: 44 + 9, Method: "GET", Status: 200, Proto: "HTTP/1.1", KeepAlive: true, ContentLength: -1, Chunked: true, BodyLen: 3, BodyWire: 9}}},
		{name: "chunk-missing-crlf", kind: Response, methods: []string{"GET"}, in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n", want: []Message{
			{Kind: Response, HeaderEnd: 47, End: 47 + 6, Method: "GET", Status: 200, Proto: "HTTP/1.1", KeepAlive: true, ContentLength: -1, Chunked: true, BodyLen: 3, BodyWire: 6, Incomplete: true}},
			desyncs: []event{{Type: "desync", Off: 53, Reason: ReasonChunkCRLF}}},
		{name: "chunk-size-cr-without-lf", kind: Response, methods: []string{"GET"}, in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\rabc", want: []Message{
			{Kind: Response, HeaderEnd: 47, End: 49, Method: "GET", Status: 200, Proto: "HTTP/1.1", KeepAlive: true, ContentLength: -1, Chunked: true, BodyWire: 2, Incomplete: true}},
			desyncs: []event{{Type: "desync", Off: 49, Reason: ReasonChunkSize}}},
		{name: "cl-invalid", kind: Request, in: "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", want: []Message{
			{Kind: Request, HeaderEnd: 39, End: 39, Method: "POST", URL: "/", Proto: "HTTP/1.1", KeepAlive: true, ContentLength: -1, Incomplete: true}},
			desyncs: []event{{Type: "desync", Off: 39, Reason: ReasonCLInvalid}}},
		{name: "url-extra-spaces", kind: Request, in: "GET  /sp  HTTP/1.1\r\n\r\n", want: []Message{
			{Kind: Request, HeaderEnd: 22, End: 22, Method: "GET", URL: "/sp", Proto: "HTTP/1.1", KeepAlive: true, ContentLength: -1}}},
		{name: "status-below-100", kind: Response, in: "HTTP/1.1 099 Odd\r\n\r\n", desyncs: []event{{Type: "desync", Off: 0, Reason: ReasonBadStatusLine}}},
		{name: "close-mid-body", kind: Response, methods: []string{"GET"}, in: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", close: true, want: []Message{
			{Kind: Response, HeaderEnd: 39, End: 42, Method: "GET", Status: 200, Proto: "HTTP/1.1", KeepAlive: true, ContentLength: 10, BodyLen: 3, BodyWire: 3, Incomplete: true}}},
		{name: "close-mid-headers", kind: Response, methods: []string{"GET"}, in: "HTTP/1.1 200 OK\r\nContent-Le", close: true, want: []Message{
			{Kind: Response, End: 27, Method: "GET", Status: 200, Proto: "HTTP/1.1", ContentLength: -1, Incomplete: true}}},
		{name: "close-mid-request-headers", kind: Request, in: "GET /cut HTTP/1.1\r\nHost: h\r\nAcc", close: true, want: []Message{
			{Kind: Request, End: 31, Method: "GET", URL: "/cut", Host: "h", Proto: "HTTP/1.1", ContentLength: -1, Incomplete: true}}},
	}
}

func TestFraming(t *testing.T) {
	for _, tc := range tableCases() {
		t.Run(tc.name, func(t *testing.T) {
			p := newP(tc.kind, 0, tc.methods...)
			r := feedChunks(p, []byte(tc.in), nil, tc.close)
			checkEvents(t, r.ev, n(tc.in))
			if got := r.ends(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("messages:\n got %+v\nwant %+v", got, tc.want)
			}
			if got := r.desyncs(); !reflect.DeepEqual(got, tc.desyncs) {
				t.Fatalf("desyncs: got %v want %v", got, tc.desyncs)
			}
		})
	}
}

// TestSplitInvariance feeds each stream split at every position, and byte
// by byte, and requires exactly the events of the one-shot feed.
func TestSplitInvariance(t *testing.T) {
	for _, tc := range tableCases() {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.in)
			want := feedChunks(newP(tc.kind, 0, tc.methods...), data, nil, tc.close).ev
			for i := 0; i <= len(data); i++ {
				got := feedChunks(newP(tc.kind, 0, tc.methods...), data, []int{i}, tc.close).ev
				sameEvents(t, "split at "+strconv.Itoa(i), got, want)
			}
			cuts := make([]int, 0, len(data))
			for i := 1; i < len(data); i++ {
				cuts = append(cuts, i)
			}
			got := feedChunks(newP(tc.kind, 0, tc.methods...), data, cuts, tc.close).ev
			sameEvents(t, "byte by byte", got, want)
		})
	}
}

func TestEventOrderAndFieldsAtStart(t *testing.T) {
	p := newP(Response, 0, "GET")
	r := feedChunks(p, []byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1\r\n\r\nx"), nil, false)
	var types []string
	for _, e := range r.ev {
		types = append(types, e.Type)
	}
	if got := strings.Join(types, ","); got != "start,headers,end,start,headers,end" {
		t.Fatalf("order %s", got)
	}
	st := r.ev[3].M
	if st.Status != 200 || st.Method != "GET" || st.Start != 25 || st.ContentType != "" || st.HeaderEnd != 0 {
		t.Fatalf("at MessageStart: %+v", st)
	}
	if hd := r.ev[4].M; hd.ContentType != "text/html" || hd.ContentLength != 1 || hd.End != 0 {
		t.Fatalf("at HeadersDone: %+v", hd)
	}
}

func TestNoRequestMethodFIFO(t *testing.T) {
	p := newP(Response, 0)
	for i := 0; i < MaxPendingMethods+5; i++ {
		p.PushRequestMethod("HEAD")
	}
	resp := "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n"
	var in strings.Builder
	for i := 0; i < MaxPendingMethods; i++ {
		in.WriteString(resp) // HEAD: no body
	}
	in.WriteString(resp + "abc") // FIFO empty: framed as GET
	r := feedChunks(p, []byte(in.String()), nil, false)
	ends := r.ends()
	if len(ends) != MaxPendingMethods+1 || len(r.desyncs()) != 0 {
		t.Fatalf("got %d messages, %v", len(ends), r.desyncs())
	}
	last := ends[len(ends)-1]
	if !last.NoRequest || last.BodyLen != 3 || last.Method != "" || ends[0].Method != "HEAD" || ends[0].BodyLen != 0 {
		t.Fatalf("last %+v first %+v", last, ends[0])
	}
}

func TestSwitchToOpaqueRequestSide(t *testing.T) {
	p := newP(Request, 0)
	r := &recorder{}
	p.Feed([]byte("GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"), r)
	p.SwitchToOpaque()
	p.Feed([]byte("\x81\x85GET / HTTP/1.1\r\n\r\n"), r)
	p.Close(r)
	if len(r.ends()) != 1 || len(r.desyncs()) != 0 || p.Offset() != 81 {
		t.Fatalf("events %v offset %d", r.ev, p.Offset())
	}
}
