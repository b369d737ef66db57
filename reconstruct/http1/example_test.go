package http1_test

import (
	"fmt"

	"github.com/rtmon/rtmon/reconstruct/http1"
)

// reqSide pushes each request's method to the response parser as soon as
// the request line is known, so HEAD and CONNECT responses frame right.
type reqSide struct{ resp *http1.Parser }

func (r reqSide) MessageStart(m *http1.Message) { r.resp.PushRequestMethod(m.Method) }
func (reqSide) HeadersDone(*http1.Message)      {}
func (reqSide) MessageEnd(m *http1.Message) {
	fmt.Printf("request  %s %s [%d,%d) headers end %d\n", m.Method, m.URL, m.Start, m.End, m.HeaderEnd)
}
func (reqSide) Desync(off int64, reason string) { fmt.Println("request desync:", off, reason) }

type respSide struct{}

func (respSide) MessageStart(*http1.Message) {}
func (respSide) HeadersDone(*http1.Message)  {}
func (respSide) MessageEnd(m *http1.Message) {
	// Copy what you need: m is reused for the next message.
	fmt.Printf("response %d to %s [%d,%d) body %d interim %v\n", m.Status, m.Method, m.Start, m.End, m.BodyLen, m.Interim)
}
func (respSide) Desync(off int64, reason string) { fmt.Println("response desync:", off, reason) }

func Example() {
	req := http1.NewParser(http1.Request, 0)
	resp := http1.NewParser(http1.Response, 0)
	rh, sh := reqSide{resp}, respSide{}

	// Segments as the tracker would feed them, in capture order.
	req.Feed([]byte("HEAD /a HTTP/1.1\r\nHost: h\r\n\r\nPOST /b HTTP/1.1\r\nHost: h\r\n"), rh)
	req.Feed([]byte("Expect: 100-continue\r\nContent-Length: 3\r\n\r\n"), rh)
	resp.Feed([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n"), sh) // HEAD: no body
	resp.Feed([]byte("HTTP/1.1 100 Continue\r\n\r\n"), sh)
	req.Feed([]byte("abc"), rh)
	resp.Feed([]byte("HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"), sh)
	req.Close(rh)
	resp.Close(sh)
	// Output:
	// request  HEAD /a [0,29) headers end 29
	// response 200 to HEAD [0,41) body 0 interim false
	// response 100 to  [41,66) body 0 interim true
	// request  POST /b [29,102) headers end 99
	// response 201 to POST [66,111) body 2 interim false
}
