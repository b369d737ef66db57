package store

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rtmon/rtmon/addrpattern"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

// Column kinds map one Go type to one type per engine; rows are built
// column by column (colSet) and fed to both engines' inserts, so both see
// identical values.
type colKind int

const (
	kInt64 colKind = iota
	kInt32
	kUInt32
	kUInt16
	kString
	kDate
	kInt64Array
)

var chTypes = map[colKind]string{kInt64: "Int64", kInt32: "Int32", kUInt32: "UInt32", kUInt16: "UInt16",
	kString: "String", kDate: "Date", kInt64Array: "Array(Int64)"}
var duckTypes = map[colKind]string{kInt64: "BIGINT", kInt32: "INTEGER", kUInt32: "UINTEGER", kUInt16: "USMALLINT",
	kString: "VARCHAR", kDate: "DATE", kInt64Array: "BIGINT[]"}

type column struct {
	name string
	kind colKind
}

type table struct {
	name string
	cols []column
}

func cols(spec string) []column {
	var out []column
	for _, f := range strings.Fields(spec) {
		name, k, _ := strings.Cut(f, ":")
		kind := map[string]colKind{"i64": kInt64, "i32": kInt32, "u32": kUInt32, "u16": kUInt16,
			"s": kString, "d": kDate, "a": kInt64Array}[k]
		out = append(out, column{name, kind})
	}
	return out
}

// start_ns is the range-query time of every table: transaction Start,
// pageview Start, connection FirstSeen. day is its UTC date, for
// partitioning. Addresses are stored as 32 hex digits of the 16-byte (IPv4
// mapped) form so that a prefix is a string range both engines compare the
// same way.
var (
	connTable = table{"connections", cols(`day:d sensor:s id:s iface:i32 client:s client_port:u16 server:s server_port:u16 class:s
		syn_times:a synack_times:a established:i64 start_ns:i64 last_seen:i64 closed:i64
		syn_losses:i32 synack_losses:i32 syn_loss_gap:i64 synack_loss_gap:i64 rtt_client:i64 rtt_server:i64 tconn:i64
		bytes_client:i64 bytes_server:i64 retrans_bytes:i64 transactions:i32 mss_client:i32 mss_server:i32 flags:u32
		tls_version:u16 sni:s alpn:s ttls:i64`)}
	txTable = table{"transactions", cols(`day:d sensor:s id:s connection_id:s idx:i32 iface:i32 client:s client_port:u16 server:s server_port:u16 class:s
		pageview_id:s request_first:i64 request_last:i64 response_first:i64 response_last:i64 response_acked:i64 start_ns:i64 end_ns:i64
		tconn:i64 trequest:i64 tserver:i64 ttransfer:i64 total:i64 rtt_client:i64 retrans_bytes:i64 request_bytes:i64
		response_bytes:i64 body_bytes:i64 method:s host:s url:s status:u16 content_type:s referer:s user_agent:s accept:s
		hole_bytes:i64 flags:u32
		request_acked:i64
		ttls:i64
		location:s sec_fetch_dest:s`)}
	pvTable = table{"pageviews", cols(`day:d sensor:s id:s iface:i32 client:s user_agent:s class:s priority:s server:s host:s url:s status:u16
		container_id:s start_ns:i64 end_ns:i64 total:i64 tconn:i64 tserver:i64 ttransfer:i64 tother:i64 objects:i32 connections:i32
		bytes:i64 syn_losses:i32 synack_losses:i32 retrans_bytes:i64 flags:u32
		after_load:i32 redirects:i32 evidence:s
		sensors:s
		declared:s`)}
	tables = []table{connTable, txTable, pvTable}
)

func (t table) names() []string {
	out := make([]string, len(t.cols))
	for i, c := range t.cols {
		out[i] = c.name
	}
	return out
}

// selectList is the column list read back (day excluded).
func (t table) selectList() string { return strings.Join(t.names()[1:], ", ") }

// Bounds on strings from the network: enough for real URLs and headers,
// small enough that a hostile client cannot bloat the store. Strings are
// also made valid UTF-8 (DuckDB VARCHAR requires it; ClickHouse would take
// bytes, but then the engines would disagree).
const (
	maxID          = 128
	maxURL         = 2048
	maxHost        = 255
	maxHeader      = 512 // User-Agent, Accept, Content-Type
	maxReferer     = 2048
	maxMethod      = 16
	maxClass       = 64
	maxSensorOrPri = 64
)

