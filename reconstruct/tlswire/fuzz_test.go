package tlswire

import (
	"crypto/tls"
	"testing"
)

// FuzzStream feeds arbitrary bytes in chunks of chunk+1 bytes; control
// bits turn some chunks into gaps or snap-length cuts. The stream must not
// panic, must keep its buffers bounded, must account for every byte, and
// must report records that follow one another unless framing was lost in
// between.
func FuzzStream(f *testing.F) {
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		cc, sc := configs(f, v)
		for _, s := range []session{runSession(f, cc, sc), runSession(f, cc, sc)} {
			f.Add(s.log.dir(true), uint8(0), uint16(0))
			f.Add(s.log.dir(false), uint8(200), uint16(0))
			f.Add(s.log.dir(false), uint8(7), uint16(0x0101))
		}
	}
	f.Add(rec(TypeAlert, []byte{2, 40}), uint8(1), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8, control uint16) {
		var s Stream
		var total int64
		var prev *Record
		lostSince := false
		check := func(evs []Event) {
			for i := range evs {
				e := &evs[i]
				switch e.Kind {
				case KindLost, KindResync:
					lostSince = true
				case KindRecord:
					r := e.Record
					if r.Len > MaxRecordLen || r.Offset < 0 || r.StartAt > r.At {
						t.Fatalf("record %+v", r)
					}
					if prev != nil && !lostSince && r.Offset != prev.Offset+int64(recordHeaderLen+prev.Len) {
						t.Fatalf("record %+v does not follow %+v", r, *prev)
					}
					prev, lostSince = &r, false
				case KindHandshake:
					h := e.Handshake
					if h.ClientHello != nil && h.Type != MsgClientHello || h.ServerHello != nil && h.Type != MsgServerHello ||
						h.Truncated && (h.ClientHello != nil || h.ServerHello != nil) {
						t.Fatalf("message %+v", h)
					}
				}
			}
		}
		for i := 0; len(data) > 0; i++ {
			n := min(len(data), int(chunk)+1)
			bit := uint(i % 8)
			switch {
			case control&(1<<bit) != 0:
				check(s.Gap(int64(n)))
			case control&(1<<(bit+8)) != 0:
				check(s.Feed(data[:n/2], n, int64(i)))
			default:
				check(s.Feed(data[:n], n, int64(i)))
			}
			total += int64(n)
			data = data[n:]
			checkInvariants(t, &s, total)
		}
	})
}

// FuzzHello parses arbitrary hello bodies: errors are fine, panics are not.
func FuzzHello(f *testing.F) {
	f.Add(clientHello(f, chOptions{sni: testHost, alpn: testALPN, versions: []uint16{0x0304}, psk: true, keyShares: []uint16{29}}))
	f.Add(serverHello(f, false))
	f.Add(serverHello(f, true))
	f.Fuzz(func(t *testing.T, body []byte) {
		if ch, err := parseClientHello(body); ch == nil || (err == nil && len(ch.SessionID) > maxSessionIDLen) {
			t.Fatalf("ClientHello %+v %v", ch, err)
		}
		if sh, err := parseServerHello(body); sh == nil || (err == nil && len(sh.SessionID) > maxSessionIDLen) {
			t.Fatalf("ServerHello %+v %v", sh, err)
		}
	})
}
