package reconstruct_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/crypto/cryptobyte"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/reconstruct/tlsdecrypt"
	"github.com/rtmon/rtmon/synth"
)

// TLS 1.3 0-RTT, built record by record (no Go TLS stack sends early
// data): a resumed handshake whose ClientHello offers early data and is
// followed by the request, sealed with the early secret; the server's
// flight (EncryptedExtensions, Finished), its answer right after it, before
// the client's Finished (0.5-RTT data), and a session ticket once that
// Finished came. The testbed checks the same against nginx and openssl
// s_client (TestHTTPSEarlyData).

// earlySecrets are the connection's key log secrets, by label.
var earlySecrets = map[string][]byte{
	"CLIENT_EARLY_TRAFFIC_SECRET":     bytes.Repeat([]byte{1}, 32),
	"CLIENT_HANDSHAKE_TRAFFIC_SECRET": bytes.Repeat([]byte{2}, 32),
	"SERVER_HANDSHAKE_TRAFFIC_SECRET": bytes.Repeat([]byte{3}, 32),
	"CLIENT_TRAFFIC_SECRET_0":         bytes.Repeat([]byte{4}, 32),
	"SERVER_TRAFFIC_SECRET_0":         bytes.Repeat([]byte{5}, 32),
}

// sealer13 seals TLS_AES_128_GCM_SHA256 records under one traffic secret.
type sealer13 struct {
	aead cipher.AEAD
	iv   []byte
	seq  uint64
}

func expandLabel(t testing.TB, secret []byte, label string, n int) []byte {
	var b cryptobyte.Builder
	b.AddUint16(uint16(n))
	b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte("tls13 " + label)) })
	b.AddUint8LengthPrefixed(func(*cryptobyte.Builder) {})
	out, err := hkdf.Expand(sha256.New, secret, string(b.BytesOrPanic()), n)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func newSealer13(t testing.TB, secret []byte) *sealer13 {
	block, err := aes.NewCipher(expandLabel(t, secret, "key", 16))
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	return &sealer13{aead: aead, iv: expandLabel(t, secret, "iv", 12)}
}

// record seals data of inner type typ (22 handshake, 23 application data)
// as one record.
func (s *sealer13) record(typ byte, data []byte) []byte {
	inner := append(slices.Clone(data), typ)
	n := len(inner) + s.aead.Overhead()
	hdr := []byte{23, 3, 3, byte(n >> 8), byte(n)}
	nonce := slices.Clone(s.iv)
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], s.seq)
	for i := range seq {
		nonce[4+i] ^= seq[i]
	}
	s.seq++
	return s.aead.Seal(hdr, nonce, inner, hdr)
}

// hello frames a handshake message of type typ in a cleartext record.
func hello(typ byte, body func(*cryptobyte.Builder)) []byte {
	var b cryptobyte.Builder
	b.AddUint8(22)
	b.AddUint16(0x0301)
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint8(typ)
		b.AddUint24LengthPrefixed(body)
	})
	return b.BytesOrPanic()
}

func extension(b *cryptobyte.Builder, typ uint16, data func(*cryptobyte.Builder)) {
	b.AddUint16(typ)
	b.AddUint16LengthPrefixed(data)
}

// earlyHellos are a resuming ClientHello that offers early data, and the
// ServerHello that accepts the session.
func earlyHellos(random []byte) (ch, sh []byte) {
	sid := bytes.Repeat([]byte{9}, 32)
	ch = hello(1, func(b *cryptobyte.Builder) {
		b.AddUint16(0x0303)
		b.AddBytes(random)
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(sid) })
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint16(0x1301) })
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint8(0) })
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			extension(b, 0, func(b *cryptobyte.Builder) { // server_name
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint8(0)
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte("example.test")) })
				})
			})
			extension(b, 43, func(b *cryptobyte.Builder) { // supported_versions
				b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint16(0x0304) })
			})
			extension(b, 42, func(*cryptobyte.Builder) {}) // early_data
		})
	})
	sh = hello(2, func(b *cryptobyte.Builder) {
		b.AddUint16(0x0303)
		b.AddBytes(bytes.Repeat([]byte{7}, 32))
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(sid) })
		b.AddUint16(0x1301)
		b.AddUint8(0)
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			extension(b, 43, func(b *cryptobyte.Builder) { b.AddUint16(0x0304) })
			extension(b, 41, func(b *cryptobyte.Builder) { b.AddUint16(0) }) // pre_shared_key
		})
	})
	return ch, sh
}

