package reconstruct

import (
	"net/url"
	"regexp"
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"/index.html":                                               "/index.html",
		"/search?q=shoes&page=2":                                    "/search?q=shoes&page=2",
		"/?token=s3cret":                                            "/?token=REDACTED",
		"/reset?email=a%40b.c&reset_token=abc":                      "/reset?email=a%40b.c&reset_token=REDACTED",
		"/login?user=x&password=hunter2&next=/":                     "/login?user=x&password=REDACTED&next=/",
		"/api?API_KEY=1&Key=2&apikey=3":                             "/api?API_KEY=REDACTED&Key=REDACTED&apikey=REDACTED",
		"/f?X-Amz-Signature=ab&X-Amz-Credential=c%2Fd&X-Amz-Date=1": "/f?X-Amz-Signature=REDACTED&X-Amz-Credential=REDACTED&X-Amz-Date=1",
		"/cb#access_token=abc&state=1":                              "/cb#access_token=REDACTED&state=1",
		"/p;jsessionid=ABC123?x=1":                                  "/p;jsessionid=REDACTED?x=1",
		"https://u:pw@example.com/a?sid=9#x":                        "https://u:REDACTED@example.com/a?sid=REDACTED#x",
		"http://example.com/?access%5Ftoken=z":                      "http://example.com/?access%5Ftoken=REDACTED",
		"//cdn.example/a.js?v=3&sig=q":                              "//cdn.example/a.js?v=3&sig=REDACTED",
		"/?token=":                                                  "/?token=",
		"/?token":                                                   "/?token",
		"/?a=1&&token=x&":                                           "/?a=1&&token=REDACTED&",
		"\xff;JSESSIONID=z":                                         "\xff;JSESSIONID=REDACTED", // invalid UTF-8 first: it panicked once
	} {
		got := RedactURL(in)
		if got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
		if again := RedactURL(got); again != got {
			t.Errorf("redacting %q again gave %q", got, again)
		}
	}
}

func FuzzRedactURL(f *testing.F) {
	for _, s := range []string{"/?token=a", "https://u:p@h/x;jsessionid=1?password=2#sig=3", "//h?&&==", "?#;@"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		r := RedactURL(u)
		if RedactURL(r) != r {
			t.Fatalf("not idempotent: %q -> %q -> %q", u, r, RedactURL(r))
		}
		if len(r) > len(u)+len(Redacted)*(len(u)+1) {
			t.Fatalf("grew without bound: %d -> %d", len(u), len(r))
		}
	})
}

func TestURLRedactionParams(t *testing.T) {
	r := URLRedaction{Params: []string{"ticket", " UID "}}
	for in, want := range map[string]string{
		"/a?ticket=T-1&uid=42&fluid=3": "/a?ticket=REDACTED&uid=REDACTED&fluid=3",
		"/a?TICKET=T-1#Uid=7":          "/a?TICKET=REDACTED#Uid=REDACTED",
		"/a?tick%65t=x":                "/a?tick%65t=REDACTED",  // %-encoded names too
		"/a?token=x&q=1":               "/a?token=REDACTED&q=1", // the built-in list stays
		"/a?ticketing=1":               "/a?ticketing=1",        // whole names only
	} {
		if got := r.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	if got := RedactURL("/a?ticket=T-1"); got != "/a?ticket=T-1" {
		t.Errorf("the extra names leaked into RedactURL: %q", got)
	}
}

func TestURLRedactionWholeQuery(t *testing.T) {
	r := URLRedaction{WholeQuery: true}
	for in, want := range map[string]string{
		"/search?q=x&token=y":    "/search?REDACTED",
		"/search":                "/search",
		"/search?":               "/search?",
		"/cb?a=1#access_token=z": "/cb?REDACTED#REDACTED",
		"/cb#x?y":                "/cb#REDACTED",
		"https://u:pw@h.example/p;jsessionid=1?name=Ann": "https://u:REDACTED@h.example/p;jsessionid=REDACTED?REDACTED",
		"http://h.example?q=1":                           "http://h.example?REDACTED",
	} {
		got := r.Redact(in)
		if got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
		if again := r.Redact(got); again != got {
			t.Errorf("redacting %q again gave %q", got, again)
		}
	}
}

// FuzzURLRedaction checks the configurable modes: idempotent, no query
// or fragment survives WholeQuery, and no value of an added name
// survives.
func FuzzURLRedaction(f *testing.F) {
	f.Add("/s?q=1&ticket=2#t", true, "ticket")
	f.Add("https://u:p@h?x#y?z", false, "x")
	f.Add("/a?%74icket=1&&=&ticket", false, "TICKET")
	f.Fuzz(func(t *testing.T, u string, whole bool, param string) {
		r := URLRedaction{Params: []string{param}, WholeQuery: whole}
		out := r.Redact(u)
		if again := r.Redact(out); again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", u, out, again)
		}
		if len(out) > len(u)+len(Redacted)*(len(u)+1) {
			t.Fatalf("grew without bound: %d -> %d", len(u), len(out))
		}
		tail := ""
		if i := strings.IndexAny(out, "?#"); i >= 0 {
			tail = out[i:]
		}
		if whole && !wholeQueryTail.MatchString(tail) {
			t.Fatalf("%q -> %q: query or fragment kept", u, out)
		}
		// Split as browsers and the redaction do: the query ends at '#',
		// the fragment runs to the end.
		query, frag, _ := strings.Cut(tail, "#")
		for _, part := range strings.Split(strings.TrimPrefix(query, "?")+"&"+frag, "&") {
			k, v, _ := strings.Cut(part, "=")
			if name, err := url.QueryUnescape(k); err == nil && v != "" && v != Redacted &&
				strings.TrimSpace(param) != "" && strings.EqualFold(strings.TrimSpace(name), strings.TrimSpace(param)) {
				t.Fatalf("%q -> %q: %s kept its value", u, out, param)
			}
		}
	})
}

var wholeQueryTail = regexp.MustCompile(`^(\?(REDACTED)?)?(#(REDACTED)?)?$`)
