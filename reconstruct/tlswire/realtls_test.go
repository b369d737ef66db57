package tlswire

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	mrand "math/rand/v2"
	"slices"
	"testing"
)

var testALPN = []string{"h2", "http/1.1"}

// Per-record overheads of AEAD ciphertext: TLS 1.2 AES-GCM adds an 8-byte
// explicit nonce and a 16-byte tag; TLS 1.3 adds the inner content type
// and a 16-byte tag.
const (
	overhead12 = 8 + 16
	overhead13 = 1 + 16
)

func configs(t testing.TB, version uint16) (*tls.Config, *tls.Config) {
	cert, pool := selfSigned(t)
	cc := &tls.Config{
		ServerName:                  testHost,
		RootCAs:                     pool,
		NextProtos:                  testALPN,
		ClientSessionCache:          tls.NewLRUClientSessionCache(4),
		DynamicRecordSizingDisabled: true, // one record per Write
	}
	sc := &tls.Config{
		Certificates:                []tls.Certificate{cert},
		NextProtos:                  testALPN,
		DynamicRecordSizingDisabled: true,
	}
	if version == tls.VersionTLS12 {
		cc.MaxVersion = tls.VersionTLS12
		cc.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}
	}
	return cc, sc
}

// chunkings replays a session several ways: whole runs, 1-byte chunks and
// random chunk sizes.
var chunkings = []int{0, 1, 7, 300, 2000}

func TestRealTLS12(t *testing.T) {
	cc, sc := configs(t, tls.VersionTLS12)
	full := runSession(t, cc, sc)
	resumed := runSession(t, cc, sc)
	for _, s := range []session{full, resumed} {
		if s.err != nil {
			t.Fatal(s.err)
		}
		if s.state.Version != tls.VersionTLS12 || s.state.CipherSuite != tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 {
			t.Fatalf("negotiated %x %x", s.state.Version, s.state.CipherSuite)
		}
	}
	if full.state.DidResume || !resumed.state.DidResume {
		t.Fatalf("DidResume: full %v, resumed %v", full.state.DidResume, resumed.state.DidResume)
	}
	rng := mrand.New(mrand.NewPCG(1, 2))
	for _, s := range []session{full, resumed} {
		for _, mc := range chunkings {
			r := replay(s.log, rng, mc)
			checkReplay(t, s, r)
			ch, sh := r.conn.ClientHello, r.conn.ServerHello
			if s.state.DidResume != ch.SessionTicket {
				t.Errorf("ClientHello session ticket %v, resumed %v", ch.SessionTicket, s.state.DidResume)
			}
			if sh.ALPN != s.state.NegotiatedProtocol || sh.ALPN != "h2" {
				t.Errorf("ServerHello ALPN %q, negotiated %q", sh.ALPN, s.state.NegotiatedProtocol)
			}
			if sh.SupportedVersion != 0 || ch.PSK || sh.PSK {
				t.Errorf("TLS 1.3 fields in a TLS 1.2 handshake: %+v %+v", ch, sh)
			}
			// The handshake in the clear, then one encrypted Finished per
			// direction after its ChangeCipherSpec.
			wantServer := []HandshakeType{MsgServerHello, MsgCertificate, MsgServerKeyExchange, MsgServerHelloDone, MsgNewSessionTicket}
			wantClient := []HandshakeType{MsgClientHello, MsgClientKeyExchange}
			if s.state.DidResume {
				wantServer = []HandshakeType{MsgServerHello, MsgNewSessionTicket}
				wantClient = []HandshakeType{MsgClientHello}
			}
			checkMessages(t, "server", r.server, wantServer)
			checkMessages(t, "client", r.client, wantClient)
			for _, evs := range [][]Event{r.client, r.server} {
				checkAfterCCS12(t, evs)
			}
			// Application data: the two requests, each in one record.
			var app []int
			for _, rc := range records(r.client) {
				if rc.Type == TypeApplicationData {
					app = append(app, rc.Len-overhead12)
				}
			}
			if !slices.Equal(app, []int{reqSmall, reqLarge}) {
				t.Errorf("client application data %v, want [%d %d] plus %d each", app, reqSmall, reqLarge, overhead12)
			}
			if !slices.Contains(appLens(r.server, overhead12), respBytes) {
				t.Errorf("no %d-byte response in %v", respBytes, appLens(r.server, overhead12))
			}
			// close_notify: an encrypted alert record.
			if a := kinds(r.client, KindAlert); len(a) != 1 || !a[0].Alert.Encrypted {
				t.Errorf("client alerts %+v, want one encrypted close_notify", a)
			}
		}
	}
}