// earlyFlight is the 0-RTT connection's writes: phase 0 the handshake,
// 1 the early request and its answer, 2 the ticket after the client's
// Finished.
type earlyFlight struct {
	ch, early, sh, serverFlight, response, clientFinish, ticket []byte
}

func buildEarlyFlight(t testing.TB, random []byte, bodySize int, ticketFirst bool) earlyFlight {
	var f earlyFlight
	f.ch, f.sh = earlyHellos(random)
	early := newSealer13(t, earlySecrets["CLIENT_EARLY_TRAFFIC_SECRET"])
	f.early = early.record(23, get("/early"))
	serverHS := newSealer13(t, earlySecrets["SERVER_HANDSHAKE_TRAFFIC_SECRET"])
	ee := []byte{8, 0, 0, 6, 0, 4, 0, 42, 0, 0} // EncryptedExtensions: early_data accepted
	fin := append([]byte{20, 0, 0, 32}, bytes.Repeat([]byte{0xf}, 32)...)
	f.serverFlight = append(serverHS.record(22, ee), serverHS.record(22, fin)...)
	serverApp := newSealer13(t, earlySecrets["SERVER_TRAFFIC_SECRET_0"])
	ticket := func() []byte { return serverApp.record(22, append([]byte{4, 0, 0, 200}, make([]byte, 200)...)) }
	if ticketFirst {
		f.ticket = ticket()
	}
	resp := synth.ResponseLen(200, "text/html", bodySize)
	for len(resp) > 0 {
		n := min(len(resp), 16384)
		f.response = append(f.response, serverApp.record(23, resp[:n])...)
		resp = resp[n:]
	}
	f.clientFinish = early.record(22, []byte{5, 0, 0, 0}) // EndOfEarlyData
	clientHS := newSealer13(t, earlySecrets["CLIENT_HANDSHAKE_TRAFFIC_SECRET"])
	f.clientFinish = append(f.clientFinish, clientHS.record(22, fin)...)
	if !ticketFirst {
		f.ticket = ticket()
	}
	return f
}

// writes is the flight as FuzzTrackerDecrypt's seed takes it.
func (f earlyFlight) writes() []tlsWrite {
	var w []tlsWrite
	for _, x := range []struct {
		client bool
		b      []byte
	}{{true, f.ch}, {true, f.early}, {false, f.sh}, {false, f.serverFlight}, {false, f.response},
		{true, f.clientFinish}, {false, f.ticket}} {
		w = append(w, tlsWrite{fromClient: x.client, b: x.b})
	}
	return w
}

// flightAnswered: the client's Finished passes the capture point this long
// after its early request (the server's flight 320 µs after it, and the
// client's answer a round trip later).
const flightAnswered = 320*us + 2*D

func earlyKeyLog(t testing.TB, random []byte) *tlsdecrypt.KeyLog {
	kl := tlsdecrypt.NewKeyLog(tlsdecrypt.KeyLogOptions{})
	addEarlySecrets(t, kl, random)
	return kl
}

func addEarlySecrets(t testing.TB, kl *tlsdecrypt.KeyLog, random []byte) {
	for label, secret := range earlySecrets {
		if _, err := fmt.Fprintf(kl, "%s %s %s\n", label, hex.EncodeToString(random), hex.EncodeToString(secret)); err != nil {
			t.Fatal(err)
		}
	}
}

