package http1

import (
	"strings"
	"testing"
)

type nopHandler struct{ ends int }

func (*nopHandler) MessageStart(*Message) {}
func (*nopHandler) HeadersDone(*Message)  {}
func (h *nopHandler) MessageEnd(*Message) { h.ends++ }
func (*nopHandler) Desync(int64, string)  {}

const mss = 1448

// feedSegments feeds data in MSS-sized segments, as the tracker would.
func feedSegments(p *Parser, data []byte, h Handler) {
	for i := 0; i < len(data); i += mss {
		p.Feed(data[i:min(i+mss, len(data))], h)
	}
}

// BenchmarkParseResponse: keep-alive responses with typical headers and
// a 32 KiB body each, in MSS segments.
func BenchmarkParseResponse(b *testing.B) {
	resp := "HTTP/1.1 200 OK\r\nDate: Sun, 29 Nov 2026 20:00:00 GMT\r\nServer: nginx\r\n" +
		"Content-Type: text/html; charset=utf-8\r\nContent-Length: 32768\r\nConnection: keep-alive\r\n" +
		"Cache-Control: max-age=60\r\nETag: \"abcdef\"\r\n\r\n" + strings.Repeat("x", 32768)
	data := []byte(strings.Repeat(resp, 8))
	h := &nopHandler{}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		p := NewParser(Response, 0)
		for range 8 {
			p.PushRequestMethod("GET")
		}
		feedSegments(p, data, h)
	}
	if h.ends == 0 {
		b.Fatal("no messages")
	}
}

// BenchmarkParseChunkedResponse: the same with 4 KiB chunks.
func BenchmarkParseChunkedResponse(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n")
	for range 8 {
		sb.WriteString("1000\r\n" + strings.Repeat("y", 4096) + "\r\n")
	}
	sb.WriteString("0\r\n\r\n")
	data := []byte(strings.Repeat(sb.String(), 8))
	h := &nopHandler{}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		p := NewParser(Response, 0)
		feedSegments(p, data, h)
	}
}

// BenchmarkParsePipelinedRequests: 16 browser-like GETs back to back.
func BenchmarkParsePipelinedRequests(b *testing.B) {
	req := "GET /static/app.js?v=12345 HTTP/1.1\r\nHost: www.example.test\r\n" +
		"User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36\r\n" +
		"Accept: */*\r\nAccept-Encoding: gzip, deflate, br\r\nAccept-Language: en-US,en;q=0.9\r\n" +
		"Referer: https://www.example.test/index.html\r\nCookie: session=0123456789abcdef0123456789abcdef\r\n" +
		"Connection: keep-alive\r\n\r\n"
	data := []byte(strings.Repeat(req, 16))
	h := &nopHandler{}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		p := NewParser(Request, 0)
		feedSegments(p, data, h)
	}
	b.ReportMetric(float64(h.ends)/float64(b.Elapsed().Seconds())/1e6, "Mmsg/s")
}
