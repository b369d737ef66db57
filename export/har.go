package export

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

// HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/) as Chrome
// DevTools imports it. Every field the spec marks required is always
// present; unknown numbers are -1 as the spec asks. Custom fields start with
// "_" as the spec allows.

type harFile struct {
	Log harLog `json:"log"`
}

type harLog struct {
	Version string     `json:"version"`
	Creator harCreator `json:"creator"`
	Pages   []harPage  `json:"pages"`
	Entries []harEntry `json:"entries"`
}

type harCreator struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type harPage struct {
	StartedDateTime string         `json:"startedDateTime"`
	ID              string         `json:"id"`
	Title           string         `json:"title"`
	PageTimings     harPageTimings `json:"pageTimings"`
	Comment         string         `json:"comment,omitempty"`
}

type harPageTimings struct {
	OnContentLoad float64 `json:"onContentLoad"`
	OnLoad        float64 `json:"onLoad"`
}

type harEntry struct {
	Pageref         string      `json:"pageref,omitempty"`
	StartedDateTime string      `json:"startedDateTime"`
	Time            float64     `json:"time"`
	Request         harRequest  `json:"request"`
	Response        harResponse `json:"response"`
	Cache           struct{}    `json:"cache"`
	Timings         harTimings  `json:"timings"`
	ServerIPAddress string      `json:"serverIPAddress,omitempty"`
	Connection      string      `json:"connection,omitempty"`
	// Chrome's own extension: bytes on the wire, shown as "transferred".
	TransferSize int64    `json:"_transferSize"`
	SYNLosses    int      `json:"_synLosses,omitempty"`
	SYNACKLosses int      `json:"_synAckLosses,omitempty"`
	Flags        []string `json:"_flags,omitempty"`
}

type harNV struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type harRequest struct {
	Method      string  `json:"method"`
	URL         string  `json:"url"`
	HTTPVersion string  `json:"httpVersion"`
	Cookies     []harNV `json:"cookies"` // always empty: never recorded
	Headers     []harNV `json:"headers"` // those the records keep
	QueryString []harNV `json:"queryString"`
	HeadersSize int64   `json:"headersSize"` // -1: not recorded
	BodySize    int64   `json:"bodySize"`    // -1: not recorded
}

type harResponse struct {
	Status      int        `json:"status"`
	StatusText  string     `json:"statusText"`
	HTTPVersion string     `json:"httpVersion"`
	Cookies     []harNV    `json:"cookies"` // always empty: never recorded
	Headers     []harNV    `json:"headers"` // Content-Type only
	Content     harContent `json:"content"`
	RedirectURL string     `json:"redirectURL"`
	HeadersSize int64      `json:"headersSize"` // -1 when the record does not say
	BodySize    int64      `json:"bodySize"`
}

type harContent struct {
	Size     int64  `json:"size"`
	MimeType string `json:"mimeType"`
}

type harTimings struct {
	Blocked float64 `json:"blocked"`
	DNS     float64 `json:"dns"`
	Connect float64 `json:"connect"`
	Send    float64 `json:"send"`
	Wait    float64 `json:"wait"`
	Receive float64 `json:"receive"`
	SSL     float64 `json:"ssl"`
}

// harVersion is what we claim for the HTTP version: rtmon parses HTTP/1.x
// and the records do not keep the minor version.
const harVersion = "HTTP/1.1"

// maxQueryParams bounds the query string split out of one (attacker-chosen) URL.
const maxQueryParams = 256

