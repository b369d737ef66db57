package synth

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"testing"
)

// The helpers must produce what Go's own HTTP parser accepts.
func TestHTTPHelpers(t *testing.T) {
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(Request("GET", "www.example.com", "/a.html", "Referer: http://www.example.com/"))))
	if err != nil || req.Method != "GET" || req.Host != "www.example.com" || req.URL.Path != "/a.html" || req.Referer() != "http://www.example.com/" {
		t.Fatalf("Request: %v %+v", err, req)
	}
	req, err = http.ReadRequest(bufio.NewReader(bytes.NewReader(RequestBody("POST", "h", "/p", []byte("x=1")))))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(req.Body); string(b) != "x=1" {
		t.Fatalf("RequestBody body %q", b)
	}
	head := ContinueRequest("PUT", "h", "/u", 5000)
	req, err = http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
	if err != nil || req.Header.Get("Expect") != "100-continue" || req.ContentLength != 5000 {
		t.Fatalf("ContinueRequest: %v %+v", err, req)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(Continue())), nil)
	if err != nil || resp.StatusCode != 100 {
		t.Fatalf("Continue: %v %+v", err, resp)
	}
	for name, raw := range map[string][]byte{
		"Response":    Response(404, "text/html", []byte("nope!"), "X-A: b"),
		"ResponseLen": ResponseLen(404, "text/html", 5),
		"Chunked":     Chunked(404, "text/html", []int{2, 3}),
	} {
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "text/html" || len(b) != 5 {
			t.Fatalf("%s: %v status %d body %q", name, err, resp.StatusCode, b)
		}
		if name == "Chunked" && (len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked") {
			t.Fatalf("Chunked: transfer encoding %v", resp.TransferEncoding)
		}
	}
	if big := Body(3 << 20); len(big) != 3<<20 || !bytes.Equal(big[maxBody:maxBody+100], big[:100]) {
		t.Fatal("Body beyond the filler length")
	}
}
