package synth

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Request builds an HTTP/1.1 request without a body. headers are "Name: value"
// strings appended after Host.
func Request(method, host, url string, headers ...string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, url, host)
	for _, h := range headers {
		b.WriteString(h)
		b.WriteString("\r\n")
	}
	b.WriteString("\r\n")
	return []byte(b.String())
}

// RequestBody builds a request with a Content-Length body.
func RequestBody(method, host, url string, body []byte, headers ...string) []byte {
	h := append([]string{"Content-Length: " + strconv.Itoa(len(body))}, headers...)
	return append(Request(method, host, url, h...), body...)
}

// ContinueRequest builds the head of a request that waits for "100 Continue"
// before sending its bodyLen-byte body (send the body later with Body).
func ContinueRequest(method, host, url string, bodyLen int, headers ...string) []byte {
	h := append([]string{"Content-Length: " + strconv.Itoa(bodyLen), "Expect: 100-continue"}, headers...)
	return Request(method, host, url, h...)
}

// Continue is the interim "100 Continue" response.
func Continue() []byte { return []byte("HTTP/1.1 100 Continue\r\n\r\n") }

// ResponseHeader builds a response head announcing a Content-Length body.
func ResponseHeader(status int, contentType string, bodyLen int, headers ...string) []byte {
	return responseHead(status, contentType, bodyLen, headers)
}

// responseHead builds a response head: status line, Content-Type unless
// empty, Content-Length unless bodyLen is negative, then headers.
func responseHead(status int, contentType string, bodyLen int, headers []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	if contentType != "" {
		fmt.Fprintf(&b, "Content-Type: %s\r\n", contentType)
	}
	if bodyLen >= 0 {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", bodyLen)
	}
	for _, h := range headers {
		b.WriteString(h)
		b.WriteString("\r\n")
	}
	b.WriteString("\r\n")
	return []byte(b.String())
}

// Response builds a complete response with the given body.
func Response(status int, contentType string, body []byte, headers ...string) []byte {
	return append(ResponseHeader(status, contentType, len(body), headers...), body...)
}

// ResponseLen builds a complete response with a bodyLen-byte filler body.
func ResponseLen(status int, contentType string, bodyLen int, headers ...string) []byte {
	return append(ResponseHeader(status, contentType, bodyLen, headers...), Body(bodyLen)...)
}

// Chunked builds a "Transfer-Encoding: chunked" response whose body is sent in
// chunks of the given sizes, followed by the terminating zero-length chunk.
func Chunked(status int, contentType string, chunkSizes []int, headers ...string) []byte {
	out := responseHead(status, contentType, -1, append([]string{"Transfer-Encoding: chunked"}, headers...))
	for _, n := range chunkSizes {
		out = fmt.Appendf(out, "%x\r\n", n)
		out = append(append(out, Body(n)...), "\r\n"...)
	}
	return append(out, "0\r\n\r\n"...)
}

// filler is a repeating printable pattern; bodies are slices of it so large
// responses cost no allocation in the workload generator.
var filler = func() []byte {
	const pat = "rtmon-synth-0123456789abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKLMNOPQRSTUVWXYZ\n"
	b := make([]byte, 0, maxBody+len(pat))
	for len(b) < maxBody {
		b = append(b, pat...)
	}
	return b[:maxBody]
}()

const maxBody = 1 << 20

// Body returns n filler bytes (a fresh copy).
func Body(n int) []byte {
	out := make([]byte, n)
	for off := 0; off < n; off += maxBody {
		copy(out[off:], filler)
	}
	return out
}