// An early-data request did not wait for the handshake: its transaction
// runs from the SYN to its answer's last byte with no Ttls, the answer
// sent before the client's Finished came is its response, and the ticket
// after that Finished is not; decrypted and keyless alike.
func TestEarlyDataRequest(t *testing.T) {
	random := bytes.Repeat([]byte{0x42}, 32)
	for _, tc := range []struct {
		size     int
		serve    int64 // the server's time to answer
		straddle bool  // its first record begins before the client's Finished and ends after it
		// lag: the client's ClientHello comes this long after its
		// connect (a loaded client: the testbed's s_client once took
		// 80 ms); the request is still no preconnect's. With a lag the
		// client acknowledges the answer before it sends its Finished, so
		// the transaction is timed before the handshake is seen to end.
		lag int64
	}{{100, 30 * ms, false, 0}, {40000, 30 * ms, false, 0}, {100, 70 * ms, false, 0}, {40000, 70 * ms, false, 0}, {40000, 0, true, 0},
		{100, 10 * ms, false, 80 * ms}} {
		size := tc.size
		f := buildEarlyFlight(t, random, size, !tc.straddle && tc.serve > flightAnswered)
		for _, keys := range []bool{true, false} {
			cfg := reconstruct.Config{}
			if keys {
				cfg.KeyLog = earlyKeyLog(t, random)
			}
			var est, reqAt, respFirst, respLast, fin int64
			out := analyze(t, defaultOpts(), cfg, func(w *synth.Writer) {
				o := synth.DefaultConnOptions()
				o.ClientRTT = 2 * D // the client acknowledges what reached it
				c := w.ConnWith(client, netip.AddrPortFrom(server.Addr(), 443), 7200, 9200, o)
				est = handshake(c, synth.T(0))
				c.Client(est+tc.lag, f.ch)
				reqAt = est + tc.lag + 50*us
				c.Client(reqAt, f.early)
				c.Server(reqAt+300*us, f.sh)
				c.Server(reqAt+320*us, f.serverFlight)
				fin = reqAt + flightAnswered
				answer := func(b []byte, at int64) {
					times := c.ServerMSS(at, b, 1448, 20*us)
					if respFirst == 0 {
						respFirst = recordDoneAt(b, 0, times)
					}
					respLast = times[len(times)-1]
				}
				respFirst = 0
				switch {
				case tc.straddle:
					// The answer's first record is half sent when the
					// client's Finished comes.
					answer(f.response[:8*1448], fin-200*us)
					c.Client(fin, f.clientFinish)
					answer(f.response[8*1448:], fin+20*us)
					respFirst = fin + 20*us + 3*20*us // that record's rest, 16406 bytes in all
				case tc.lag > 0:
					answer(f.response, reqAt+tc.serve)
					c.ClientAck(respLast + 2*D)
					fin = respLast + 2*D + 500*us
					c.Client(fin, f.clientFinish)
				case reqAt+tc.serve < fin:
					answer(f.response, reqAt+tc.serve) // 0.5-RTT data
					c.Client(fin, f.clientFinish)
				default:
					c.Client(fin, f.clientFinish)
				}
				c.Server(max(respLast, fin)+300*us, f.ticket)
				if !tc.straddle && reqAt+tc.serve > fin {
					answer(f.response, reqAt+tc.serve)
				}
				c.ClientAck(max(respLast, fin) + 2*D)
				end := max(respLast, fin) + 3*D
				c.ServerFIN(end)
				c.ClientFIN(end + 2*D)
				c.ServerAck(end + 2*D + 100*us)
			})
			name := fmt.Sprintf("body %d, answer after %v (straddling the Finished %v), ClientHello %v after the connect, keys %v",
				size, time.Duration(tc.serve), tc.straddle, time.Duration(tc.lag), keys)
			tx := one(t, name+": transaction", out.txs)
			conn := one(t, name+": connection", out.conns)
			if tx.Flags&reconstruct.FlagEarlyData == 0 || conn.Flags&reconstruct.FlagEarlyData == 0 {
				t.Errorf("%s: flags %v / %v, want early_data on both", name, tx.Flags.Names(), conn.Flags.Names())
			}
			if keys && tx.URL != "/early" {
				t.Errorf("%s: url %q, want /early", name, tx.URL)
			}
			if conn.Ttls != fin-est {
				t.Errorf("%s: connection ttls %d, want %d (the handshake still took its time)", name, conn.Ttls, fin-est)
			}
			checkTLSTx(t, tx, want{
				start: synth.T(0) - D, tconn: 100*us + 2*D, ttls: 0, trequest: reqAt - est,
				tserver: respFirst - reqAt + 2*D, ttransfer: respLast - respFirst,
				total: respLast + D - (synth.T(0) - D),
			})
		}
	}
}

