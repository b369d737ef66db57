package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/query"
)

// annotationClient talks to one test server: do sends a request with the
// given method, body, content type and extra headers.
type annotationClient struct {
	t  *testing.T
	ts *httptest.Server
}

func (a annotationClient) do(method, path, body, ctype string, hdr func(*http.Request)) (int, []byte) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.ts.URL+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if hdr != nil {
		hdr(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	return resp.StatusCode, readAll(a.t, resp)
}

func (a annotationClient) list(query string, hdr func(*http.Request)) annotationsResponse {
	a.t.Helper()
	code, body := a.do("GET", "/api/annotations?"+query, "", "", hdr)
	if code != http.StatusOK {
		a.t.Fatalf("GET annotations: %d %s", code, body)
	}
	var r annotationsResponse
	if err := json.Unmarshal(body, &r); err != nil {
		a.t.Fatal(err)
	}
	return r
}

func memoryStore(t *testing.T) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), "memory:", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func countAnnotations(t *testing.T, st store.Store) int {
	t.Helper()
	l, err := st.Annotations(context.Background(), query.AnnotationQuery{})
	if err != nil {
		t.Fatal(err)
	}
	return len(l)
}

// With a token: no credentials, no annotation; with them, it is stored and
// listed by range, bounded, and the cross-site ways a browser holding the
// login could be made to post are refused.
func TestAnnotationsAPIWithToken(t *testing.T) {
	st := memoryStore(t)
	_, ts := newTestServer(t, Config{Store: st, Annotations: st, Token: "s3cret"})
	c := annotationClient{t, ts}
	bearer := func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cret") }
	const at = "2026-12-01T10:00:00Z"

	if code, _ := c.do("POST", "/api/annotations", `{"text":"deploy"}`, "application/json", nil); code != http.StatusUnauthorized {
		t.Errorf("POST without token: %d, want 401", code)
	}
	if code, _ := c.do("GET", "/api/annotations", "", "", nil); code != http.StatusUnauthorized {
		t.Errorf("GET without token: %d, want 401", code)
	}
	code, body := c.do("POST", "/api/annotations", `{"text":"deploy v2","time":"`+at+`","tags":["deploy","web"],"class":"premium"}`,
		"application/json; charset=utf-8", bearer)
	if code != http.StatusCreated {
		t.Fatalf("POST with token: %d %s", code, body)
	}
	var made query.Annotation
	if err := json.Unmarshal(body, &made); err != nil {
		t.Fatal(err)
	}
	atMs := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).UnixMilli()
	if made.TimeMs != atMs || made.Source != query.SourceUser || made.Class != "premium" || len(made.Tags) != 2 || made.ID == "" {
		t.Errorf("stored %+v", made)
	}
	ns := func(ms int64) string { return fmt.Sprint(ms * int64(time.Millisecond)) }
	if r := c.list("from="+ns(atMs)+"&to="+ns(atMs+1), bearer); len(r.Annotations) != 1 || r.Annotations[0].ID != made.ID || !r.Writable {
		t.Errorf("range around it: %+v", r)
	}
	if r := c.list(fmt.Sprintf("from=%d", atMs*int64(time.Millisecond)+1), bearer); len(r.Annotations) != 0 {
		t.Errorf("range from 1 ns after it: %+v", r)
	}
	if r := c.list("from=0&to="+ns(atMs), bearer); len(r.Annotations) != 0 {
		t.Errorf("range up to it: %+v", r)
	}

	// A browser holding the login cookie, made to post by another page.
	cookie := func(r *http.Request) {
		r.AddCookie(&http.Cookie{Name: authCookie, Value: sessionCookie("s3cret", time.Now())})
	}
	crossSite := func(r *http.Request) { cookie(r); r.Header.Set("Origin", "https://evil.example") }
	for _, tc := range []struct {
		name, ctype string
		hdr         func(*http.Request)
		want        int
	}{
		{"form from another origin", "application/x-www-form-urlencoded", crossSite, http.StatusForbidden},
		{"form without Origin", "application/x-www-form-urlencoded", cookie, http.StatusUnsupportedMediaType},
		{"text/plain without Origin", "text/plain", cookie, http.StatusUnsupportedMediaType},
		{"no content type", "", bearer, http.StatusUnsupportedMediaType},
		{"form, no token", "application/x-www-form-urlencoded", nil, http.StatusUnauthorized},
	} {
		if code, body := c.do("POST", "/api/annotations", `{"text":"forged"}`, tc.ctype, tc.hdr); code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.want)
		}
	}
	// The preflight a script on another origin needs for a JSON POST is
	// never approved.
	code, _ = c.do("OPTIONS", "/api/annotations", "", "", func(r *http.Request) {
		r.Header.Set("Origin", "https://evil.example")
		r.Header.Set("Access-Control-Request-Method", "POST")
	})
	if code < 400 {
		t.Errorf("preflight: %d, want a refusal", code)
	}
	if n := countAnnotations(t, st); n != 1 {
		t.Errorf("%d annotations stored, want only the authorized one", n)
	}

	for _, body := range []string{`{"text":""}`, `{"text":"x","source":"rtmon"}`, `{"text":"x","time":"yesterday"}`, `{"text":"x","time":-3}`, `not json`,
		`{"text":"x","tags":[` + strings.Repeat(`"t",`, 100) + `"t"]}`} {
		if code, resp := c.do("POST", "/api/annotations", body, "application/json", bearer); code != http.StatusBadRequest {
			t.Errorf("POST %.40s: %d %s, want 400", body, code, resp)
		}
	}
	if code, _ := c.do("POST", "/api/annotations", `{"text":"`+strings.Repeat("x", maxAnnotationBody)+`"}`, "application/json", bearer); code != http.StatusBadRequest {
		t.Errorf("oversized body: %d, want 400", code)
	}
}