func TestRealTLS13(t *testing.T) {
	cc, sc := configs(t, tls.VersionTLS13)
	full := runSession(t, cc, sc)
	resumed := runSession(t, cc, sc)
	for _, s := range []session{full, resumed} {
		if s.err != nil {
			t.Fatal(s.err)
		}
		if s.state.Version != tls.VersionTLS13 {
			t.Fatalf("negotiated %x", s.state.Version)
		}
	}
	if full.state.DidResume || !resumed.state.DidResume {
		t.Fatalf("DidResume: full %v, resumed %v", full.state.DidResume, resumed.state.DidResume)
	}
	rng := mrand.New(mrand.NewPCG(3, 4))
	for _, s := range []session{full, resumed} {
		for _, mc := range chunkings {
			r := replay(s.log, rng, mc)
			checkReplay(t, s, r)
			ch, sh := r.conn.ClientHello, r.conn.ServerHello
			if !slices.Contains(ch.SupportedVersions, tls.VersionTLS13) || !slices.Contains(ch.SupportedVersions, tls.VersionTLS12) {
				t.Errorf("ClientHello versions %x", ch.SupportedVersions)
			}
			if len(ch.KeyShareGroups) == 0 || !slices.Contains(ch.KeyShareGroups, uint16(s.state.CurveID)) ||
				sh.KeyShareGroup != uint16(s.state.CurveID) {
				t.Errorf("key shares offered %v, chosen %v, connection %v", ch.KeyShareGroups, sh.KeyShareGroup, s.state.CurveID)
			}
			if ch.PSK != s.state.DidResume || sh.PSK != s.state.DidResume || sh.PSKIdentity != 0 {
				t.Errorf("PSK offered %v, selected %v (%d), resumed %v", ch.PSK, sh.PSK, sh.PSKIdentity, s.state.DidResume)
			}
			if sh.ALPN != "" || s.state.NegotiatedProtocol != "h2" {
				t.Errorf("ServerHello ALPN %q (encrypted in 1.3), negotiated %q", sh.ALPN, s.state.NegotiatedProtocol)
			}
			if sh.LegacyVersion != tls.VersionTLS12 || !bytes.Equal(sh.SessionID, ch.SessionID) || ch.EarlyData || sh.HelloRetryRequest {
				t.Errorf("ServerHello %+v for ClientHello %+v", sh, ch)
			}
			checkMessages(t, "server", r.server, []HandshakeType{MsgServerHello})
			checkMessages(t, "client", r.client, []HandshakeType{MsgClientHello})
			if r.conn.Client.Encrypted() || r.conn.Server.Encrypted() || r.conn.Client.Version() != tls.VersionTLS13 {
				t.Errorf("TLS 1.3 dummy ChangeCipherSpec taken as protecting: client %v, server %v",
					r.conn.Client.Encrypted(), r.conn.Server.Encrypted())
			}
			// Client application data: its encrypted Finished (32-byte
			// verify data for SHA-256 suites), the two requests, and
			// close_notify, each one record.
			want := []int{handshakeHeaderLen + 32, reqSmall, reqLarge, 2}
			if got := appLens(r.client, overhead13); !slices.Equal(got, want) {
				t.Errorf("client application data %v, want %v", got, want)
			}
			if !slices.Contains(appLens(r.server, overhead13), respBytes) {
				t.Errorf("no %d-byte response in %v", respBytes, appLens(r.server, overhead13))
			}
			if a := kinds(append(r.client, r.server...), KindAlert); len(a) != 0 {
				t.Errorf("alerts %+v in TLS 1.3 (all protected as application data)", a)
			}
		}
	}
}

