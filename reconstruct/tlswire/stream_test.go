package tlswire

import (
	"bytes"
	"crypto/tls"
	"errors"
	mrand "math/rand/v2"
	"slices"
	"testing"
)

// feedAll feeds b in chunks of 1..maxChunk bytes and returns copies of the
// events.
func feedAll(s *Stream, b []byte, rng *mrand.Rand, maxChunk int) []Event {
	var evs []Event
	for len(b) > 0 {
		n := min(len(b), 1+rng.IntN(maxChunk))
		evs = append(evs, s.Feed(b[:n], n, int64(len(evs)))...)
		b = b[n:]
	}
	return evs
}

// randomBody is ciphertext-like filler.
func randomBody(rng *mrand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// appStream is a run of application-data records of random sizes.
func appStream(rng *mrand.Rand, n int) []byte {
	var b []byte
	for range n {
		b = append(b, rec(TypeApplicationData, randomBody(rng, 1+rng.IntN(3000)))...)
	}
	return b
}

// checkNoMisframe asserts that every record reported is a true record of
// b, at its true offset.
func checkNoMisframe(t *testing.T, b []byte, evs []Event) {
	t.Helper()
	want := map[int64]Record{}
	for _, r := range trueRecords(t, b) {
		want[r.Offset] = r
	}
	for _, g := range records(evs) {
		w, ok := want[g.Offset]
		if !ok || w.Type != g.Type || w.Len != g.Len || w.Version != g.Version {
			t.Fatalf("misframed record %+v (true record there: %v %+v)", g, ok, w)
		}
	}
}

// Snap length: each segment (a write cut at a 1448-byte MSS) keeps only
// its first snap bytes. Framing survives wherever the missing bytes lie
// inside records whose headers were seen; nothing is ever misframed.
func TestSnapLength(t *testing.T) {
	const mss = 1448
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		cc, sc := configs(t, v)
		s := runSession(t, cc, sc)
		for _, snap := range []int{16, 64, 128, 256, 4096} {
			var c Conn
			var evs [2][]Event
			var fed [2]int64
			var captured [2][][2]int64 // per direction: captured [from, to) ranges
			for i, w := range s.log.writes {
				d := 0
				if w.fromClient {
					d = 1
				}
				for b := w.b; len(b) > 0; {
					seg := b[:min(mss, len(b))]
					b = b[len(seg):]
					data := seg[:min(snap, len(seg))]
					captured[d] = append(captured[d], [2]int64{fed[d], fed[d] + int64(len(data))})
					fed[d] += int64(len(seg))
					if w.fromClient {
						evs[d] = append(evs[d], c.FeedClient(data, len(seg), int64(i))...)
					} else {
						evs[d] = append(evs[d], c.FeedServer(data, len(seg), int64(i))...)
					}
				}
			}
			for d, st := range []*Stream{&c.Server, &c.Client} {
				b := s.log.dir(d == 1)
				checkInvariants(t, st, int64(len(b)))
				checkNoMisframe(t, b, evs[d])
				for _, r := range records(evs[d]) {
					whole := covered(captured[d], r.Offset, r.Offset+int64(recordHeaderLen+r.Len))
					if r.Truncated == whole {
						t.Errorf("v%x snap %d: record %+v truncated %v, wholly captured %v", v, snap, r, r.Truncated, whole)
					}
				}
			}
			if snap >= mss && (c.Client.Err() != nil || c.Server.Err() != nil) {
				t.Errorf("snap %d: framing lost: %v %v", snap, c.Client.Err(), c.Server.Err())
			}
			// Each client write starts a segment. In TLS 1.3 every record
			// header a client write holds lies within its first 16 bytes
			// or at a segment start, so the client direction keeps its
			// framing at any of these snap lengths; in TLS 1.2 the
			// ChangeCipherSpec after the ClientKeyExchange needs more.
			if v == tls.VersionTLS13 || snap >= 128 {
				if c.Client.Err() != nil {
					t.Errorf("v%x snap %d: client framing lost: %v", v, snap, c.Client.Err())
				}
				if got, want := len(records(evs[1])), len(trueRecords(t, s.log.dir(true))); got != want {
					t.Errorf("v%x snap %d: client records %d, want %d", v, snap, got, want)
				}
			}
			// The TLS 1.2 ServerHello record (about 110 bytes) leads the
			// server's first segment; the TLS 1.3 one carries a
			// post-quantum key share (over 1 KB) and is cut below the MSS.
			shParsed := c.ServerHello != nil
			if want := v == tls.VersionTLS12 && snap >= 128 || snap >= mss; shParsed != want {
				t.Errorf("v%x snap %d: ServerHello parsed %v, want %v", v, snap, shParsed, want)
			}
		}
	}
}