func clip(s string, n int) string {
	if len(s) > n {
		s = s[:n]
		// Do not leave half a UTF-8 sequence at the cut.
		for len(s) > 0 && !utf8.ValidString(s[len(s)-min(len(s), 3):]) {
			r, size := utf8.DecodeLastRuneInString(s)
			if r != utf8.RuneError || size != 1 {
				break
			}
			s = s[:len(s)-1]
		}
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
		if len(s) > n {
			s = clip(s, n)
		}
	}
	return s
}

// addrKey encodes an address as 32 lowercase hex digits of its 16-byte form.
func addrKey(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	b := a.As16()
	return hex.EncodeToString(b[:])
}

func keyAddr(s string) netip.Addr {
	if len(s) != 32 {
		return netip.Addr{}
	}
	var b [16]byte
	if _, err := hex.Decode(b[:], []byte(s)); err != nil {
		return netip.Addr{}
	}
	return netip.AddrFrom16(b).Unmap()
}

// clientCond is the search condition for a client pattern (package
// addrpattern, as classes and what-if rules read it) over the 32-hex-digit
// address keys: a prefix is a key range, an RLM wildcard with inner "*"
// octets a LIKE with "_" for their digits; IPv6 patterns leave out the
// ::ffff: range IPv4 keys live in, and "!=" negates the whole.
func clientCond(pattern string) (string, []any, error) {
	p, err := addrpattern.Parse(pattern)
	if err != nil {
		return "", nil, fmt.Errorf("client %q: %w", pattern, err)
	}
	k := p.Key()
	var cond string
	var args []any
	switch {
	case k.All:
		cond = "1 = 1"
	case k.Prefix:
		var hi [16]byte
		for i := range hi {
			hi[i] = k.Value[i] | ^k.Mask[i]
		}
		cond, args = "client >= ? AND client <= ?", []any{hex.EncodeToString(k.Value[:]), hex.EncodeToString(hi[:])}
	default:
		var like strings.Builder
		for i, m := range k.Mask {
			switch m {
			case 0xff:
				like.WriteString(hex.EncodeToString(k.Value[i : i+1]))
			case 0:
				like.WriteString("__")
			default:
				return "", nil, fmt.Errorf("client %q: a mask only whole octets may leave open", pattern)
			}
		}
		cond, args = "client LIKE ?", []any{like.String()}
	}
	if k.IPv6 {
		cond = "(" + cond + ") AND NOT (client >= ? AND client <= ?)"
		args = append(args, "00000000000000000000ffff00000000", "00000000000000000000ffffffffffff")
	}
	if k.Negated {
		cond = "NOT (" + cond + ")"
	}
	return cond, args, nil
}

func dayOf(ns int64) time.Time {
	d := ns / int64(24*time.Hour)
	if ns < 0 && ns%int64(24*time.Hour) != 0 {
		d--
	}
	return time.Unix(d*86400, 0).UTC()
}

func i64s(v []int64) []int64 {
	if v == nil {
		return []int64{}
	}
	return v
}

func connRow(c *colSet, sensor string, x *reconstruct.Connection) {
	c.row(x.FirstSeen, sensor, x.ID)
	c.I32(x.Interface)
	c.Endpoint(x.Client, x.ClientPort)
	c.Endpoint(x.Server, x.ServerPort)
	c.Str(clip(x.Class, maxClass))
	c.Arr(x.SYNTimes)
	c.Arr(x.SYNACKTimes)
	for _, v := range []int64{x.Established, x.FirstSeen, x.LastSeen, x.Closed} {
		c.I64(v)
	}
	c.I32(x.SYNLosses)
	c.I32(x.SYNACKLosses)
	for _, v := range []int64{x.SYNLossGap, x.SYNACKLossGap, x.RTTClient, x.RTTServer, x.Tconn, x.BytesClient, x.BytesServer, x.RetransBytes} {
		c.I64(v)
	}
	c.I32(x.Transactions)
	c.I32(x.MSSClient)
	c.I32(x.MSSServer)
	c.U32(uint32(x.Flags))
	c.U16(x.TLSVersion)
	c.Str(clip(x.SNI, maxHost))
	c.Str(clip(x.ALPN, maxMethod))
	c.I64(x.Ttls)
}

