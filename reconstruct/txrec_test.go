package reconstruct

import "testing"

// The request's values and the response's two come back as they were set,
// whichever are empty: the last request value and the Content-Encoding
// have no end of their own.
func TestTxRecValues(t *testing.T) {
	for _, v := range [][nReqVals]string{
		{"GET", "example.com", "/a", "https://r/", "UA", "*/*", "document"},
		{reqHost: "sni.example"},
		{reqFetchDest: "image"},
		{reqMethod: "GET", reqFetchDest: "script"},
		{},
	} {
		var r txRec
		r.setReq(v)
		if got := r.reqVals(); got != v {
			t.Errorf("setReq(%q): reqVals %q", v, got)
		}
	}
	for _, c := range [][2]string{{"text/html", "gzip"}, {"text/css", ""}, {"", "br"}, {"", ""}} {
		var r txRec
		r.setResp(c[0], c[1])
		if r.contentType() != c[0] || r.contentEncoding() != c[1] {
			t.Errorf("setResp(%q, %q): %q, %q", c[0], c[1], r.contentType(), r.contentEncoding())
		}
	}
}
