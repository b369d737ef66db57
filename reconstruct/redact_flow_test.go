package reconstruct_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct"
)

// The configured redaction (more names, whole queries) is applied to URL
// and Referer before the records leave the tracker.
func TestConfiguredRedactionInRecords(t *testing.T) {
	req := []byte("GET /s?q=shoes&ticket=T-1 HTTP/1.1\r\nHost: x\r\nReferer: http://x/list?ticket=T-1&page=2\r\n\r\n")
	for _, c := range []struct {
		red           reconstruct.URLRedaction
		url, referrer string
	}{
		{reconstruct.URLRedaction{Params: []string{"ticket"}}, "/s?q=shoes&ticket=REDACTED", "http://x/list?ticket=REDACTED&page=2"},
		{reconstruct.URLRedaction{WholeQuery: true}, "/s?REDACTED", "http://x/list?REDACTED"},
		{reconstruct.URLRedaction{}, "/s?q=shoes&ticket=T-1", "http://x/list?ticket=T-1&page=2"},
	} {
		f := newFlow(reconstruct.Config{Redaction: c.red})
		f.handshake()
		f.exchange(req, okResponse, f.sNext)
		f.send(true, capture.FlagACK, f.cNext, f.sNext, nil)
		f.finish(t)
		tx := one(t, "transaction", f.out.txs)
		if tx.URL != c.url || tx.Referer != c.referrer {
			t.Errorf("%+v: URL %q Referer %q, want %q %q", c.red, tx.URL, tx.Referer, c.url, c.referrer)
		}
	}
}

// Authorization, Cookie and Set-Cookie values (and other credential
// headers) are kept nowhere in a record, not even with KeepURLSecrets:
// the parser keeps only the headers it names.
func TestCredentialHeadersNeverKept(t *testing.T) {
	secrets := []string{"QWxhZGRpbjpvcGVu", "c00kie-v4lue", "s3t-c00kie", "pr0xy-cred", "xapi-k3y", "bearer-t0k3n"}
	req := []byte("GET /private HTTP/1.1\r\nHost: x\r\nAuthorization: Basic " + secrets[0] + "\r\n" +
		"Cookie: SID=" + secrets[1] + "; theme=dark\r\nProxy-Authorization: Basic " + secrets[3] + "\r\n" +
		"X-Api-Key: " + secrets[4] + "\r\nX-Auth-Token: " + secrets[5] + "\r\n\r\n")
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nSet-Cookie: SID=" + secrets[2] +
		"; HttpOnly\r\nContent-Length: 2\r\n\r\nok")
	for _, keep := range []bool{false, true} {
		f := newFlow(reconstruct.Config{KeepURLSecrets: keep})
		f.handshake()
		f.exchange(req, resp, f.sNext)
		f.send(true, capture.FlagACK, f.cNext, f.sNext, nil)
		f.finish(t)
		tx := one(t, "transaction", f.out.txs)
		if tx.Status != 200 || tx.URL != "/private" {
			t.Fatalf("keep %v: the exchange was not reconstructed: %+v", keep, tx)
		}
		js, err := json.Marshal(struct {
			C any `json:"c"`
			T any `json:"t"`
		}{f.out.conns, f.out.txs})
		if err != nil {
			t.Fatal(err)
		}
		// %#v shows the fields records files leave out (json:"-") too.
		all := string(js) + fmt.Sprintf("%#v %#v", *tx, *one(t, "connection", f.out.conns))
		for _, s := range secrets {
			if strings.Contains(all, s) {
				t.Errorf("keep %v: %q is in the records", keep, s)
			}
		}
	}
}

// With IDKey the connection id is keyed: the same for the same key (so
// re-ingesting dedupes), different without it or under another key, and
// as long; transaction ids follow it.
func TestKeyedConnectionIDs(t *testing.T) {
	ids := map[string]string{}
	for name, key := range map[string][]byte{"none": nil, "k1": []byte("key one"), "k1 again": []byte("key one"), "k2": []byte("key two")} {
		f := newFlow(reconstruct.Config{IDKey: key})
		f.handshake()
		f.exchange([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), okResponse, f.sNext)
		f.send(true, capture.FlagACK, f.cNext, f.sNext, nil)
		f.finish(t)
		c, tx := one(t, "connection", f.out.conns), one(t, "transaction", f.out.txs)
		if len(c.ID) != 16 || tx.ConnectionID != c.ID || tx.ID != c.ID+"-0" {
			t.Errorf("%s: connection id %q, transaction %q of %q", name, c.ID, tx.ID, tx.ConnectionID)
		}
		ids[name] = c.ID
	}
	if ids["k1"] != ids["k1 again"] || ids["k1"] == ids["none"] || ids["k1"] == ids["k2"] || ids["k2"] == ids["none"] {
		t.Errorf("ids by key: %v", ids)
	}
}