// covered reports whether the sorted ranges cover [from, to).
func covered(ranges [][2]int64, from, to int64) bool {
	for _, r := range ranges {
		if r[0] <= from && from < r[1] {
			from = r[1]
		}
	}
	return from >= to
}

// Gaps inside a record keep the framing (the record is Truncated, the
// handshake messages around the hole still parse); a gap over a header
// loses it until two consecutive plausible headers are found.
func TestGap(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(9, 10))
	sh := serverHello(t, false)
	cert := randomBody(rng, 2000)
	hsBody := slices.Concat(hsMsg(MsgServerHello, sh), hsMsg(MsgCertificate, cert), hsMsg(MsgServerHelloDone, nil))
	r1 := rec(TypeHandshake, hsBody)
	r2 := rec(TypeApplicationData, randomBody(rng, 1000))
	r3 := rec(TypeApplicationData, randomBody(rng, 3000))
	r4 := rec(TypeApplicationData, randomBody(rng, 50))
	r5 := rec(TypeApplicationData, randomBody(rng, 70))
	stream := slices.Concat(r1, r2, r3, r4, r5)

	t.Run("inside a handshake message", func(t *testing.T) {
		var s Stream
		certAt := recordHeaderLen + handshakeHeaderLen + len(sh) + handshakeHeaderLen
		evs := s.Feed(stream[:certAt+100], certAt+100, 1)
		evs = append(slices.Clone(evs), s.Gap(500)...)
		evs = append(evs, s.Feed(stream[certAt+600:], len(stream)-certAt-600, 2)...)
		checkInvariants(t, &s, int64(len(stream)))
		hs := kinds(evs, KindHandshake)
		if len(hs) != 3 || hs[0].Handshake.ServerHello == nil || !hs[1].Handshake.Truncated ||
			hs[1].Handshake.Len != len(cert) || hs[2].Handshake.Type != MsgServerHelloDone || hs[2].Handshake.Truncated {
			t.Fatalf("messages %+v", hs)
		}
		rs := records(evs)
		if len(rs) != 5 || !rs[0].Truncated || rs[1].Truncated || s.Err() != nil {
			t.Fatalf("records %+v, err %v", rs, s.Err())
		}
	})
	t.Run("ending at a record boundary", func(t *testing.T) {
		var s Stream
		cut := len(r1) + 10
		evs := slices.Clone(s.Feed(stream[:cut], cut, 1))
		evs = append(evs, s.Gap(int64(len(r2)-10))...)
		evs = append(evs, s.Feed(stream[len(r1)+len(r2):], len(stream)-len(r1)-len(r2), 2)...)
		checkInvariants(t, &s, int64(len(stream)))
		rs := records(evs)
		if len(rs) != 5 || !rs[1].Truncated || rs[1].At != 1 || rs[2].Truncated || s.Err() != nil || len(kinds(evs, KindLost)) != 0 {
			t.Fatalf("records %+v, err %v", rs, s.Err())
		}
	})
	t.Run("over a header", func(t *testing.T) {
		var s Stream
		cut := len(r1) + len(r2) - 20
		evs := slices.Clone(s.Feed(stream[:cut], cut, 1))
		evs = append(evs, s.Gap(100)...)
		if s.Err() == nil || !errors.Is(s.Err(), ErrGap) {
			t.Fatalf("Err %v after a gap over a header", s.Err())
		}
		evs = append(evs, s.Feed(stream[cut+100:], len(stream)-cut-100, 2)...)
		checkInvariants(t, &s, int64(len(stream)))
		checkNoMisframe(t, stream, evs)
		lost, resync := kinds(evs, KindLost), kinds(evs, KindResync)
		if len(lost) != 1 || !errors.Is(lost[0].Err, ErrGap) || len(resync) != 1 || s.Err() != nil {
			t.Fatalf("lost %+v resync %+v err %v", lost, resync, s.Err())
		}
		rs := records(evs)
		if n := len(rs); n != 4 || rs[2].Offset != int64(len(r1)+len(r2)+len(r3)) || rs[3].Len != 70 {
			t.Fatalf("records %+v", rs)
		}
		st := s.Stats()
		if st.Losses != 1 || st.Resyncs != 1 || st.Skipped != int64(len(r3)-20+20) {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("plausible header in ciphertext", func(t *testing.T) {
		// After the hole the hunt meets a fake header inside r6's body;
		// the bytes where its successor would start refute it.
		body := make([]byte, 400)
		copy(body[100:], []byte{byte(TypeApplicationData), 3, 3, 0, 20})
		r6 := rec(TypeApplicationData, body)
		stream := slices.Concat(r6, r2, r4, r5)
		var s Stream
		evs := slices.Clone(s.Gap(50))
		evs = append(evs, feedAll(&s, stream[50:], rng, 100)...)
		checkInvariants(t, &s, int64(len(stream)))
		checkNoMisframe(t, stream, evs)
		if rs := records(evs); len(rs) != 3 || rs[0].Offset != int64(len(r6)) || s.Err() != nil {
			t.Fatalf("records %+v, err %v", rs, s.Err())
		}
		if st := s.Stats(); st.Skipped != int64(len(r6)) || st.Resyncs != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("inside a header", func(t *testing.T) {
		var s Stream
		cut := len(r1) + 2
		evs := slices.Clone(s.Feed(stream[:cut], cut, 1))
		evs = append(evs, s.Gap(1)...)
		evs = append(evs, s.Gap(5)...) // while hunting: no second KindLost
		evs = append(evs, s.Feed(stream[cut+6:], len(stream)-cut-6, 2)...)
		checkInvariants(t, &s, int64(len(stream)))
		checkNoMisframe(t, stream, evs)
		if len(kinds(evs, KindLost)) != 1 || len(kinds(evs, KindResync)) != 1 || len(records(evs)) != 4 {
			t.Fatalf("events %+v", evs)
		}
	})
}

// Random holes and chunkings over random application data: whatever is
// reported is true, and every byte is accounted for.
func TestGapsNeverMisframe(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(11, 12))
	for iter := range 200 {
		stream := appStream(rng, 5+rng.IntN(30))
		var s Stream
		var evs []Event
		for off := 0; off < len(stream); {
			n := min(len(stream)-off, 1+rng.IntN(2000))
			switch rng.IntN(8) {
			case 0:
				evs = append(evs, s.Gap(int64(n))...)
			case 1:
				evs = append(evs, s.Feed(stream[off:off+n/2], n, int64(off))...) // snap cut
			default:
				evs = append(evs, s.Feed(stream[off:off+n], n, int64(off))...)
			}
			off += n
		}
		checkInvariants(t, &s, int64(len(stream)))
		checkNoMisframe(t, stream, evs)
		if iter == 0 && len(records(evs)) == 0 {
			t.Fatal("no records at all")
		}
	}
}

// A direction picked up mid-connection hunts, then confirms.
func TestResyncMidStream(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(13, 14))
	stream := appStream(rng, 20)
	from := int(trueRecords(t, stream)[3].Offset) + 17 // inside the fourth record
	var s Stream
	s.Resync()
	if !errors.Is(s.Err(), ErrMidStream) {
		t.Fatalf("Err %v", s.Err())
	}
	evs := feedAll(&s, stream[from:], rng, 500)
	rs := records(evs)
	want := trueRecords(t, stream)[4:]
	if len(kinds(evs, KindResync)) != 1 || len(kinds(evs, KindLost)) != 0 || len(rs) != len(want) || s.Err() != nil {
		t.Fatalf("resync %d lost %d records %d want %d err %v",
			len(kinds(evs, KindResync)), len(kinds(evs, KindLost)), len(rs), len(want), s.Err())
	}
	for i, r := range rs {
		if r.Offset+int64(from) != want[i].Offset || r.Len != want[i].Len {
			t.Fatalf("record %d: %+v want %+v", i, r, want[i])
		}
	}
}

// Handshake messages re-fragmented into records of random small sizes, or
// all in one record, parse the same.
func TestHandshakeFragmentation(t *testing.T) {
	cc, sc := configs(t, tls.VersionTLS12)
	s := runSession(t, cc, sc)
	rng := mrand.New(mrand.NewPCG(15, 16))
	for _, fromClient := range []bool{false, true} {
		orig := s.log.dir(fromClient)
		var ref Stream
		wantMsgs := kinds(feedAll(&ref, orig, rng, 1<<20), KindHandshake)
		for _, maxFrag := range []int{1, 3, 50, 1 << 14} {
			b := refragment(t, orig, rng, maxFrag)
			var st Stream
			evs := feedAll(&st, b, rng, 64)
			checkInvariants(t, &st, int64(len(b)))
			got := kinds(evs, KindHandshake)
			if len(got) != len(wantMsgs) {
				t.Fatalf("frag %d: %d messages, want %d", maxFrag, len(got), len(wantMsgs))
			}
			for i := range got {
				g, w := got[i].Handshake, wantMsgs[i].Handshake
				if g.Type != w.Type || g.Len != w.Len || g.Truncated || got[i].Err != nil {
					t.Fatalf("frag %d message %d: %+v want %+v (%v)", maxFrag, i, g, w, got[i].Err)
				}
				if w.ClientHello != nil && (g.ClientHello == nil || g.ClientHello.ServerName != testHost) ||
					w.ServerHello != nil && (g.ServerHello == nil || g.ServerHello.CipherSuite != w.ServerHello.CipherSuite) {
					t.Fatalf("frag %d: hello %+v", maxFrag, g)
				}
			}
			if st.Buffered() != 0 {
				t.Errorf("hello buffer of %d kept after the hellos", st.Buffered())
			}
		}
	}
}

// refragment re-cuts the cleartext handshake (the handshake records before
// the first ChangeCipherSpec) into records of 1..maxFrag bytes.
func refragment(t *testing.T, b []byte, rng *mrand.Rand, maxFrag int) []byte {
	var out, hs []byte
	flush := func() {
		for len(hs) > 0 {
			n := min(len(hs), 1+rng.IntN(maxFrag))
			out = append(out, rec(TypeHandshake, hs[:n])...)
			hs = hs[n:]
		}
	}
	ccs := false
	for _, r := range trueRecords(t, b) {
		whole := b[r.Offset : r.Offset+int64(recordHeaderLen+r.Len)]
		if r.Type == TypeHandshake && !ccs {
			hs = append(hs, whole[recordHeaderLen:]...)
			continue
		}
		flush()
		ccs = ccs || r.Type == TypeChangeCipherSpec
		out = append(out, whole...)
	}
	flush()
	return out
}

func TestRecordLengthLimit(t *testing.T) {
	var s Stream
	ok := rec(TypeApplicationData, make([]byte, MaxRecordLen))
	evs := s.Feed(ok, len(ok), 1)
	if rs := records(evs); len(rs) != 1 || rs[0].Len != MaxRecordLen || s.Err() != nil {
		t.Fatalf("record of %d: %+v %v", MaxRecordLen, rs, s.Err())
	}
	tooLong := rec(TypeApplicationData, make([]byte, MaxRecordLen+1))
	follow := slices.Concat(rec(TypeApplicationData, []byte("abc")), rec(TypeAlert, []byte{1, 0}), rec(TypeApplicationData, []byte("z")))
	evs = slices.Clone(s.Feed(tooLong[:recordHeaderLen], recordHeaderLen, 2))
	if len(evs) != 1 || evs[0].Kind != KindLost || !errors.Is(evs[0].Err, ErrInvalidHeader) || !errors.Is(s.Err(), ErrInvalidHeader) {
		t.Fatalf("events %+v, err %v", evs, s.Err())
	}
	evs = append(evs, s.Feed(follow, len(follow), 3)...)
	checkInvariants(t, &s, int64(len(ok)+recordHeaderLen+len(follow)))
	rs := records(evs)
	if len(rs) != 3 || rs[0].Len != 3 || rs[1].Type != TypeAlert || rs[2].Len != 1 || s.Err() != nil {
		t.Fatalf("records after the bad header %+v, err %v", rs, s.Err())
	}
	if a := kinds(evs, KindAlert); len(a) != 1 || a[0].Alert != (Alert{Level: 1, Description: 0}) {
		t.Fatalf("alerts %+v", a)
	}
}

func TestZeroLengthRecords(t *testing.T) {
	b := slices.Concat(rec(TypeApplicationData, nil), rec(TypeHandshake, nil), rec(TypeAlert, nil),
		rec(TypeChangeCipherSpec, nil), rec(TypeHeartbeat, nil), rec(TypeApplicationData, []byte{1}))
	var s Stream
	evs := feedAll(&s, b, mrand.New(mrand.NewPCG(1, 1)), 4)
	checkInvariants(t, &s, int64(len(b)))
	rs := records(evs)
	if len(rs) != 6 || s.Err() != nil || len(kinds(evs, KindHandshake))+len(kinds(evs, KindAlert)) != 0 {
		t.Fatalf("events %+v", evs)
	}
	for i, r := range rs[:5] {
		if r.Len != 0 || r.Offset != int64(i*recordHeaderLen) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
}

func TestGarbage(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(17, 18))
	for _, b := range [][]byte{
		randomBody(rng, 256<<10),
		[]byte("GET / HTTP/1.1\r\nHost: example.test\r\n\r\n"),
		{0x80, 0x2e, 0x01, 0x03, 0x01}, // SSL 2.0 compatible hello
		bytes.Repeat([]byte{22, 3, 3, 0, 1}, 1000),
	} {
		var s Stream
		evs := feedAll(&s, b, rng, 1500)
		checkInvariants(t, &s, int64(len(b)))
		for _, r := range records(evs) {
			if checkHeader([]byte{byte(r.Type), byte(r.Version >> 8), byte(r.Version), byte(r.Len >> 8), byte(r.Len)}) != nil {
				t.Fatalf("invalid record reported: %+v", r)
			}
		}
	}
	var s Stream
	evs := s.Feed([]byte("GET / HTTP/1.1\r\n"), 16, 1)
	if len(evs) != 1 || evs[0].Kind != KindLost || !errors.Is(s.Err(), ErrInvalidHeader) {
		t.Fatalf("HTTP bytes: %+v", evs)
	}
}

func TestTruncatedHandshake(t *testing.T) {
	ch := clientHello(t, chOptions{sni: testHost})
	t.Run("cut by ChangeCipherSpec", func(t *testing.T) {
		msg := hsMsg(MsgClientHello, ch)
		b := slices.Concat(rec(TypeHandshake, msg[:100]), rec(TypeChangeCipherSpec, []byte{1}), rec(TypeHandshake, msg[100:]))
		var s Stream
		evs := feedAll(&s, b, mrand.New(mrand.NewPCG(1, 2)), 30)
		hs := kinds(evs, KindHandshake)
		if len(hs) != 1 || !hs[0].Handshake.Truncated || hs[0].Handshake.ClientHello != nil || s.Buffered() != 0 {
			t.Fatalf("messages %+v, buffered %d", hs, s.Buffered())
		}
		if rs := records(evs); !rs[2].Encrypted {
			t.Fatalf("handshake record after ChangeCipherSpec not encrypted: %+v", rs[2])
		}
	})
	t.Run("malformed", func(t *testing.T) {
		bad := clientHello(t, chOptions{sni: testHost, alpn: []string{"h2", ""}}) // an empty protocol name
		var s Stream
		b := rec(TypeHandshake, hsMsg(MsgClientHello, bad))
		hs := kinds(s.Feed(b, len(b), 1), KindHandshake)
		if len(hs) != 1 || !errors.Is(hs[0].Err, ErrMalformedHello) || hs[0].Handshake.ClientHello == nil ||
			hs[0].Handshake.ClientHello.ServerName != testHost {
			t.Fatalf("messages %+v", hs)
		}
		short := rec(TypeHandshake, hsMsg(MsgServerHello, []byte{3, 3, 1}))
		hs = kinds(s.Feed(short, len(short), 2), KindHandshake)
		if len(hs) != 1 || !errors.Is(hs[0].Err, ErrMalformedHello) {
			t.Fatalf("messages %+v", hs)
		}
	})
	t.Run("over MaxHelloLen", func(t *testing.T) {
		msg := hsMsg(MsgClientHello, make([]byte, MaxHelloLen+1))
		var b []byte
		for m := msg; len(m) > 0; m = m[min(len(m), 1<<14):] {
			b = append(b, rec(TypeHandshake, m[:min(len(m), 1<<14)])...)
		}
		var s Stream
		var evs []Event
		for c := b; len(c) > 0; c = c[min(len(c), 1000):] {
			evs = append(evs, s.Feed(c[:min(len(c), 1000)], min(len(c), 1000), 1)...)
			if s.Buffered() != 0 {
				t.Fatalf("buffered %d of an oversized hello", s.Buffered())
			}
		}
		hs := kinds(evs, KindHandshake)
		if len(hs) != 1 || !hs[0].Handshake.Truncated || hs[0].Handshake.Len != MaxHelloLen+1 {
			t.Fatalf("messages %+v", hs)
		}
	})
	t.Run("claimed length never arrives", func(t *testing.T) {
		msg := hsMsg(MsgClientHello, make([]byte, MaxHelloLen))
		var s Stream
		for i := 0; i < 300; i += 10 {
			b := rec(TypeHandshake, msg[i:i+10])
			s.Feed(b, len(b), 1)
		}
		if s.Buffered() > 1024 {
			t.Fatalf("buffered %d for 300 bytes of a hello", s.Buffered())
		}
	})
	t.Run("alert split across records", func(t *testing.T) {
		b := slices.Concat(rec(TypeAlert, []byte{2}), rec(TypeAlert, []byte{40, 1, 0}), rec(TypeAlert, []byte{2}))
		var s Stream
		a := kinds(s.Feed(b, len(b), 1), KindAlert)
		if len(a) != 2 || a[0].Alert != (Alert{Level: 2, Description: 40}) || a[1].Alert != (Alert{Level: 1}) {
			t.Fatalf("alerts %+v", a)
		}
	})
}

// What a ChangeCipherSpec means depends on the version: before the
// ServerHello (a TLS 1.3 client sending 0-RTT data) it is taken as TLS
// 1.2's, until the ServerHello says TLS 1.3.
func TestChangeCipherSpecVersions(t *testing.T) {
	var c Conn
	ch := rec(TypeHandshake, hsMsg(MsgClientHello, clientHello(t, chOptions{earlyData: true, versions: []uint16{0x0304, 0x0303}})))
	client := slices.Concat(ch, rec(TypeChangeCipherSpec, []byte{1}), rec(TypeApplicationData, make([]byte, 40)))
	c.FeedClient(client, len(client), 1)
	if !c.ClientHello.EarlyData || !c.Client.Encrypted() || c.Client.Version() != 0 {
		t.Fatalf("after 0-RTT: hello %+v encrypted %v version %x", c.ClientHello, c.Client.Encrypted(), c.Client.Version())
	}
	sh := rec(TypeHandshake, hsMsg(MsgServerHello, serverHello(t, false)))
	c.FeedServer(sh, len(sh), 2)
	if c.Client.Encrypted() || c.Client.Version() != 0x0304 || c.Server.Version() != 0x0304 || !c.Resumed() {
		t.Fatalf("after ServerHello: encrypted %v versions %x %x resumed %v", c.Client.Encrypted(), c.Client.Version(), c.Server.Version(), c.Resumed())
	}

	// A client offering only TLS 1.3 knows the version by itself.
	var s Stream
	only13 := rec(TypeHandshake, hsMsg(MsgClientHello, clientHello(t, chOptions{versions: []uint16{0x1a1a, 0x0304}})))
	s.Feed(only13, len(only13), 1)
	s.Feed(rec(TypeChangeCipherSpec, []byte{1}), 6, 2)
	if s.Version() != 0x0304 || s.Encrypted() {
		t.Fatalf("TLS 1.3-only client: version %x encrypted %v", s.Version(), s.Encrypted())
	}
}
