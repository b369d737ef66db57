package reconstruct_test

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"net/netip"
	"reflect"
	"testing"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/reconstruct/tlsdecrypt"
	"github.com/rtmon/rtmon/synth"
)

// runTLS reconstructs a recorded session scripted as in TestKeylessHTTPS
// (a hole over response holePhase's first segment if not 0), with cfg.
func runTLS(t *testing.T, writes []tlsWrite, cfg reconstruct.Config, holePhase int) *collected {
	t.Helper()
	return analyze(t, defaultOpts(), cfg, func(w *synth.Writer) {
		c := w.Conn(client, netip.AddrPortFrom(server.Addr(), 443), 7400, 9400)
		tt := scriptTLSHole(c, writes, 300*us, 30*ms, holePhase)
		last := tt.respLast[len(tt.respLast)-1]
		c.ClientFIN(last + 3*D)
		c.ServerFIN(last + 3*D + 100*us)
		c.ClientAck(last + 5*D)
	})
}

// With the key log, real TLS 1.2 and 1.3 sessions of keep-alive
// HTTP/1.1 give transactions as cleartext does (method, URL, host,
// status, sizes), timed exactly as without keys: a request starts with
// its first record's first byte and ends with its last record, a
// response likewise.
func TestDecryptedHTTPS(t *testing.T) {
	urls := []string{"/", "/app.js?v=2", "/img/logo.png"}
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(version), func(t *testing.T) {
			kl := tlsdecrypt.NewKeyLog(tlsdecrypt.KeyLogOptions{})
			writes := recordTLSSessionKeys(t, version, []string{"http/1.1"}, urls, 20000, kl)
			keyless := runTLS(t, writes, reconstruct.Config{}, 0)
			out := runTLS(t, writes, reconstruct.Config{KeyLog: kl}, 0)
			if len(out.txs) != len(urls) || len(keyless.txs) != len(urls) {
				t.Fatalf("%d transactions decrypted, %d keyless, want %d", len(out.txs), len(keyless.txs), len(urls))
			}
			for i, tx := range out.txs {
				if tx.Method != "GET" || tx.URL != urls[i] || tx.Host != "shop.example.test" || tx.Status != 200 ||
					tx.BodyBytes != 20000 || tx.ContentType != "text/plain" || tx.Flags&reconstruct.FlagTLS == 0 ||
					tx.Flags&(reconstruct.FlagHTTP2|reconstruct.FlagHole|reconstruct.FlagIncomplete) != 0 {
					t.Errorf("tx %d: %s %q host %q status %d body %d type %q flags %v", i, tx.Method, tx.URL, tx.Host,
						tx.Status, tx.BodyBytes, tx.ContentType, tx.Flags)
				}
				if err := tx.Invariants(); err != nil {
					t.Errorf("tx %d: %v", i, err)
				}
				k := keyless.txs[i]
				got := [9]int64{tx.Start, tx.Tconn, tx.Ttls, tx.Trequest, tx.Tserver, tx.Ttransfer, tx.Total, tx.RequestFirst, tx.ResponseLast}
				want := [9]int64{k.Start, k.Tconn, k.Ttls, k.Trequest, k.Tserver, k.Ttransfer, k.Total, k.RequestFirst, k.ResponseLast}
				if got != want {
					t.Errorf("tx %d: start/tconn/ttls/treq/tserver/ttransfer/total/reqfirst/resplast %v, keyless %v", i, durs(got[:]), durs(want[:]))
				}
			}
			conn := one(t, "connection", out.conns)
			if conn.Flags&reconstruct.FlagHTTP2 != 0 || conn.Ttls != keyless.conns[0].Ttls || conn.TLSVersion != version {
				t.Errorf("connection: flags %v ttls %v (keyless %v) version %#x", conn.Flags, conn.Ttls, keyless.conns[0].Ttls, conn.TLSVersion)
			}
			st := out.stats
			if st.TLSDecrypted != 1 || st.TLSKeyless != 0 || st.TLSNoKey != 0 || st.TLSDecryptErrors != 0 || st.MemoryInUse != 0 {
				t.Errorf("stats: decrypted %d keyless %d no key %d errors %d memory %d", st.TLSDecrypted, st.TLSKeyless,
					st.TLSNoKey, st.TLSDecryptErrors, st.MemoryInUse)
			}
			if k := keyless.stats; k.TLSDecrypted+k.TLSKeyless+k.TLSNoKey+k.TLSDecryptErrors != 0 {
				t.Errorf("keyless run counts decryption: %+v", k)
			}
		})
	}
}

