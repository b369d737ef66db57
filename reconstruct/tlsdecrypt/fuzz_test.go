package tlsdecrypt

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/rtmon/rtmon/reconstruct/tlswire"
)

func FuzzKeyLog(f *testing.F) {
	f.Add([]byte(line("CLIENT_RANDOM", 1, 2, 48) + "# c\n" + line("CLIENT_TRAFFIC_SECRET_0", 3, 4, 32)))
	f.Add([]byte("CLIENT_RANDOM  \t\r\n\n\x00" + strings.Repeat("ab", 600)))
	f.Add([]byte(line("EXPORTER_SECRET", 5, 6, 48)[:70]))
	f.Fuzz(func(t *testing.T, data []byte) {
		opts := KeyLogOptions{MaxEntries: 4, MaxLineLen: 256}
		kl, err := ParseKeyLog(bytes.NewReader(data), opts)
		if err != nil {
			t.Fatal(err)
		}
		st := kl.Stats()
		if st.Entries > opts.MaxEntries || st.Entries > st.Lines || st.Lines+st.Ignored+st.Malformed > bytes.Count(data, []byte("\n"))+1 {
			t.Fatalf("stats %+v for %d bytes", st, len(data))
		}
		if len(kl.order)-kl.head != st.Entries || cap(kl.lines.partial) > 4*opts.MaxLineLen {
			t.Fatalf("bookkeeping: order %d head %d entries %d partial cap %d", len(kl.order), kl.head, st.Entries, cap(kl.lines.partial))
		}
		// The same text written in two pieces reads the same.
		kl2 := NewKeyLog(opts)
		half := len(data) / 2
		kl2.Write(data[:half])
		kl2.Write(data[half:])
		kl2.flushLine()
		if kl2.Stats() != st {
			t.Fatalf("split write: %+v, whole: %+v", kl2.Stats(), st)
		}
	})
}

// fuzzSessions are sessions over fixed secrets, one per kind of record
// protection, for FuzzDecrypt.
func fuzzSessions(t *testing.T) []*Session {
	cr := bytes.Repeat([]byte{1}, 32)
	text := line("CLIENT_RANDOM", 1, 2, 48) + line("CLIENT_HANDSHAKE_TRAFFIC_SECRET", 1, 3, 32) +
		line("SERVER_HANDSHAKE_TRAFFIC_SECRET", 1, 4, 32) + line("CLIENT_TRAFFIC_SECRET_0", 1, 5, 32) +
		line("SERVER_TRAFFIC_SECRET_0", 1, 6, 32) + line("CLIENT_EARLY_TRAFFIC_SECRET", 1, 7, 32)
	var out []*Session
	for _, p := range []Params{
		{ClientRandom: cr, Version: VersionTLS13, CipherSuite: 0x1301, EarlyData: true},
		{ClientRandom: cr, Version: VersionTLS13, CipherSuite: 0x1303},
		{ClientRandom: cr, ServerRandom: cr, Version: VersionTLS12, CipherSuite: 0xC02F},
		{ClientRandom: cr, ServerRandom: cr, Version: VersionTLS12, CipherSuite: 0xCCA8},
	} {
		out = append(out, mustSession(t, text, p))
	}
	return out
}

// FuzzDecrypt feeds arbitrary records to sessions: each record is a type
// byte, a direction bit and a 2-byte length, then that many body bytes.
func FuzzDecrypt(f *testing.F) {
	f.Add([]byte{20, 0, 0, 1, 1, 23, 0, 0, 40}, uint8(2))
	f.Add(append([]byte{23, 1, 0x40, 0x10}, make([]byte, 64)...), uint8(0))
	f.Add([]byte{22, 0, 0, 4, 1, 0, 0, 0}, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		sessions := fuzzSessions(t)
		s := sessions[int(which)%len(sessions)]
		for len(data) >= 4 {
			typ, dir := tlswire.ContentType(data[0]), Direction(data[1]&1)
			n := min(int(binary.BigEndian.Uint16(data[2:4])), len(data)-4)
			body := data[4 : 4+n]
			data = data[4+n:]
			pt, err := s.Decrypt(dir, typ, VersionTLS12, body)
			if err != nil && (pt.Data != nil || pt.Protected) {
				t.Fatalf("error %v with plaintext", err)
			}
			if pt.Protected {
				t.Fatalf("random bytes authenticated under %s", s)
			}
			if err == nil && !bytes.Equal(pt.Data, body) {
				t.Fatal("cleartext record changed")
			}
			s.Skipped(dir, uint64(n%3))
		}
		for _, d := range s.dirs {
			if d.hs.n > 4 || d.hs.left > 1<<24 {
				t.Fatalf("handshake scanner state %+v", d.hs)
			}
		}
	})
}
