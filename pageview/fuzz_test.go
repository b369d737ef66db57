package pageview

import (
	"fmt"
	"testing"

	"github.com/rtmon/rtmon/reconstruct"
)

// FuzzGrouper feeds arbitrary transactions (times, components, URLs,
// Referers, content types, redirects, page bodies naming objects) in
// arbitrary completion order: every transaction must be forwarded exactly
// once, every record must keep the contract, and after Flush nothing may
// be left held.
func FuzzGrouper(f *testing.F) {
	f.Add([]byte("\x00\x10\x05\x05\x05\x01\x00\x01\x30\x05\x05\x05\x02\x01"))
	f.Add([]byte("\x00\x00\x05\x05\x05\x09\x00\x02\x08\x05\x05\x05\x12\x00\x01\x70\x05\x05\x05\x23\x01"))
	f.Add([]byte("\x00\x00\x05\x05\x05\x00\x08\x00\x08\x05\x05\x05\x00\x09\x00\x40\x05\x05\x05\x00\x18"))
	f.Fuzz(func(t *testing.T, data []byte) {
		urls := []string{"/", "/index.html", "/a.png", "/s.css", "/favicon.ico", "/beacon", "/two.html", "/go"}
		var txs []*reconstruct.Transaction
		for i := 0; len(data) >= 7 && i < 200; i++ {
			b := data[:7]
			data = data[7:]
			u := urls[int(b[5])%len(urls)]
			spec := txSpec{conn: fmt.Sprint("c", b[6]%5), idx: i, url: u, start: int64(b[1]) * 20, tconn: int64(b[2] % 50),
				tserver: int64(b[3]), ttransfer: int64(b[4])}
			if b[0]&1 != 0 {
				spec.ua = ua2
			}
			switch b[5] >> 4 & 3 {
			case 1:
				spec.ct = "text/html"
			case 2:
				spec.ct = "text/css"
			case 3:
				spec.ct = "image/png"
			}
			if b[5]&0x80 != 0 {
				spec.ref = "http://www.example.com" + urls[int(b[0]>>1)%len(urls)]
			}
			tx := mk(spec)
			if b[0]&0x10 != 0 && spec.ct == "text/html" {
				tx.Body = []byte(`<img src="` + urls[int(b[0]>>5)%len(urls)] + `"><link rel=stylesheet href=/s.css><iframe src=/two.html>`)
			}
			if spec.ct == "text/css" {
				tx.Body = []byte(`a{background:url(/a.png)}`)
			}
			if b[0]&0x40 != 0 {
				tx.Status, tx.Location = 302, urls[int(b[6])%len(urls)]
			}
			if b[0]&0x80 != 0 {
				tx.Method, tx.Status, tx.ContentType = "POST", 204, ""
			}
			if b[6]&0x80 != 0 {
				tx.SecFetchDest = []string{"document", "image", "empty", "iframe"}[b[6]>>5&3]
			}
			if b[6]&0x08 != 0 {
				// HTTPS without keys: no method, URL, status or type; a
				// host (SNI) of two.
				tx.Method, tx.URL, tx.Status, tx.ContentType, tx.Referer, tx.Body = "", "", 0, "", "", nil
				tx.Host = []string{"shop.example.test", "cdn.example.test"}[b[6]>>4&1]
				tx.Flags |= reconstruct.FlagTLS
			}
			txs = append(txs, tx)
		}
		c := newCollector(t)
		g := NewGrouper(Config{MaxPerClient: 3, MaxObjects: 20, MaxOrphans: 10}, nil, c)
		// Completion order: by End, as the tracker emits.
		order := make([]*reconstruct.Transaction, len(txs))
		copy(order, txs)
		for i := 1; i < len(order); i++ {
			for j := i; j > 0 && order[j].End < order[j-1].End; j-- {
				order[j], order[j-1] = order[j-1], order[j]
			}
		}
		for _, tx := range order {
			g.Transaction(tx)
		}
		g.Flush()
		if len(c.txs) != len(txs) {
			t.Fatalf("forwarded %d of %d", len(c.txs), len(txs))
		}
		if s := g.Stats(); s.Held != 0 || s.Open != 0 || s.Orphans != 0 || s.Pending != 0 {
			t.Fatalf("left after flush: %+v", s)
		}
		for _, p := range c.pvs {
			if p.Objects+p.AfterLoad+p.Redirects+1 != len(c.members[p.ID]) {
				t.Fatalf("pageview %s: %d objects + %d after load + %d redirects + container != %d members",
					p.ID, p.Objects, p.AfterLoad, p.Redirects, len(c.members[p.ID]))
			}
		}
	})
}