// TLS 1.3 hides the server's ALPN choice: a client that offered h2 but
// got HTTP/1.1 is read as such once its first request is decrypted, not
// flagged HTTP/2.
func TestDecryptedHTTPSOfferedH2(t *testing.T) {
	kl := tlsdecrypt.NewKeyLog(tlsdecrypt.KeyLogOptions{})
	writes := recordTLSSessionKeys(t, tls.VersionTLS13, []string{"h2", "http/1.1"}, []string{"/a", "/b"}, 3000, kl)
	out := runTLS(t, writes, reconstruct.Config{KeyLog: kl}, 0)
	conn := one(t, "connection", out.conns)
	if len(out.txs) != 2 || conn.Flags&reconstruct.FlagHTTP2 != 0 || out.stats.HTTP2Connections != 0 {
		t.Fatalf("%d transactions, connection flags %v, %d HTTP/2 connections", len(out.txs), conn.Flags, out.stats.HTTP2Connections)
	}
	if out.txs[1].URL != "/b" || out.txs[1].Status != 200 {
		t.Errorf("second transaction %q %d", out.txs[1].URL, out.txs[1].Status)
	}
}

// A connection whose secrets the key log lacks is timed keyless, exactly
// as without a key log, and counted.
func TestDecryptNoKeyFallsBack(t *testing.T) {
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		other := tlsdecrypt.NewKeyLog(tlsdecrypt.KeyLogOptions{})
		recordTLSSessionKeys(t, version, []string{"http/1.1"}, []string{"/"}, 100, other) // another connection's keys
		writes := recordTLSSession(t, version, []string{"http/1.1"}, []string{"/", "/x"}, 5000)
		keyless := runTLS(t, writes, reconstruct.Config{}, 0)
		out := runTLS(t, writes, reconstruct.Config{KeyLog: other}, 0)
		if !reflect.DeepEqual(out.txs, keyless.txs) || !reflect.DeepEqual(out.conns, keyless.conns) {
			t.Errorf("%s: records differ from keyless", tls.VersionName(version))
		}
		st := out.stats
		if st.TLSNoKey != 1 || st.TLSKeyless != 1 || st.TLSDecrypted != 0 || st.TLSDecryptErrors != 0 || st.MemoryInUse != 0 {
			t.Errorf("%s: stats no key %d keyless %d decrypted %d errors %d memory %d", tls.VersionName(version),
				st.TLSNoKey, st.TLSKeyless, st.TLSDecrypted, st.TLSDecryptErrors, st.MemoryInUse)
		}
	}
}

// A key for a suite tlsdecrypt does not support (TLS 1.2 CBC) is an
// error, counted; the connection is timed keyless as without a key log.
func TestDecryptUnsupportedSuiteFallsBack(t *testing.T) {
	kl := tlsdecrypt.NewKeyLog(tlsdecrypt.KeyLogOptions{})
	writes := recordTLSSessionWith(t, tls.VersionTLS12, []string{"http/1.1"}, []string{"/", "/x"}, 5000, func(cli, srv *tls.Config) {
		cli.KeyLogWriter = kl
		cli.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}
		srv.CipherSuites = cli.CipherSuites
	})
	keyless := runTLS(t, writes, reconstruct.Config{}, 0)
	out := runTLS(t, writes, reconstruct.Config{KeyLog: kl}, 0)
	if !reflect.DeepEqual(out.txs, keyless.txs) || !reflect.DeepEqual(out.conns, keyless.conns) || len(out.txs) != 2 {
		t.Errorf("records differ from keyless (%d transactions)", len(out.txs))
	}
	st := out.stats
	if st.TLSDecryptErrors != 1 || st.TLSKeyless != 1 || st.TLSNoKey != 0 || st.TLSDecrypted != 0 {
		t.Errorf("stats: errors %d keyless %d no key %d decrypted %d", st.TLSDecryptErrors, st.TLSKeyless, st.TLSNoKey, st.TLSDecrypted)
	}
}

// A hole over a record header mid-connection ends decryption (counted):
// the transaction it hits is flagged and the rest is timed keyless, as
// the same capture is without keys.
func TestDecryptHoleFallsBack(t *testing.T) {
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		kl := tlsdecrypt.NewKeyLog(tlsdecrypt.KeyLogOptions{})
		writes := recordTLSSessionKeys(t, version, []string{"http/1.1"}, []string{"/", "/b", "/c"}, 20000, kl)
		keyless := runTLS(t, writes, reconstruct.Config{}, 2)
		out := runTLS(t, writes, reconstruct.Config{KeyLog: kl}, 2)
		name := tls.VersionName(version)
		if len(out.txs) < 3 || len(out.txs) != len(keyless.txs) {
			t.Fatalf("%s: %d transactions, %d keyless", name, len(out.txs), len(keyless.txs))
		}
		st := out.stats
		if st.TLSDecrypted != 1 || st.TLSDecryptErrors != 1 || st.TLSKeyless != 1 || st.TLSFramingLost != 1 || st.MemoryInUse != 0 {
			t.Errorf("%s: stats decrypted %d errors %d keyless %d framing lost %d memory %d", name, st.TLSDecrypted,
				st.TLSDecryptErrors, st.TLSKeyless, st.TLSFramingLost, st.MemoryInUse)
		}
		if tx := out.txs[0]; tx.URL != "/" || tx.Status != 200 || tx.Flags&reconstruct.FlagHole != 0 {
			t.Errorf("%s: first transaction (before the hole) %q %d flags %v", name, tx.URL, tx.Status, tx.Flags)
		}
		if tx := out.txs[1]; tx.URL != "/b" || tx.Flags&reconstruct.FlagHole == 0 {
			t.Errorf("%s: second transaction (the hole) %q flags %v", name, tx.URL, tx.Flags)
		}
		for i, tx := range out.txs {
			if err := tx.Invariants(); err != nil {
				t.Errorf("%s: tx %d: %v", name, i, err)
			}
			if i >= 2 && (tx.URL != "" || tx.Flags&reconstruct.FlagTLS == 0) {
				t.Errorf("%s: tx %d (keyless) %q flags %v", name, i, tx.URL, tx.Flags)
			}
			k := keyless.txs[i]
			got := [6]int64{tx.Start, tx.Total, tx.RequestFirst, tx.RequestLast, tx.ResponseFirst, tx.ResponseLast}
			want := [6]int64{k.Start, k.Total, k.RequestFirst, k.RequestLast, k.ResponseFirst, k.ResponseLast}
			if got != want || tx.Flags != k.Flags {
				t.Errorf("%s: tx %d: times %v flags %v, keyless %v flags %v", name, i, got, tx.Flags, want, k.Flags)
			}
		}
	}
}