// harTime formats ns since the epoch as ISO 8601 with milliseconds.
func harTime(ns int64) string {
	return time.Unix(0, ns).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// harMS converts ns to ms rounded to the µs, so sums print cleanly.
func harMS(ns int64) float64 { return math.Round(float64(ns)/1e3) / 1e3 }

// WriteHAR writes one pageview (or, with pv nil, stand-alone transactions) as
// a HAR 1.2 log. conns is optional: connection records by id add SYN loss
// counts to the entries of the transactions that opened them.
//
// Timings come from the client-perceived components: connect = Tconn +
// Ttls (-1 on a reused connection), ssl = Ttls (HAR 1.2 counts it within
// connect; -1 without TLS), send = Trequest, wait = Tserver, receive =
// Ttransfer; blocked and dns are -1 (not visible at the server side).
// time is their sum, which equals the transaction's Total.
func WriteHAR(w io.Writer, pv *pageview.Pageview, txs []*reconstruct.Transaction, conns map[string]*reconstruct.Connection) error {
	f := harFile{Log: harLog{Version: "1.2", Creator: harCreator{Name: "rtmon", Version: "dev"},
		Pages: []harPage{}, Entries: make([]harEntry, 0, len(txs))}}
	pageref := ""
	if pv != nil {
		pageref = pv.ID
		f.Log.Pages = append(f.Log.Pages, harPage{
			StartedDateTime: harTime(pv.Start), ID: pv.ID, Title: harURL(pv.Host, pv.URL, pv.Server.String()),
			PageTimings: harPageTimings{OnContentLoad: -1, OnLoad: harMS(pv.Total)},
			Comment: fmt.Sprintf("client %s class %s: connect %.3f ms, server %.3f ms, transfer %.3f ms, other %.3f ms (critical path)",
				pv.Client, pv.Class, harMS(pv.Tconn), harMS(pv.Tserver), harMS(pv.Ttransfer), harMS(pv.Tother)),
		})
	}
	for _, tx := range pageview.ByStart(txs) {
		f.Log.Entries = append(f.Log.Entries, harEntryOf(tx, pageref, conns))
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(&f); err != nil {
		return fmt.Errorf("write HAR: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write HAR: %w", err)
	}
	return nil
}

func harEntryOf(tx *reconstruct.Transaction, pageref string, conns map[string]*reconstruct.Connection) harEntry {
	server := tx.Server.String()
	u := harURL(tx.Host, tx.URL, server)
	e := harEntry{Pageref: pageref, StartedDateTime: harTime(tx.Start), ServerIPAddress: server,
		Connection: tx.ConnectionID, TransferSize: tx.ResponseBytes, Flags: tx.Flags.Names()}
	method := tx.Method
	if method == "" {
		method = "GET" // a response without its request: the likeliest
	}
	e.Request = harRequest{Method: method, URL: u, HTTPVersion: harVersion, Cookies: []harNV{},
		Headers: []harNV{}, QueryString: harQuery(u), HeadersSize: -1, BodySize: -1}
	for _, h := range [...]harNV{{"Host", tx.Host}, {"Referer", tx.Referer}, {"User-Agent", tx.UserAgent}, {"Accept", tx.Accept}} {
		if h.Value != "" {
			e.Request.Headers = append(e.Request.Headers, h)
		}
	}
	mime := tx.ContentType
	if mime == "" {
		mime = "x-unknown" // what DevTools itself writes for an unknown type
	}
	e.Response = harResponse{Status: tx.Status, StatusText: http.StatusText(tx.Status), HTTPVersion: harVersion,
		Cookies: []harNV{}, Headers: []harNV{}, Content: harContent{Size: tx.BodyBytes, MimeType: mime},
		HeadersSize: -1, BodySize: tx.BodyBytes}
	if tx.ContentType != "" {
		e.Response.Headers = append(e.Response.Headers, harNV{"Content-Type", tx.ContentType})
	}
	if hs := tx.ResponseBytes - tx.BodyBytes; tx.ResponseBytes > 0 && hs >= 0 {
		e.Response.HeadersSize = hs
	}
	connect, ssl := float64(-1), float64(-1) // reused connection (or handshake not captured)
	if tx.Tconn > 0 || tx.Ttls > 0 {
		connect = harMS(tx.Tconn + tx.Ttls)
	}
	if tx.Ttls > 0 {
		ssl = harMS(tx.Ttls)
	}
	e.Timings = harTimings{Blocked: -1, DNS: -1, Connect: connect, Send: harMS(max(tx.Trequest, 0)),
		Wait: harMS(max(tx.Tserver, 0)), Receive: harMS(max(tx.Ttransfer, 0)), SSL: ssl}
	e.Time = harSum(e.Timings)
	if c := conns[tx.ConnectionID]; c != nil && tx.Index == 0 {
		e.SYNLosses, e.SYNACKLosses = c.SYNLosses, c.SYNACKLosses
	}
	return e
}

// harSum is the entry time: the sum of the timings that apply, as the spec
// defines it.
func harSum(t harTimings) float64 {
	var s float64
	for _, v := range [...]float64{t.Blocked, t.DNS, t.Connect, t.Send, t.Wait, t.Receive} {
		if v > 0 {
			s += v
		}
	}
	// ssl is part of connect in HAR 1.2, so it is not added again.
	return s
}

// harURL makes an absolute http URL from a request target.
func harURL(host, target, server string) string {
	if l := strings.ToLower(target[:min(len(target), 8)]); strings.HasPrefix(l, "http://") || l == "https://" {
		return target
	}
	if host == "" {
		host = server
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
	}
	if !strings.HasPrefix(target, "/") {
		target = "/" + target
	}
	return "http://" + host + target
}

// harQuery splits a URL's query into name/value pairs, decoded where they
// decode and raw where they do not.
func harQuery(u string) []harNV {
	out := []harNV{}
	i := strings.IndexByte(u, '?')
	if i < 0 {
		return out
	}
	q := u[i+1:]
	if j := strings.IndexByte(q, '#'); j >= 0 {
		q = q[:j]
	}
	for part := range strings.SplitSeq(q, "&") {
		if part == "" {
			continue
		}
		if len(out) == maxQueryParams {
			break
		}
		name, value, _ := strings.Cut(part, "=")
		out = append(out, harNV{unescape(name), unescape(value)})
	}
	return out
}

func unescape(s string) string {
	if v, err := url.QueryUnescape(s); err == nil {
		return v
	}
	return s
}

// HARFileName is the file a pageview's HAR goes to: its id when that is a
// plain token (ids are hex), else a hash of it. Never anything from a URL.
func HARFileName(pageviewID string) string {
	ok := pageviewID != "" && len(pageviewID) <= 64
	for i := 0; ok && i < len(pageviewID); i++ {
		c := pageviewID[i]
		ok = c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_'
	}
	if !ok {
		pageviewID = pageview.ID("unsafe-id\x00" + pageviewID)
	}
	return pageviewID + ".har"
}

// WriteHARDir writes one pageview's HAR to dir/ID.har (see HARFileName),
// creating dir if needed.
func WriteHARDir(dir string, pv *pageview.Pageview, txs []*reconstruct.Transaction, conns map[string]*reconstruct.Connection) error {
	if pv == nil {
		return fmt.Errorf("write HAR to %s: no pageview", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create HAR directory: %w", err)
	}
	path := filepath.Join(dir, HARFileName(pv.ID))
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create HAR file: %w", err)
	}
	if err := WriteHAR(f, pv, txs, conns); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// HARDir is a pageview.Sink writing one HAR file per pageview (from
// Pageview.Transactions) into a directory. Transactions and connections pass
// through untouched; it keeps the first error for Close.
type HARDir struct {
	dir     string
	written int
	err     error
}

// NewHARDir creates dir if needed.
func NewHARDir(dir string) (*HARDir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create HAR directory: %w", err)
	}
	return &HARDir{dir: dir}, nil
}

func (*HARDir) Connection(*reconstruct.Connection)   {}
func (*HARDir) Transaction(*reconstruct.Transaction) {}

// Pageview writes the pageview's HAR file.
func (h *HARDir) Pageview(pv *pageview.Pageview) {
	if h.err != nil {
		return
	}
	if h.err = WriteHARDir(h.dir, pv, pv.Transactions, nil); h.err == nil {
		h.written++
	}
}

// Written counts the files written.
func (h *HARDir) Written() int { return h.written }

// Close reports the first write error.
func (h *HARDir) Close() error { return h.err }
