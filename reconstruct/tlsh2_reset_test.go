package reconstruct_test

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/reconstruct/tlsdecrypt"
	"github.com/rtmon/rtmon/synth"
)

// A server may answer a request before reading its body and then reset
// the stream with NO_ERROR to stop the body (nginx does for beacons): the
// response was whole at the client with its END_STREAM, so the stream is
// complete, and the reset's record, lost on the way to the client and
// resent, is not the response's (seen on the HTTPS testbed: a Chromium
// beacon timed 204 ms where the client's wire had 80 ms).
func TestDecryptedHTTP2ResetAfterResponse(t *testing.T) {
	kl := tlsdecrypt.NewKeyLog(tlsdecrypt.KeyLogOptions{})
	writes := recordH2ResetAfterResponse(t, kl)
	const rto = 200 * ms
	for _, lost := range []bool{false, true} {
		var respLast int64
		out := analyze(t, defaultOpts(), reconstruct.Config{KeyLog: kl}, func(w *synth.Writer) {
			c := w.Conn(client, netip.AddrPortFrom(server.Addr(), 443), 7600, 9600)
			at := handshake(c, synth.T(0))
			prevClient := true
			for _, wr := range writes {
				if wr.fromClient {
					if !prevClient {
						at += 2 * D
					}
					c.Client(at, wr.b)
					at += 50 * us
					prevClient = true
					continue
				}
				if prevClient {
					at += 300 * us
				}
				rel := c.ServerNext()
				times := c.ServerMSS(at, wr.b, 1448, 20*us)
				at = times[len(times)-1] + 20*us
				prevClient = false
				if wr.phase == 1 {
					respLast = times[len(times)-1]
				}
				if wr.phase != 2 {
					c.ClientAck(at + 2*D - 20*us)
					continue
				}
				// The reset, last of all: lost on the way, or not.
				if lost {
					end := rel + uint32(len(wr.b))
					c.ClientAckToSACK(at+2*D, rel, capture.SACKBlock{Left: end, Right: end})
					c.ServerAt(times[0]+rto, rel, wr.b)
					at = times[0] + rto
				}
				c.ClientAck(at + 2*D)
				break
			}
			c.ClientFIN(at + 3*D)
			c.ServerFIN(at + 3*D + 100*us)
			c.ClientAck(at + 5*D)
		})
		var tx *reconstruct.Transaction
		for _, x := range out.txs {
			if x.URL == "/beacon" {
				tx = x
			}
		}
		if tx == nil {
			t.Fatalf("lost %v: no /beacon transaction in %d", lost, len(out.txs))
		}
		if tx.Status != 204 || tx.Flags&reconstruct.FlagIncomplete != 0 || tx.End != respLast+D {
			t.Errorf("reset lost %v: status %d flags %v, end %v after the response's last byte left, want %v", lost, tx.Status,
				tx.Flags, time.Duration(tx.End-respLast), time.Duration(D))
		}
	}
}

// recordH2ResetAfterResponse records Go's HTTP/2 client POSTing to a
// server that answers 204 before the body and then resets the stream
// (NO_ERROR): the response's writes are phase 1, the reset's phase 2, and
// the recording ends with the reset.
func recordH2ResetAfterResponse(t *testing.T, keyLog io.Writer) []tlsWrite {
	t.Helper()
	writes := recordH2Framed(t, keyLog, func(fr *http2.Framer, rec *tlsRecorder, h *http2.HeadersFrame) bool {
		var block bytes.Buffer
		hpack.NewEncoder(&block).WriteField(hpack.HeaderField{Name: ":status", Value: "204"})
		rec.setPhase(1)
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: h.StreamID, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})
		rec.setPhase(2)
		fr.WriteRSTStream(h.StreamID, http2.ErrCodeNo)
		return true
	}, func(cc *http2.ClientConn) {
		body, _ := io.Pipe() // the body the server does not wait for
		req, _ := http.NewRequest("POST", "https://shop.example.test/beacon", body)
		req.ContentLength = 6
		resp, err := cc.RoundTrip(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
	})
	var out []tlsWrite
	for _, w := range writes {
		out = append(out, w)
		if w.phase == 2 && !w.fromClient {
			break
		}
	}
	return out
}

// recordH2Framed records Go's HTTP/2 client (client, on its connection)
// against a server scripted frame by frame over TLS 1.3 on loopback TCP
// (net.Pipe would deadlock the framer, which reads and writes on one
// goroutine): the server answers the client's preface and SETTINGS, and
// each request's HEADERS goes to headers, which writes the answer
// (setting the recorder's phases) and reports whether the server is done,
// when it closes. It returns every write of both sides, in order.
func recordH2Framed(t *testing.T, keyLog io.Writer, headers func(fr *http2.Framer, rec *tlsRecorder, h *http2.HeadersFrame) (done bool),
	client func(cc *http2.ClientConn)) []tlsWrite {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cs, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ss, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	rec := &tlsRecorder{}
	srv := tls.Server(recordingConn{ss, rec, false}, &tls.Config{Certificates: []tls.Certificate{testCertificate(t)},
		NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS13})
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer srv.Close()
		if srv.Handshake() != nil {
			return
		}
		if _, err := io.ReadFull(srv, make([]byte, len(http2.ClientPreface))); err != nil {
			return
		}
		fr := http2.NewFramer(srv, srv)
		fr.WriteSettings()
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					fr.WriteSettingsAck()
				}
			case *http2.HeadersFrame:
				if headers(fr, rec, f) {
					return
				}
			}
		}
	}()
	cli := tls.Client(recordingConn{cs, rec, true}, &tls.Config{ServerName: "shop.example.test", InsecureSkipVerify: true,
		NextProtos: []string{"h2"}, KeyLogWriter: keyLog, MinVersion: tls.VersionTLS13})
	if err := cli.Handshake(); err != nil {
		t.Fatal(err)
	}
	cc, err := (&http2.Transport{}).NewClientConn(cli)
	if err != nil {
		t.Fatal(err)
	}
	client(cc)
	<-done
	cc.Close()
	cli.Close()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]tlsWrite(nil), rec.writes...)
}
