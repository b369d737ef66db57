package http2wire

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// chunk is what one Read or Write of the server's connection carried.
type chunk struct {
	dir  Dir
	data []byte
	at   int64
}

// tape records both directions of a connection in one ordered log. The
// timestamp is taken under the lock and never goes backwards, so log
// order is time order; a Read is logged before the server sees its bytes
// and a Write before the client can, so causes precede effects.
type tape struct {
	mu     sync.Mutex
	chunks []chunk
	last   int64
}

func (tp *tape) log(dir Dir, b []byte) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	at := max(time.Now().UnixNano(), tp.last+1)
	tp.last = at
	tp.chunks = append(tp.chunks, chunk{dir: dir, data: bytes.Clone(b), at: at})
}

type tapedConn struct {
	net.Conn
	tp *tape
}

func (c *tapedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.tp.log(ClientToServer, b[:n])
	}
	return n, err
}

func (c *tapedConn) Write(b []byte) (int, error) {
	c.tp.log(ServerToClient, b)
	return c.Conn.Write(b)
}

func realHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/item/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "item %s", r.URL.Path)
	})
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d", n)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "200000")
		w.Write(bytes.Repeat([]byte("b"), 200000))
	})
	mux.HandleFunc("/trailers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Checksum")
		w.Write([]byte("body"))
		w.Header().Set("X-Checksum", "abc123")
	})
	return mux
}

// serveOne serves h2c on one accepted connection and records it.
func serveOne(t *testing.T, ln net.Listener, tp *tape, done chan<- struct{}) {
	defer close(done)
	conn, err := ln.Accept()
	if err != nil {
		t.Error(err)
		return
	}
	srv := &http2.Server{}
	srv.ServeConn(&tapedConn{Conn: conn, tp: tp}, &http2.ServeConnOpts{Handler: realHandler()})
}

type result struct {
	path   string
	status int
	body   int
}

// runRealTraffic sends the test's requests over one h2c connection and
// returns the recording and what the client saw.
func runRealTraffic(t *testing.T) (*tape, []result) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	tp := &tape{}
	done := make(chan struct{})
	go serveOne(t, ln, tp, done)
	tr := &http2.Transport{AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}}
	base := "http://" + ln.Addr().String()
	// Only a guard against hanging the test binary; nothing is timed.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	do := func(method, path string, body io.Reader) result {
		req, err := http.NewRequestWithContext(ctx, method, base+path, body)
		if err != nil {
			t.Error(err)
			return result{}
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Error(err)
			return result{}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return result{path: path, status: resp.StatusCode, body: len(b)}
	}
	results := []result{do("GET", "/item/warmup", nil)} // opens the one connection
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			r := do("GET", fmt.Sprintf("/item/%d", i), nil)
			mu.Lock()
			results = append(results, r)
			mu.Unlock()
		})
	}
	wg.Wait()
	results = append(results, do("POST", "/upload", strings.NewReader(strings.Repeat("u", 30000))),
		do("GET", "/big", nil), do("GET", "/missing", nil), do("GET", "/trailers", nil))
	tr.CloseIdleConnections()
	<-done
	return tp, results
}

// TestRealTraffic: the bytes of a real Go HTTP/2 client and server, as
// the server's socket saw them, give every exchange with the right
// method, path, status and sizes, and times in causal order.
func TestRealTraffic(t *testing.T) {
	tp, results := runRealTraffic(t)
	if t.Failed() {
		return
	}
	r := newRecorder(t, Config{})
	var last int64
	for _, ch := range tp.chunks {
		r.feed(ch.dir, ch.data, ch.at)
		last = ch.at
	}
	r.close(last)
	r.noErrors()
	if len(r.streams) != len(results) {
		t.Fatalf("%d streams, %d requests", len(r.streams), len(results))
	}
	byPath := map[string]*Stream{}
	for _, st := range r.streams {
		byPath[st.Request.Path] = st
		checkTimes(t, st)
		if st.Incomplete || st.Reset != nil || !st.Request.Ended || !st.Response.Ended {
			t.Errorf("stream %d %s not complete: %+v", st.ID, st.Request.Path, st)
		}
		if st.Request.StartAt > st.Response.StartAt || st.Response.StartAt > st.Response.EndAt ||
			st.Request.EndAt > st.Response.EndAt {
			t.Errorf("stream %d times out of order: %+v", st.ID, st)
		}
	}
	for _, res := range results {
		st := byPath[res.path]
		if st == nil {
			t.Errorf("no stream for %s", res.path)
			continue
		}
		if st.Response.Status != res.status || st.Response.BodyBytes != int64(res.body) ||
			st.Request.Scheme != "http" || st.Request.Authority == "" {
			t.Errorf("%s: stream %+v, client saw %+v", res.path, st, res)
		}
	}
	checkRealDetails(t, byPath)
	s := r.c.Stats()
	if s.Frames[ServerToClient][FrameData] < 13 || s.StreamsCompleted != int64(len(results)) || s.ProtocolErrors != 0 {
		t.Errorf("stats %+v", s)
	}
}

func checkRealDetails(t *testing.T, byPath map[string]*Stream) {
	if st := byPath["/upload"]; st == nil || st.Request.Method != "POST" || st.Request.BodyBytes != 30000 {
		t.Errorf("upload %+v", st)
	}
	if st := byPath["/big"]; st == nil || st.Response.ContentLength != 200000 || st.Response.FirstDataAt == 0 {
		t.Errorf("big %+v", st)
	}
	if st := byPath["/missing"]; st == nil || st.Response.Status != 404 {
		t.Errorf("missing %+v", st)
	}
	if st := byPath["/trailers"]; st == nil ||
		len(st.Response.Trailers) != 1 || st.Response.Trailers[0] != (Field{"x-checksum", "abc123"}) {
		t.Errorf("trailers %+v", st)
	}
	if st := byPath["/item/3"]; st == nil || st.Request.Method != "GET" || st.Response.ContentType != "text/plain" ||
		st.Response.BodyBytes != int64(len("item /item/3")) || st.Request.UserAgent == "" {
		t.Errorf("item %+v", st)
	}
}
