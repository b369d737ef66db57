package http1

import "testing"

// Parsers sharing a budget hold no more header bytes together than it
// allows: the section that would pass it is cut like one past its own
// limit, a section parsed within one Feed needs no budget, and bytes come
// back when sections complete or parsers are released.
func TestHeaderBudget(t *testing.T) {
	b := &HeaderBudget{Max: 100}
	var ra, rb, rc recorder
	pa, pb, pc := NewParser(Request, 4096), NewParser(Request, 4096), NewParser(Request, 4096)
	for _, p := range []*Parser{pa, pb, pc} {
		p.SetBudget(b)
	}
	pa.Feed([]byte("GET /a HTTP/1.1\r\nX-Long: "+string(make([]byte, 40))), &ra) // 65 bytes held
	if b.Held() != 65 {
		t.Fatalf("held %d after a 65-byte partial header", b.Held())
	}
	pb.Feed([]byte("GET /b HTTP/1.1\r\nX-Long: aaaaaaaaaaaaaaa"), &rb) // 40 more: over 100
	if b.Held() != 65 || b.Refused != 1 || len(rb.desyncs()) != 1 || rb.desyncs()[0].Reason != ReasonHeaderTooLarge {
		t.Fatalf("held %d, refused %d, b's desyncs %v: want b's section cut", b.Held(), b.Refused, rb.desyncs())
	}
	pc.Feed([]byte("GET /c HTTP/1.1\r\nHost: x\r\n\r\n"), &rc) // whole in one Feed: parsed in place
	if len(rc.ends()) != 1 || rc.ends()[0].HeaderTooLarge {
		t.Fatalf("a header in one segment was not parsed while the budget was spent: %v", rc.ev)
	}
	pa.Feed([]byte("z\r\n"), &ra) // a's section grows by 3 to 68 bytes, within the budget
	if b.Held() != 68 {
		t.Fatalf("held %d, want 68", b.Held())
	}
	pa.Feed([]byte("\r\n"), &ra)
	if b.Held() != 0 || len(ra.ends()) != 1 || ra.ends()[0].HeaderTooLarge {
		t.Fatalf("held %d after a's section completed; a ended %v", b.Held(), ra.ends())
	}
	pb.Feed([]byte("GET /d HTTP/1.1\r\nX: "), &rb)
	pb.Release()
	if b.Held() != 0 {
		t.Fatalf("held %d after the parser holding a partial header was released", b.Held())
	}
}
