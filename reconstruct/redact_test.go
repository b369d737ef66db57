package reconstruct

import "testing"

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