// A HelloRetryRequest: the client offers an X25519 share, the server wants
// P-256. The client sends its dummy ChangeCipherSpec before the second,
// cleartext ClientHello, which must still be parsed.
func TestRealTLS13HelloRetryRequest(t *testing.T) {
	cc, sc := configs(t, tls.VersionTLS13)
	cc.CurvePreferences = []tls.CurveID{tls.X25519, tls.CurveP256}
	sc.CurvePreferences = []tls.CurveID{tls.CurveP256}
	s := runSession(t, cc, sc)
	if s.err != nil || s.state.CurveID != tls.CurveP256 {
		t.Fatalf("handshake: %v, curve %v", s.err, s.state.CurveID)
	}
	rng := mrand.New(mrand.NewPCG(5, 6))
	for _, mc := range chunkings {
		r := replay(s.log, rng, mc)
		checkReplay(t, s, r)
		var chs []*ClientHello
		for _, e := range kinds(r.client, KindHandshake) {
			chs = append(chs, e.Handshake.ClientHello)
		}
		var shs []*ServerHello
		for _, e := range kinds(r.server, KindHandshake) {
			shs = append(shs, e.Handshake.ServerHello)
		}
		if len(chs) != 2 || len(shs) != 2 || chs[0] == nil || chs[1] == nil || shs[0] == nil || shs[1] == nil {
			t.Fatalf("hellos: client %v server %v", chs, shs)
		}
		if !shs[0].HelloRetryRequest || shs[0].KeyShareGroup != uint16(tls.CurveP256) || shs[0].SupportedVersion != tls.VersionTLS13 {
			t.Errorf("HelloRetryRequest %+v", shs[0])
		}
		if shs[1].HelloRetryRequest || shs[1].KeyShareGroup != uint16(tls.CurveP256) {
			t.Errorf("ServerHello %+v", shs[1])
		}
		if !slices.Equal(chs[0].KeyShareGroups, []uint16{uint16(tls.X25519)}) ||
			!slices.Equal(chs[1].KeyShareGroups, []uint16{uint16(tls.CurveP256)}) {
			t.Errorf("key shares: first %v, second %v", chs[0].KeyShareGroups, chs[1].KeyShareGroups)
		}
		if chs[1].ServerName != testHost {
			t.Errorf("second ClientHello SNI %q", chs[1].ServerName)
		}
		// The client's ChangeCipherSpec came before its second ClientHello.
		cs := records(r.client)
		if len(cs) < 3 || cs[1].Type != TypeChangeCipherSpec || cs[2].Type != TypeHandshake || cs[2].Encrypted {
			t.Errorf("client records %+v", cs[:min(3, len(cs))])
		}
	}
}

// The client refuses the server's certificate. In TLS 1.2 it says so in a
// cleartext alert; in TLS 1.3 the alert is protected, an application-data
// record.
func TestRealAlerts(t *testing.T) {
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		cc, sc := configs(t, v)
		cc.RootCAs = x509.NewCertPool() // trusts nothing
		s := runSession(t, cc, sc)
		if s.err == nil {
			t.Fatal("handshake succeeded with an untrusted certificate")
		}
		rng := mrand.New(mrand.NewPCG(7, 8))
		for _, mc := range chunkings {
			r := replay(s.log, rng, mc)
			checkStreams(t, s, r)
			alerts := kinds(r.client, KindAlert)
			last := records(r.client)[len(records(r.client))-1]
			switch v {
			case tls.VersionTLS12:
				if len(alerts) != 1 || alerts[0].Alert != (Alert{Level: 2, Description: 42}) {
					t.Errorf("TLS 1.2 alerts %+v, want fatal bad_certificate", alerts)
				}
				if last.Type != TypeAlert || last.Len != 2 || last.Encrypted {
					t.Errorf("TLS 1.2 alert record %+v", last)
				}
			case tls.VersionTLS13:
				if len(alerts) != 0 {
					t.Errorf("TLS 1.3 alerts %+v seen in the clear", alerts)
				}
				if last.Type != TypeApplicationData || last.Len != 2+overhead13 || !last.Encrypted {
					t.Errorf("TLS 1.3 alert record %+v", last)
				}
			}
		}
	}
}

// checkReplay asserts what every successful replay must show: clean
// framing and the hellos matching the configs and connection state.
func checkReplay(t *testing.T, s session, r *replayResult) {
	t.Helper()
	checkStreams(t, s, r)
	ch, sh := r.conn.ClientHello, r.conn.ServerHello
	if ch == nil || sh == nil {
		t.Fatalf("hellos not parsed: %v %v", ch, sh)
	}
	if ch.ServerName != testHost || !slices.Equal(ch.ALPN, testALPN) || ch.CipherSuites == 0 || len(ch.SessionID) != 32 {
		t.Errorf("ClientHello %+v", ch)
	}
	if sh.Version() != s.state.Version || sh.CipherSuite != s.state.CipherSuite {
		t.Errorf("ServerHello version %x suite %x, connection %x %x", sh.Version(), sh.CipherSuite, s.state.Version, s.state.CipherSuite)
	}
	if r.conn.Resumed() != s.state.DidResume {
		t.Errorf("Resumed %v, DidResume %v", r.conn.Resumed(), s.state.DidResume)
	}
	if ch.LegacyVersion != tls.VersionTLS12 {
		t.Errorf("ClientHello legacy version %x", ch.LegacyVersion)
	}
}

