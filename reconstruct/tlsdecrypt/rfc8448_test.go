package tlsdecrypt

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/rtmon/rtmon/reconstruct/tlswire"
)

// RFC 8448 section 3 (Simple 1-RTT Handshake), TLS_AES_128_GCM_SHA256.
// The client random indexes the key log only, so any 32 bytes do.
const (
	rfcClientHSSecret = "b3eddb126e067f35a780b3abf45e2d8f3b1a950738f52e9600746a0e27a55a21"
	rfcServerHSSecret = "b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38"
	rfcClientHSKey    = "dbfaa693d1762c5b666af5d950258d01"
	rfcClientHSIV     = "5bd3c71b836e0b76bb73265f"
	rfcServerHSKey    = "3fce516009c21727d0f2e4e86ee403bc"
	rfcServerHSIV     = "5d313eb2671276ee13000b30"
	// The client's Finished: complete record (58 octets) and its message.
	rfcClientFinishedRecord = "17030300 35" +
		"75ec4dc238cce60b298044a71e219c56cc77b0517fe9b93c7a4bfc44d87f38f8" +
		"0338ac98fc46deb384bd1caeacab6867d726c40546"
	rfcClientFinished = "14000020a8ec436d677634ae525ac1fcebe11a039ec17694fac6e98527b642f2edd5ce61"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRFC8448KeyDerivation(t *testing.T) {
	st := suites[0x1301]
	for _, v := range []struct{ secret, key, iv string }{
		{rfcClientHSSecret, rfcClientHSKey, rfcClientHSIV},
		{rfcServerHSSecret, rfcServerHSKey, rfcServerHSIV},
	} {
		key, iv, err := st.trafficKeys(unhex(t, v.secret))
		if err != nil {
			t.Fatal(err)
		}
		if hex.EncodeToString(key) != v.key || hex.EncodeToString(iv) != v.iv {
			t.Errorf("secret %s…: key %x iv %x, want %s %s", v.secret[:8], key, iv, v.key, v.iv)
		}
	}
}

// TestRFC8448ClientFinished decrypts the trace's client Finished record
// (sequence number 0 of the client handshake key) and checks that the
// session then moved to the client's application key.
func TestRFC8448ClientFinished(t *testing.T) {
	cr := bytes.Repeat([]byte{0xcb}, 32)
	text := "CLIENT_HANDSHAKE_TRAFFIC_SECRET " + hex.EncodeToString(cr) + " " + rfcClientHSSecret + "\n" +
		"CLIENT_TRAFFIC_SECRET_0 " + hex.EncodeToString(cr) + " " + strings.Repeat("77", 32) + "\n"
	s := mustSession(t, text, Params{ClientRandom: cr, Version: VersionTLS13, CipherSuite: 0x1301})
	rec := unhex(t, rfcClientFinishedRecord)
	pt, err := s.Decrypt(ClientToServer, tlswire.ContentType(rec[0]), 0x0303, rec[5:])
	if err != nil {
		t.Fatal(err)
	}
	if pt.Type != tlswire.TypeHandshake || hex.EncodeToString(pt.Data) != rfcClientFinished {
		t.Fatalf("got %s %x", pt.Type, pt.Data)
	}
	if d := s.dirs[ClientToServer]; d.phase != phaseApp || d.cur != d.appKeys {
		t.Errorf("after the client Finished: phase %d", d.phase)
	}
}