func txRow(c *colSet, sensor, class string, t *reconstruct.Transaction) {
	c.row(t.Start, sensor, t.ID)
	c.Str(clip(t.ConnectionID, maxID))
	c.I32(t.Index)
	c.I32(t.Interface)
	c.Endpoint(t.Client, t.ClientPort)
	c.Endpoint(t.Server, t.ServerPort)
	c.Str(clip(class, maxClass))
	c.Str(clip(t.PageviewID, maxID))
	for _, v := range [...]int64{t.RequestFirst, t.RequestLast, t.ResponseFirst, t.ResponseLast, t.ResponseAcked, t.Start, t.End,
		t.Tconn, t.Trequest, t.Tserver, t.Ttransfer, t.Total, t.RTTClient, t.RetransBytes, t.RequestBytes,
		t.ResponseBytes, t.BodyBytes} {
		c.I64(v)
	}
	c.Str(clip(t.Method, maxMethod))
	c.Str(clip(t.Host, maxHost))
	c.Str(clip(t.URL, maxURL))
	c.Status(t.Status)
	c.Str(clip(t.ContentType, maxHeader))
	c.Str(clip(t.Referer, maxReferer))
	c.Str(clip(t.UserAgent, maxHeader))
	c.Str(clip(t.Accept, maxHeader))
	c.I64(t.HoleBytes)
	c.U32(uint32(t.Flags))
	c.I64(t.RequestAcked)
	c.I64(t.Ttls)
	// What the pageview grouping reads besides the above, so that it can
	// run again from the store (package stitch).
	c.Str(clip(t.Location, maxURL))
	c.Str(clip(t.SecFetchDest, maxMethod))
}

func pvRow(c *colSet, sensor string, p *pageview.Pageview) {
	c.row(p.Start, sensor, p.ID)
	c.I32(p.Interface)
	c.Str(addrKey(p.Client))
	c.Str(clip(p.UserAgent, maxHeader))
	c.Str(clip(p.Class, maxClass))
	c.Str(clip(p.Priority, maxSensorOrPri))
	c.Str(addrKey(p.Server))
	c.Str(clip(p.Host, maxHost))
	c.Str(clip(p.URL, maxURL))
	c.Status(p.Status)
	c.Str(clip(p.ContainerID, maxID))
	for _, v := range [...]int64{p.Start, p.End, p.Total, p.Tconn, p.Tserver, p.Ttransfer, p.Tother} {
		c.I64(v)
	}
	c.I32(p.Objects)
	c.I32(p.Connections)
	c.I64(p.Bytes)
	c.I32(p.SYNLosses)
	c.I32(p.SYNACKLosses)
	c.I64(p.RetransBytes)
	c.U32(uint32(p.Flags))
	c.I32(p.AfterLoad)
	c.I32(p.Redirects)
	c.Str(clip(p.Evidence, maxClass))
	// A single-sensor pageview lists its one sensor, as a stitched one
	// lists all of its own (package stitch): both have the same shape.
	sensors := strings.Join(p.Sensors, ",")
	if sensors == "" {
		sensors = sensor
	}
	c.Str(clip(sensors, maxHeader))
	// What the container's HTML and the page's stylesheets named, so that
	// grouping again from the store (package stitch) has the same HTML
	// evidence; bounded and ASCII by construction, an over-long one
	// dropped rather than cut (a cut one would not decode).
	declared := p.Declared
	if len(declared) > pageview.MaxDeclaredLen {
		declared = ""
	}
	c.Str(declared)
}

// int64List scans an array column from either driver.
type int64List []int64

func (l *int64List) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*l = nil
	case []int64:
		*l = append((*l)[:0], v...)
	case []any:
		out := make([]int64, 0, len(v))
		for _, x := range v {
			n, ok := x.(int64)
			if !ok {
				return fmt.Errorf("array element %T, want int64", x)
			}
			out = append(out, n)
		}
		*l = out
	default:
		return fmt.Errorf("array column %T, want []int64", src)
	}
	if len(*l) == 0 {
		*l = nil
	}
	return nil
}

// Scanned narrow integers go through int64 so both drivers' types fit.
type rowScanner interface{ Scan(dest ...any) error }