// checkStreams asserts that both directions were framed exactly as their
// headers say, with the times of the Feed calls that carried them.
func checkStreams(t *testing.T, s session, r *replayResult) {
	t.Helper()
	for _, d := range []struct {
		name       string
		fromClient bool
		st         *Stream
		evs        []Event
	}{{"client", true, &r.conn.Client, r.client}, {"server", false, &r.conn.Server, r.server}} {
		b := s.log.dir(d.fromClient)
		checkInvariants(t, d.st, int64(len(b)))
		if d.st.Err() != nil || d.st.Stats().Skipped != 0 || len(kinds(d.evs, KindLost)) != 0 {
			t.Fatalf("%s: framing lost: %v", d.name, d.st.Err())
		}
		for _, e := range kinds(d.evs, KindHandshake) {
			if e.Err != nil || e.Handshake.Truncated {
				t.Errorf("%s: %v: %v (truncated %v)", d.name, e.Handshake.Type, e.Err, e.Handshake.Truncated)
			}
		}
		got, want := records(d.evs), trueRecords(t, b)
		if len(got) != len(want) {
			t.Fatalf("%s: %d records, want %d", d.name, len(got), len(want))
		}
		for i, g := range got {
			w := want[i]
			if g.Type != w.Type || g.Version != w.Version || g.Len != w.Len || g.Offset != w.Offset || g.Truncated {
				t.Fatalf("%s record %d: %+v, want %+v", d.name, i, g, w)
			}
			if g.Encrypted != (g.Type == TypeApplicationData || (d.st.Version() != tls.VersionTLS13 && afterCCS(got, i))) {
				t.Errorf("%s record %d (%v): encrypted %v", d.name, i, g.Type, g.Encrypted)
			}
			startAt, endAt := r.atOf(d.fromClient, g.Offset), r.atOf(d.fromClient, g.Offset+int64(recordHeaderLen+g.Len)-1)
			if g.StartAt != startAt || g.At != endAt {
				t.Fatalf("%s record %d: times %d..%d, want %d..%d", d.name, i, g.StartAt, g.At, startAt, endAt)
			}
		}
	}
}

func afterCCS(rs []Record, i int) bool {
	for _, r := range rs[:i] {
		if r.Type == TypeChangeCipherSpec {
			return rs[i].Type != TypeChangeCipherSpec
		}
	}
	return false
}

// checkMessages asserts the cleartext handshake messages of a direction.
func checkMessages(t *testing.T, name string, evs []Event, want []HandshakeType) {
	t.Helper()
	var got []HandshakeType
	for _, e := range kinds(evs, KindHandshake) {
		got = append(got, e.Handshake.Type)
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s messages %v, want %v", name, got, want)
	}
}

// checkAfterCCS12 asserts that after a TLS 1.2 ChangeCipherSpec no
// handshake message is parsed and the one handshake record (Finished) is
// reported encrypted: 12 bytes of verify data in a 4-byte header, AES-GCM
// sealed.
func checkAfterCCS12(t *testing.T, evs []Event) {
	t.Helper()
	ccs := false
	finished := 0
	for _, e := range evs {
		switch {
		case e.Kind == KindRecord && e.Record.Type == TypeChangeCipherSpec:
			ccs = true
		case ccs && e.Kind == KindHandshake:
			t.Errorf("handshake message %v parsed after ChangeCipherSpec", e.Handshake.Type)
		case ccs && e.Kind == KindRecord && e.Record.Type == TypeHandshake:
			finished++
			if !e.Record.Encrypted || e.Record.Len != handshakeHeaderLen+12+overhead12 {
				t.Errorf("Finished record %+v", e.Record)
			}
		}
	}
	if !ccs || finished != 1 {
		t.Errorf("ChangeCipherSpec %v, encrypted handshake records %d", ccs, finished)
	}
}

func appLens(evs []Event, overhead int) []int {
	var out []int
	for _, r := range records(evs) {
		if r.Type == TypeApplicationData {
			out = append(out, r.Len-overhead)
		}
	}
	return out
}