// Basic auth: the credentials a browser would attach to a cross-site form
// are not enough without the JSON type; with it, a hostile text is stored
// bounded and handed back as a JSON string.
func TestAnnotationsAPIBasicAuthAndHostileText(t *testing.T) {
	st := memoryStore(t)
	_, ts := newTestServer(t, Config{Store: st, Annotations: st, BasicAuth: "ops:pw"})
	c := annotationClient{t, ts}
	basic := func(r *http.Request) { r.SetBasicAuth("ops", "pw") }
	if code, _ := c.do("POST", "/api/annotations", `{"text":"x"}`, "application/json", func(r *http.Request) { r.SetBasicAuth("ops", "no") }); code != http.StatusUnauthorized {
		t.Errorf("wrong password: %d", code)
	}
	if code, _ := c.do("POST", "/api/annotations", "text=x", "application/x-www-form-urlencoded", basic); code != http.StatusUnsupportedMediaType {
		t.Errorf("form with basic auth: %d, want 415", code)
	}
	hostile := "<script>alert(1)</script><img src=x onerror=alert(2)>" + strings.Repeat("ü", 5000)
	js, _ := json.Marshal(map[string]any{"text": hostile, "tags": []string{"<b>x</b>"}})
	code, body := c.do("POST", "/api/annotations", string(js), "application/json", basic)
	if code != http.StatusCreated {
		t.Fatalf("hostile POST: %d %s", code, body)
	}
	r := c.list("", basic)
	if len(r.Annotations) != 1 {
		t.Fatalf("listed %+v", r)
	}
	a := r.Annotations[0]
	if len(a.Text) > query.MaxAnnotationText || !utf8.ValidString(a.Text) || !strings.HasPrefix(hostile, a.Text) || len(a.Text) < 500 {
		t.Errorf("hostile text came back as %d bytes: %.80q", len(a.Text), a.Text)
	}
	if a.Tags[0] != "<b>x</b>" {
		t.Errorf("tags %q", a.Tags)
	}
}

// Without Config.Annotations: nothing to list, and a POST says why it is
// not taken.
func TestAnnotationsAPIWithoutAnnotator(t *testing.T) {
	_, ts := newTestServer(t, Config{Store: knownCapture(t)})
	c := annotationClient{t, ts}
	code, body := c.do("POST", "/api/annotations", `{"text":"deploy"}`, "application/json", nil)
	if code != http.StatusNotImplemented || !strings.Contains(string(body), "does not store annotations") {
		t.Errorf("POST: %d %s, want 501 with a reason", code, body)
	}
	if r := c.list("", nil); len(r.Annotations) != 0 || r.Writable {
		t.Errorf("GET: %+v", r)
	}
	if code, _ := c.do("GET", "/api/annotations?from=soon", "", "", nil); code != http.StatusBadRequest {
		t.Errorf("bad from: %d", code)
	}
}