func scanConn(r rowScanner, sensor *string) (*reconstruct.Connection, error) {
	c := &reconstruct.Connection{}
	var client, server string
	var cport, sport, iface, synl, synackl, ntx, mssc, msss, flags, tlsVersion int64
	var syn, synack int64List
	err := r.Scan(sensor, &c.ID, &iface, &client, &cport, &server, &sport, &c.Class, &syn, &synack, &c.Established,
		&c.FirstSeen, &c.LastSeen, &c.Closed, &synl, &synackl, &c.SYNLossGap, &c.SYNACKLossGap, &c.RTTClient,
		&c.RTTServer, &c.Tconn, &c.BytesClient, &c.BytesServer, &c.RetransBytes, &ntx, &mssc, &msss, &flags,
		&tlsVersion, &c.SNI, &c.ALPN, &c.Ttls)
	if err != nil {
		return nil, fmt.Errorf("scan connection: %w", err)
	}
	c.Interface, c.Client, c.ClientPort, c.Server, c.ServerPort = int(iface), keyAddr(client), uint16(cport), keyAddr(server), uint16(sport)
	c.SYNTimes, c.SYNACKTimes = syn, synack
	c.SYNLosses, c.SYNACKLosses, c.Transactions, c.MSSClient, c.MSSServer = int(synl), int(synackl), int(ntx), int(mssc), int(msss)
	c.Flags, c.TLSVersion = reconstruct.Flags(flags), uint16(tlsVersion)
	return c, nil
}

func scanTx(r rowScanner, sensor *string) (*reconstruct.Transaction, error) {
	t := &reconstruct.Transaction{}
	var client, server string
	var idx, iface, cport, sport, status, flags int64
	err := r.Scan(sensor, &t.ID, &t.ConnectionID, &idx, &iface, &client, &cport, &server, &sport, &t.Class,
		&t.PageviewID, &t.RequestFirst, &t.RequestLast, &t.ResponseFirst, &t.ResponseLast, &t.ResponseAcked, &t.Start, &t.End,
		&t.Tconn, &t.Trequest, &t.Tserver, &t.Ttransfer, &t.Total, &t.RTTClient, &t.RetransBytes, &t.RequestBytes,
		&t.ResponseBytes, &t.BodyBytes, &t.Method, &t.Host, &t.URL, &status, &t.ContentType, &t.Referer, &t.UserAgent,
		&t.Accept, &t.HoleBytes, &flags, &t.RequestAcked, &t.Ttls, &t.Location, &t.SecFetchDest)
	if err != nil {
		return nil, fmt.Errorf("scan transaction: %w", err)
	}
	t.Index, t.Interface, t.Client, t.ClientPort, t.Server, t.ServerPort = int(idx), int(iface), keyAddr(client), uint16(cport), keyAddr(server), uint16(sport)
	t.Status, t.Flags = int(status), reconstruct.Flags(flags)
	return t, nil
}

func scanPv(r rowScanner, sensor *string) (*pageview.Pageview, error) {
	p := &pageview.Pageview{}
	var client, server, sensors string
	var iface, status, objs, conns, synl, synackl, flags, after, redirs int64
	err := r.Scan(sensor, &p.ID, &iface, &client, &p.UserAgent, &p.Class, &p.Priority, &server, &p.Host, &p.URL, &status,
		&p.ContainerID, &p.Start, &p.End, &p.Total, &p.Tconn, &p.Tserver, &p.Ttransfer, &p.Tother, &objs, &conns,
		&p.Bytes, &synl, &synackl, &p.RetransBytes, &flags, &after, &redirs, &p.Evidence, &sensors, &p.Declared)
	if err != nil {
		return nil, fmt.Errorf("scan pageview: %w", err)
	}
	p.Interface, p.Client, p.Server, p.Status = int(iface), keyAddr(client), keyAddr(server), int(status)
	p.Objects, p.Connections, p.SYNLosses, p.SYNACKLosses = int(objs), int(conns), int(synl), int(synackl)
	p.AfterLoad, p.Redirects = int(after), int(redirs)
	p.Flags = reconstruct.Flags(flags)
	if sensors != "" {
		p.Sensors = strings.Split(sensors, ",")
	}
	return p, nil
}
