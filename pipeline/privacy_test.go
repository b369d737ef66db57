package pipeline_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/rtmon/rtmon/internal/cryptopan"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/pipeline"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/query"
	"github.com/rtmon/rtmon/synth"
)

// privacyClients are the clients of the privacy capture and the classes
// their real addresses put them in.
var privacyClients = []struct {
	addr, class string
}{
	{"10.4.1.2", "premium"}, {"10.4.9.9", "premium"}, {"2001:db8:4::7", "premium6"}, {"192.0.2.9", "others"},
}

const privacyClasses = `classes:
  - {name: premium, priority: high, match: "IP.SRC == 10.4.*.*"}
  - {name: premium6, priority: high, match: "2001:db8:4::/48"}
default: {name: others, priority: low}
`

// writePrivacyCapture writes one page load per client: a search page
// whose query names a person and a token, requested with Authorization
// and Cookie, and an image the HTML names and whose Referer is the page.
func writePrivacyCapture(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := synth.NewWriter(f, synth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	page := "/search?q=alice+smith&token=s3cret"
	html := []byte(`<!DOCTYPE html><html><head></head><body><img src="/a.png?v=1"></body></html>`)
	for i, cl := range privacyClients {
		client := netip.MustParseAddr(cl.addr)
		server := netip.MustParseAddr("203.0.113.10")
		if client.Is6() {
			server = netip.MustParseAddr("2001:db8:ffff::1")
		}
		c := w.Conn(netip.AddrPortFrom(client, uint16(40000+i)), netip.AddrPortFrom(server, 80), 1000, 5000)
		t0 := float64(i)
		c.SYN(synth.T(t0))
		c.SYNACK(synth.T(t0 + 0.00003))
		c.ACK(synth.T(t0 + 0.05))
		c.Client(synth.T(t0+0.05), synth.Request("GET", "shop.example", page, "Authorization: Bearer b34rer-t0k3n",
			"Cookie: sid=c00kie-v4lue", "Accept: text/html"))
		c.Server(synth.T(t0+0.1), synth.Response(200, "text/html", html, "Set-Cookie: sid=s3t-c00kie"))
		c.ClientAck(synth.T(t0 + 0.15))
		c.Client(synth.T(t0+0.2), synth.Request("GET", "shop.example", "/a.png?v=1", "Referer: http://shop.example"+page,
			"Cookie: sid=c00kie-v4lue", "Accept: image/*"))
		c.Server(synth.T(t0+0.25), synth.Response(200, "image/png", make([]byte, 500)))
		c.ClientAck(synth.T(t0 + 0.3))
		c.ClientFIN(synth.T(t0 + 0.5))
		c.ServerFIN(synth.T(t0 + 0.5))
		c.ClientAck(synth.T(t0 + 0.55))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// records keeps every record that reaches an extra sink.
type records struct {
	mu    sync.Mutex
	conns []*reconstruct.Connection
	txs   []*reconstruct.Transaction
	pvs   []*pageview.Pageview
}

func (r *records) Connection(c *reconstruct.Connection) {
	r.mu.Lock()
	r.conns = append(r.conns, c)
	r.mu.Unlock()
}

func (r *records) Transaction(x *reconstruct.Transaction) {
	r.mu.Lock()
	r.txs = append(r.txs, x)
	r.mu.Unlock()
}

func (r *records) Pageview(p *pageview.Pageview) {
	r.mu.Lock()
	r.pvs = append(r.pvs, p)
	r.mu.Unlock()
}

// runPrivacy runs the pipeline over the privacy capture into record files,
// HAR files, a store and an extra sink, with whole queries redacted and,
// if keyFile is set, client addresses anonymized. It returns what the
// sink got and everything written or stored, as text.
func runPrivacy(t *testing.T, keyFile string) (*records, string) {
	t.Helper()
	dir := t.TempDir()
	in, classes := filepath.Join(dir, "p.pcap"), filepath.Join(dir, "classes.yaml")
	writePrivacyCapture(t, in)
	if err := os.WriteFile(classes, []byte(privacyClasses), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := pipeline.DefaultConfig()
	cfg.Files, cfg.ClassesFile, cfg.ClientKeyFile, cfg.Store = []string{in}, classes, keyFile, st
	cfg.Tracker.Redaction.WholeQuery = true
	cfg.OutDir, cfg.HARDir = filepath.Join(dir, "out"), filepath.Join(dir, "har")
	var got records
	cfg.Sinks = []pageview.Sink{&got}
	runToEnd(t, ctx, cfg)
	var all strings.Builder
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	for _, kind := range []query.Kind{query.Transactions, query.Pageviews} {
		res, err := st.Search(ctx, query.SearchQuery{Kind: kind, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res)
		all.Write(b)
	}
	conns, err := st.SearchConnections(ctx, query.ConnectionSearch{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(conns)
	all.Write(b)
	if len(files) < 4 || len(got.txs) != 2*len(privacyClients) || len(got.pvs) != len(privacyClients) ||
		len(conns.Connections) != len(privacyClients) {
		t.Fatalf("%d files, %d transactions, %d pageviews, %d stored connections", len(files), len(got.txs), len(got.pvs), len(conns.Connections))
	}
	return &got, all.String()
}

// With --anonymize-clients and --redact-query, no record written, stored
// or handed to a sink holds a real client address, a query string or a
// credential header; classes were still assigned from the real addresses,
// the mapping keeps prefixes, server addresses stay, and the page still
// gathers its object by Referer.
func TestAnonymizedClientsAndRedactedQueries(t *testing.T) {
	key := "00112233445566778899aabbccddeeff" + "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
	keyFile := filepath.Join(t.TempDir(), "client.key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, all := runPrivacy(t, keyFile)
	for _, s := range []string{"alice", "s3cret", "v=1", "b34rer-t0k3n", "c00kie-v4lue", "s3t-c00kie"} {
		if strings.Contains(all, s) {
			t.Errorf("%q is in the records", s)
		}
	}
	cp, err := cryptopan.New(mustHex(t, key))
	if err != nil {
		t.Fatal(err)
	}
	class := map[netip.Addr]string{} // by image
	for _, cl := range privacyClients {
		real := netip.MustParseAddr(cl.addr)
		if regexp.MustCompile(`[^0-9a-f:.]` + regexp.QuoteMeta(cl.addr) + `[^0-9a-f:.]`).MatchString(all) {
			t.Errorf("the real address %s is in the records", cl.addr)
		}
		class[cp.Addr(real)] = cl.class
	}
	check := func(kind, id string, client netip.Addr, gotClass string) {
		if want, ok := class[client]; !ok || gotClass != want {
			t.Errorf("%s %s: client %s class %q; want an anonymized client and its real class (%q)", kind, id, client, gotClass, want)
		}
	}
	for _, c := range got.conns {
		check("connection", c.ID, c.Client, c.Class)
		if c.Server != netip.MustParseAddr("203.0.113.10") && c.Server != netip.MustParseAddr("2001:db8:ffff::1") {
			t.Errorf("connection %s: server %s changed", c.ID, c.Server)
		}
	}
	for _, x := range got.txs {
		check("transaction", x.ID, x.Client, x.Class)
		if !strings.HasSuffix(x.URL, "?REDACTED") || x.Referer != "" && x.Referer != "http://shop.example/search?REDACTED" {
			t.Errorf("transaction %s: URL %q Referer %q", x.ID, x.URL, x.Referer)
		}
	}
	for _, p := range got.pvs {
		check("pageview", p.ID, p.Client, p.Class)
		if p.Objects != 1 || p.URL != "/search?REDACTED" {
			t.Errorf("pageview %s of %s: %d objects (%s), URL %q", p.ID, p.Client, p.Objects, p.Evidence, p.URL)
		}
	}
	a, b := cp.Addr(netip.MustParseAddr("10.4.1.2")), cp.Addr(netip.MustParseAddr("10.4.9.9"))
	if !netip.PrefixFrom(a, 20).Contains(b) || netip.PrefixFrom(a, 21).Contains(b) {
		t.Errorf("10.4.1.2 and 10.4.9.9 share 20 bits; their images %s and %s do not", a, b)
	}

	// The same capture without the key: the real addresses are there (so
	// the checks above could fail), and the ids differ (they were keyed).
	plain, plainAll := runPrivacy(t, "")
	if !strings.Contains(plainAll, `"10.4.1.2"`) {
		t.Error("without a key the real addresses are not in the records either: the test checks nothing")
	}
	if plain.conns[0].ID == got.conns[0].ID {
		t.Errorf("connection id %s is the same with and without the key", got.conns[0].ID)
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A key file must hold 32 bytes or 64 hex digits.
func TestClientKeyFileChecked(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"short": "00112233", "not hex": strings.Repeat("zz", 32), "empty": ""} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := pipeline.DefaultConfig()
		cfg.Files, cfg.ClientKeyFile = []string{"a.pcap"}, path
		if _, err := pipeline.New(cfg); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s key: New said %v", name, err)
		}
	}
	cfg := pipeline.DefaultConfig()
	cfg.Files, cfg.ClientKeyFile = []string{"a.pcap"}, filepath.Join(dir, "missing")
	if _, err := pipeline.New(cfg); err == nil {
		t.Error("a missing key file was taken")
	}
	raw := filepath.Join(dir, "raw")
	if err := os.WriteFile(raw, make([]byte, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.ClientKeyFile = raw
	if _, err := pipeline.New(cfg); err != nil {
		t.Errorf("32 raw bytes: %v", err)
	}
}