// A server may refuse early data (a ticket it cannot use for it, a replay
// guard): its EncryptedExtensions lack early_data, the client sends no
// EndOfEarlyData, and sends its request again after its Finished. The
// request is timed from that second sending, and the early records give
// no transaction.
func TestEarlyDataRejected(t *testing.T) {
	random := bytes.Repeat([]byte{0x43}, 32)
	ch, sh := earlyHellos(random)
	early := newSealer13(t, earlySecrets["CLIENT_EARLY_TRAFFIC_SECRET"]).record(23, get("/early"))
	serverHS := newSealer13(t, earlySecrets["SERVER_HANDSHAKE_TRAFFIC_SECRET"])
	fin := append([]byte{20, 0, 0, 32}, bytes.Repeat([]byte{0xf}, 32)...)
	flight := append(serverHS.record(22, []byte{8, 0, 0, 2, 0, 0}), serverHS.record(22, fin)...)
	clientFin := newSealer13(t, earlySecrets["CLIENT_HANDSHAKE_TRAFFIC_SECRET"]).record(22, fin)
	again := newSealer13(t, earlySecrets["CLIENT_TRAFFIC_SECRET_0"]).record(23, get("/early"))
	resp := newSealer13(t, earlySecrets["SERVER_TRAFFIC_SECRET_0"]).record(23, synth.ResponseLen(200, "text/html", 500))
	for _, keys := range []bool{true, false} {
		cfg := reconstruct.Config{}
		if keys {
			cfg.KeyLog = earlyKeyLog(t, random)
		}
		var est, finAt, respAt int64
		out := analyze(t, defaultOpts(), cfg, func(w *synth.Writer) {
			o := synth.DefaultConnOptions()
			o.ClientRTT = 2 * D
			c := w.ConnWith(client, netip.AddrPortFrom(server.Addr(), 443), 7300, 9300, o)
			est = handshake(c, synth.T(0))
			c.Client(est, ch)
			c.Client(est+50*us, early)
			c.Server(est+350*us, sh)
			c.Server(est+370*us, flight)
			finAt = est + 370*us + 2*D
			c.Client(finAt, append(slices.Clone(clientFin), again...))
			respAt = finAt + 20*ms
			c.Server(respAt, resp)
			end := respAt + 3*D
			c.ServerFIN(end)
			c.ClientFIN(end + 2*D)
			c.ServerAck(end + 2*D + 100*us)
		})
		tx := one(t, fmt.Sprintf("keys %v: transaction", keys), out.txs)
		conn := one(t, "connection", out.conns)
		if tx.Flags&reconstruct.FlagEarlyData != 0 || conn.Flags&reconstruct.FlagEarlyData == 0 ||
			out.stats.TLSEarlyData != 1 || out.stats.TLSEarlyRejected != 1 {
			t.Errorf("keys %v: flags %v / %v, early data %d rejected %d; want early_data on the connection only, 1 and 1",
				keys, tx.Flags.Names(), conn.Flags.Names(), out.stats.TLSEarlyData, out.stats.TLSEarlyRejected)
		}
		checkTLSTx(t, tx, want{
			start: synth.T(0) - D, tconn: 100*us + 2*D, ttls: finAt - est, trequest: 0,
			tserver: respAt - finAt + 2*D, ttransfer: 0, total: respAt + D - (synth.T(0) - D),
		})
	}
}
