package tlswire

import (
	"bytes"
	"testing"
)

// KeepBodies hands each wholly captured record's body over with its
// event, one fresh slice per record even when one Feed ends several, and
// none for a record cut by a gap; off (the default) nothing is kept.
func TestKeepBodies(t *testing.T) {
	rec := func(typ byte, body string) []byte {
		return append([]byte{typ, 3, 3, 0, byte(len(body))}, body...)
	}
	stream := bytes.Join([][]byte{rec(23, "first"), rec(23, "second!"), rec(21, "ab"), rec(23, "cut-by-gap")}, nil)
	var s Stream
	s.KeepBodies(true)
	var bodies []string
	var truncated []bool
	collect := func(evs []Event) {
		for _, ev := range evs {
			if ev.Kind == KindRecord {
				bodies = append(bodies, string(ev.Body))
				truncated = append(truncated, ev.Body == nil)
			}
		}
	}
	gapAt := len(stream) - 4
	collect(s.Feed(stream[:3], 3, 1))            // a header in pieces
	collect(s.Feed(stream[3:gapAt], gapAt-3, 2)) // three records end here
	collect(s.Gap(4))
	want := []string{"first", "second!", "ab", ""}
	if len(bodies) != len(want) {
		t.Fatalf("bodies %q, want %q", bodies, want)
	}
	for i := range want {
		if bodies[i] != want[i] || truncated[i] != (i == 3) {
			t.Errorf("record %d: body %q (nil %v), want %q", i, bodies[i], truncated[i], want[i])
		}
	}
	if s.Buffered() > MaxRecordLen {
		t.Errorf("buffered %d", s.Buffered())
	}
	var off Stream
	for _, ev := range off.Feed(stream[:gapAt], gapAt, 1) {
		if ev.Body != nil {
			t.Fatalf("body kept without KeepBodies: %+v", ev)
		}
	}
	if off.Buffered() != 0 {
		t.Errorf("buffered %d without KeepBodies", off.Buffered())
	}
}

// The hellos' randoms are read: the key log's index and the TLS 1.2 key
// derivation's input.
func TestHelloRandoms(t *testing.T) {
	body := clientHello(t, chOptions{sni: testHost})
	ch, err := parseClientHello(body)
	if err != nil || len(ch.Random) != helloRandomLen || !bytes.Equal(ch.Random, body[2:2+helloRandomLen]) {
		t.Fatalf("client random %x, err %v", ch.Random, err)
	}
	sh := []byte{3, 3}
	sh = append(sh, bytes.Repeat([]byte{7}, helloRandomLen)...)
	sh = append(sh, 0, 0x13, 0x01, 0)
	got, err := parseServerHello(sh)
	if err != nil || !bytes.Equal(got.Random, bytes.Repeat([]byte{7}, helloRandomLen)) || got.CipherSuite != 0x1301 {
		t.Fatalf("server hello %+v, err %v", got, err)
	}
}
