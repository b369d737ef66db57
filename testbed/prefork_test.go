package testbed

import (
	"bytes"
	"net/http"
	"slices"
	"testing"
	"time"
)

// TestPreforkServesOneAtATime: the prefork server (worker processes on one
// listen socket) serves the site's files, 404 for others, and with one
// worker serves concurrent connections one after another: the k-th
// response cannot end before k service times (a lower bound, whatever
// the machine's load).
func TestPreforkServesOneAtATime(t *testing.T) {
	bin, err := buildPreforkd()
	if err != nil {
		t.Fatalf("preforkd is not buildable: %v", err)
	}
	tb := New(t, Options{})
	const service = 200 * time.Millisecond
	content := map[string][]byte{"/a.html": []byte("<p>a</p>"), "/o/b.css": bytes.Repeat([]byte("b"), 5000)}
	p, err := tb.StartPrefork(PreforkOptions{Bin: bin, Port: 80, Workers: 1, Backlog: 8, Service: service, Content: content})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	g := tb.NewGoClient(tb.Client.Addr, "http://"+p.Addr.String())
	defer g.Close()
	hc := &http.Client{Transport: g.transport()}
	paths := []string{"/a.html", "/o/b.css", "/a.html", "/missing"}
	type got struct {
		o    ObjectTruth
		body []byte
		err  error
	}
	res, _ := inParallel(len(paths), func(i int) (got, error) {
		o, body, _, err := fetchOne(ctx, hc, http.MethodGet, "http://"+p.Addr.String()+paths[i], "", "")
		return got{o, body, err}, nil
	})
	var ends []int64
	first := int64(0)
	for i, r := range res {
		if r.err != nil {
			t.Fatalf("%s: %v", paths[i], r.err)
		}
		want, ok := content[paths[i]]
		switch {
		case !ok && r.o.Status != http.StatusNotFound:
			t.Errorf("%s: status %d, want 404", paths[i], r.o.Status)
		case ok && (r.o.Status != http.StatusOK || !bytes.Equal(r.body, want)):
			t.Errorf("%s: status %d, %d bytes; want 200 and the file's %d", paths[i], r.o.Status, len(r.body), len(want))
		}
		ends = append(ends, r.o.ResponseEnd)
		if first == 0 || r.o.Begin() < first {
			first = r.o.Begin()
		}
	}
	slices.Sort(ends)
	for k, e := range ends {
		if d := time.Duration(e - first); d < time.Duration(k+1)*service {
			t.Errorf("response %d ended %v after the first request began: one worker needs at least %v", k+1, d, time.Duration(k+1)*service)
		}
	}
}