// FuzzTrackerDecrypt is FuzzTracker with a key log: seeded with real TLS
// 1.2 and 1.3 sessions whose secrets it holds, so that mutations reach
// decryption, its failures and the fallback to keyless timing.
func FuzzTrackerDecrypt(f *testing.F) {
	kl := tlsdecrypt.NewKeyLog(tlsdecrypt.KeyLogOptions{})
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		writes := recordTLSSessionKeys(f, version, []string{"http/1.1"}, []string{"/", "/b"}, 600, kl)
		f.Add(fuzzSession(writes))
	}
	// TLS 1.3 0-RTT: early data before the ServerHello, 0.5-RTT data.
	random := bytes.Repeat([]byte{0x44}, 32)
	addEarlySecrets(f, kl, random)
	f.Add(fuzzSession(buildEarlyFlight(f, random, 700, false).writes()))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzTrack(t, data, kl)
	})
}

// fuzzSession encodes a recorded session as FuzzTracker input: a TCP
// handshake, then each side's bytes in segments of a multiple of 8 bytes
// (what the encoding allows), each acknowledging the other side.
func fuzzSession(writes []tlsWrite) []byte {
	var out []byte
	seg := func(flags, dir byte, seq, ack uint32, payload []byte) {
		out = append(out, flags, byte(len(payload)/8)<<3|dir)
		out = binary.BigEndian.AppendUint32(out, seq)
		out = binary.BigEndian.AppendUint32(out, ack)
		out = append(out, payload...)
	}
	cseq, sseq := uint32(1000), uint32(5000)
	seg(0x02, 0, cseq-1, 0, nil)
	seg(0x12, 1, sseq-1, cseq, nil)
	seg(0x10, 0, cseq, sseq, nil)
	var carry [2][]byte
	for _, w := range writes {
		dir := byte(1)
		if w.fromClient {
			dir = 0
		}
		b := append(carry[dir], w.b...)
		for len(b) >= 8 {
			n := min(len(b)/8*8, 248)
			if dir == 0 {
				seg(0x18, 0, cseq, sseq, b[:n])
				cseq += uint32(n)
			} else {
				seg(0x18, 1, sseq, cseq, b[:n])
				sseq += uint32(n)
			}
			b = b[n:]
		}
		carry[dir] = append([]byte(nil), b...)
	}
	return out
}

// A record that fails authentication (altered on the way, or a wrong key)
// ends decryption there, counted: what came before stays decrypted, the
// rest is timed keyless, and no altered plaintext is ever parsed.
func TestDecryptAuthFailureFallsBack(t *testing.T) {
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		kl := tlsdecrypt.NewKeyLog(tlsdecrypt.KeyLogOptions{})
		writes := recordTLSSessionKeys(t, version, []string{"http/1.1"}, []string{"/", "/b", "/c"}, 2000, kl)
		for i := range writes {
			if w := &writes[i]; w.fromClient && w.phase == 2 {
				w.b = append([]byte(nil), w.b...)
				w.b[len(w.b)-1] ^= 1 // the second request's tag
				break
			}
		}
		out := runTLS(t, writes, reconstruct.Config{KeyLog: kl}, 0)
		name := tls.VersionName(version)
		st := out.stats
		if len(out.txs) != 3 || st.TLSDecrypted != 1 || st.TLSDecryptErrors != 1 || st.TLSKeyless != 1 {
			t.Fatalf("%s: %d transactions; stats decrypted %d errors %d keyless %d", name, len(out.txs), st.TLSDecrypted,
				st.TLSDecryptErrors, st.TLSKeyless)
		}
		for i, want := range []string{"/", "", ""} {
			if tx := out.txs[i]; tx.URL != want || tx.Invariants() != nil {
				t.Errorf("%s: tx %d url %q (want %q) flags %v: %v", name, i, tx.URL, want, tx.Flags, tx.Invariants())
			}
		}
	}
}
