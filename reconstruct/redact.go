package reconstruct

import (
	"net/url"
	"strings"
)

// Redacted stands for a secret taken out of a captured URL.
const Redacted = "REDACTED"

// RedactURL takes credentials out of a captured request target or Referer
// before anything stores, exports or shows it: the password of userinfo
// ("user:pass@host") and the values of query and fragment parameters whose
// names say they are secrets (token, password, api_key, signature,
// session id, ...; see secretParam), and a path's ";jsessionid=". The rest
// is kept byte for byte, so paths and the other parameters still identify
// what was requested. A URL with nothing to redact is returned as is,
// unallocated; redacting twice changes nothing.
func RedactURL(u string) string { return URLRedaction{}.Redact(u) }

// URLRedaction is what is taken out of URLs and Referers beyond
// RedactURL's built-in list. The zero value is RedactURL.
type URLRedaction struct {
	// Params are more parameter names whose values are secrets: a site's
	// own credential names ("ticket", "nonce"). They match whole names,
	// ignoring case, after %-decoding, so adding "uid" leaves "fluid".
	Params []string
	// WholeQuery replaces each query and fragment whole by Redacted
	// ("/search?REDACTED"): for sites whose parameters name people,
	// searches or orders rather than credentials. Paths are kept.
	WholeQuery bool
}

// Redact is RedactURL with r's additions; like it, redacting twice
// changes nothing.
func (r URLRedaction) Redact(u string) string {
	if !strings.ContainsAny(u, "?#;@") {
		return u
	}
	out := u
	if rest, scheme, ok := cutAuthority(out); ok {
		host, tail := rest, ""
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			host, tail = rest[:i], rest[i:]
		}
		if at := strings.LastIndexByte(host, '@'); at >= 0 {
			if colon := strings.IndexByte(host[:at], ':'); colon >= 0 && host[colon+1:at] != Redacted {
				host = host[:colon+1] + Redacted + host[at:]
			}
		}
		out = scheme + host + r.redactPathQuery(tail)
	} else {
		out = r.redactPathQuery(out)
	}
	if out == u {
		return u
	}
	return out
}

// redact is the configured redaction unless the tracker keeps secrets.
func (t *Tracker) redact(u string) string {
	if t.cfg.KeepURLSecrets {
		return u
	}
	return t.cfg.Redaction.Redact(u)
}

// cutAuthority splits "scheme://authority..." (or "//authority...").
func cutAuthority(u string) (rest, scheme string, ok bool) {
	if i := strings.Index(u, "://"); i > 0 && !strings.ContainsAny(u[:i], "/?#") {
		return u[i+3:], u[:i+3], true
	}
	if strings.HasPrefix(u, "//") {
		return u[2:], "//", true
	}
	return u, "", false
}

// redactPathQuery redacts a path's ;jsessionid= and the secret parameters
// of its query and fragment (or the whole of each, with WholeQuery).
func (r URLRedaction) redactPathQuery(s string) string {
	end := len(s)
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		end = i
	}
	path := s[:end]
	if i := indexASCIIFold(path, ";jsessionid="); i >= 0 {
		v := i + len(";jsessionid=")
		j := strings.IndexByte(path[v:], ';')
		if j < 0 {
			j = len(path) - v
		}
		if path[v:v+j] != Redacted && j > 0 {
			path = path[:v] + Redacted + path[v+j:]
		}
	}
	var b strings.Builder
	b.WriteString(path)
	rest := s[end:]
	for rest != "" {
		sep := rest[0] // '?' or '#'
		part := rest[1:]
		next := ""
		if sep == '?' {
			if i := strings.IndexByte(part, '#'); i >= 0 {
				part, next = part[:i], part[i:]
			}
		}
		b.WriteByte(sep)
		if r.WholeQuery && part != "" {
			b.WriteString(Redacted)
		} else {
			b.WriteString(r.redactParams(part))
		}
		rest = next
	}
	return b.String()
}

// indexASCIIFold is strings.Index ignoring ASCII case. strings.ToLower
// would not do: it rewrites invalid UTF-8 (a captured "\xff") to a longer
// U+FFFD, and an index into its result is not an index into s.
func indexASCIIFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		j := 0
		for ; j < len(sub); j++ {
			a, b := s[i+j], sub[j]
			if 'A' <= a && a <= 'Z' {
				a += 'a' - 'A'
			}
			if a != b {
				break
			}
		}
		if j == len(sub) {
			return i
		}
	}
	return -1
}

// redactParams replaces the values of secret parameters in a=b&c=d.
func (r URLRedaction) redactParams(q string) string {
	if !strings.ContainsRune(q, '=') {
		return q
	}
	var b strings.Builder
	for i, p := range strings.Split(q, "&") {
		if i > 0 {
			b.WriteByte('&')
		}
		k, v, ok := strings.Cut(p, "=")
		if ok && v != "" && v != Redacted && r.secretParam(k) {
			b.WriteString(k)
			b.WriteString("=" + Redacted)
			continue
		}
		b.WriteString(p)
	}
	return b.String()
}

// secretExact are parameter names that carry credentials; secretParts
// mark one anywhere in a name (user_token, new_password, client_secret).
var (
	secretExact = map[string]bool{
		"auth": true, "authorization": true, "pass": true, "pwd": true, "key": true, "apikey": true,
		"sig": true, "signature": true, "session": true, "sessionid": true, "session_id": true, "sid": true,
		"phpsessid": true, "jsessionid": true, "code": true, "otp": true, "jwt": true, "reset": true,
		"credential": true, "credentials": true, "x-amz-credential": true, "x-goog-credential": true,
	}
	secretParts = []string{"token", "passw", "passwd", "secret", "api_key", "apikey", "signature", "auth_"}
)

func (r URLRedaction) secretParam(name string) bool {
	k, err := url.QueryUnescape(name)
	if err != nil {
		k = name
	}
	k = strings.ToLower(strings.TrimSpace(k))
	if secretExact[k] {
		return true
	}
	for _, p := range r.Params {
		if strings.EqualFold(k, strings.TrimSpace(p)) {
			return true
		}
	}
	for _, s := range secretParts {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}
