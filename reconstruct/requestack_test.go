package reconstruct_test

import (
	"testing"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/synth"
)

// RequestAcked is the server's first ACK of the whole request: at once on
// a server with room, and only after the client's resends on one whose
// accept queue was full (the handshake ACK and the request were dropped
// until a slot freed), where the wait shows as the gap from RequestLast.
func TestRequestAcked(t *testing.T) {
	req := get("/p.html")
	var acked int64
	out := analyze(t, defaultOpts(), reconstruct.Config{}, func(w *synth.Writer) {
		c := linuxConn(w, 100)
		est := handshake(c, synth.T(0))
		c.Client(est, req)
		acked = est + 100*us
		c.ServerAck(acked)
		c.Server(est+2*ms, synth.Response(200, "text/html", synth.Body(100)))
		c.ClientAck(est + 2*ms + 2*D)
	})
	if tx := one(t, "transaction", out.txs); tx.RequestAcked != acked {
		t.Errorf("server with room: request acked at %+d ns from the server's ACK", tx.RequestAcked-acked)
	}

	var sent int64
	out = analyze(t, defaultOpts(), reconstruct.Config{}, func(w *synth.Writer) {
		c := linuxConn(w, 200)
		t0 := synth.T(0)
		c.SYN(t0)
		c.SYNACK(t0 + 100*us)
		sent = t0 + 100*us + 2*D
		c.ACK(sent)         // dropped: the accept queue is full
		c.Client(sent, req) // dropped too, not acknowledged
		c.ClientAt(sent+300*ms, 0, req)
		c.ClientAt(sent+900*ms, 0, req) // a slot is free: taken
		acked = sent + 900*ms + 50*us
		c.ServerAck(acked)
		c.Server(acked+2*ms, synth.Response(200, "text/html", synth.Body(100)))
		c.ClientAck(acked + 2*ms + 2*D)
	})
	tx := one(t, "transaction", out.txs)
	if tx.RequestAcked != acked {
		t.Errorf("full accept queue: request acked at %+d ns from the server's ACK", tx.RequestAcked-acked)
	}
	if tx.RequestLast != sent {
		t.Errorf("request last byte at %+d ns from its first arrival", tx.RequestLast-sent)
	}
	if err := tx.Invariants(); err != nil {
		t.Error(err)
	}
}
