package reconstruct

import (
	"encoding/binary"
	"strings"
	"unique"
)

// txRec is what a transaction in flight keeps of its Transaction record:
// the fields its packets set, under their record names. The rest (ids,
// endpoints, the client-side times) is derived when it is emitted
// (conn.transaction), so a transaction in flight does not carry a whole
// 512-byte record (issue 15).
type txRec struct {
	// shared is the request's values a client sends alike on every
	// request (method, Host, User-Agent, Accept, Sec-Fetch-Dest), packed
	// (packVals) and interned: the transactions of a server's clients
	// hold a few copies of them, not one each. own is the URL and
	// Referer, packed. See setReq.
	shared unique.Handle[string]
	own    string
	// resp is the response's Content-Type and Content-Encoding, packed
	// and interned as shared is (see setResp). Location, Body (only
	// pages' responses keep one), RetransBytes and HoleBytes (only lossy
	// ones have any) are in txRare.
	resp unique.Handle[string]

	RequestFirst, RequestLast   int64
	ResponseFirst, ResponseLast int64
	ResponseAcked, RequestAcked int64
	RequestBytes                int64
	ResponseBytes, BodyBytes    int64
	// Index and Status as int32: a connection's count of transactions
	// and a status code fit, and the small fields share 16 bytes.
	Index, Status int32
	Flags         Flags
	BodyCut       bool

	// upLost and bits are txState's, here in the padding: upLost the
	// copies of the request's first segment lost before the capture
	// point (a conn.pktLost, so an int8), bits its booleans (txFlags).
	upLost int8
	bits   txFlags
}

// contentType is the response's Content-Type.
func (r *txRec) contentType() string { return unpackVal(handleValue(r.resp), 0, 2) }

// contentEncoding is the response's Content-Encoding.
func (r *txRec) contentEncoding() string { return unpackVal(handleValue(r.resp), 1, 2) }

// setResp keeps the response's Content-Type and Content-Encoding.
func (r *txRec) setResp(contentType, contentEncoding string) {
	r.resp = internVals(contentType, contentEncoding)
}

// The request's header values, in the order reqVals gives them.
const (
	reqMethod = iota
	reqHost
	reqURL
	reqReferer
	reqUserAgent
	reqAccept
	reqFetchDest
	nReqVals
)

// reqOwn marks the request values kept in txRec.own, the ones a client's
// requests differ by; reqPos is each value's place in its packed string.
var (
	reqOwn = [nReqVals]bool{reqURL: true, reqReferer: true}
	reqPos = [nReqVals]int{reqMethod: 0, reqHost: 1, reqUserAgent: 2, reqAccept: 3, reqFetchDest: 4,
		reqURL: 0, reqReferer: 1}
)

const nSharedVals, nOwnVals = 5, 2

// reqVal is the request's header value i (reqMethod, ...).
func (r *txRec) reqVal(i int) string {
	if reqOwn[i] {
		return unpackVal(r.own, reqPos[i], nOwnVals)
	}
	return unpackVal(handleValue(r.shared), reqPos[i], nSharedVals)
}

// reqVals is all of the request's header values, for setReq to change
// some.
func (r *txRec) reqVals() (v [nReqVals]string) {
	for i := range v {
		v[i] = r.reqVal(i)
	}
	return v
}

// setReq makes v the request's header values.
func (r *txRec) setReq(v [nReqVals]string) {
	r.own = packVals(v[reqURL], v[reqReferer])
	r.shared = internVals(v[reqMethod], v[reqHost], v[reqUserAgent], v[reqAccept], v[reqFetchDest])
}

// packVals is vals in one string: the length of each but the last as a
// uvarint, then the values themselves; "" when all are empty.
func packVals(vals ...string) string {
	n := 0
	for _, v := range vals {
		n += len(v)
	}
	if n == 0 {
		return ""
	}
	var b strings.Builder
	b.Grow(n + len(vals)*binary.MaxVarintLen16)
	var lb [binary.MaxVarintLen64]byte
	for _, v := range vals[:len(vals)-1] {
		b.Write(binary.AppendUvarint(lb[:0], uint64(len(v))))
	}
	for _, v := range vals {
		b.WriteString(v)
	}
	return b.String()
}

// unpackVal is value i of the n that packVals packed into s.
func unpackVal(s string, i, n int) string {
	if s == "" {
		return ""
	}
	var lens [nSharedVals]int
	pos := 0
	for j := range n - 1 {
		l, k := uvarintString(s[pos:])
		lens[j], pos = int(l), pos+k
	}
	for j := range i {
		pos += lens[j]
	}
	if i == n-1 {
		return s[pos:]
	}
	return s[pos : pos+lens[i]]
}

// uvarintString is binary.Uvarint of a string's prefix, which packVals
// wrote, so well formed.
func uvarintString(s string) (uint64, int) {
	var x uint64
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b < 0x80 {
			return x | uint64(b)<<(7*i), i + 1
		}
		x |= uint64(b&0x7f) << (7 * i)
	}
	return x, len(s)
}

// internVals is vals packed (packVals) and interned: the zero Handle when
// all are empty.
func internVals(vals ...string) unique.Handle[string] {
	s := packVals(vals...)
	if s == "" {
		return unique.Handle[string]{}
	}
	return unique.Make(s)
}

// handleValue is h's string, "" for the zero Handle.
func handleValue(h unique.Handle[string]) string {
	if h == (unique.Handle[string]{}) {
		return ""
	}
	return h.Value()
}
