package reconstruct_test

import (
	"testing"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/synth"
)

// A client gives up a connect whose SYN/ACKs were lost on their way to it
// and opens a new socket that the kernel binds to the same port (seen on
// the testbed with Go's dialer at 10% SYN/ACK loss). The server still
// holds the old attempt half open, so it answers the new SYN with a
// challenge ACK for the old ISN (RFC 5961); the client resets that old
// attempt (RST with the old sequence number) and resends its SYN. The
// challenge ACK and the reset belong to the old incarnation: the new
// connection goes on, and its request and response are measured, the
// resent SYN counted as a lost one.
func TestPortReuseChallengeAckAndReset(t *testing.T) {
	// Both orders of the two ISNs: the old one's numbers then lie ahead of
	// the new stream, or behind it.
	for _, isns := range [][2]uint32{{0x10000000, 0x9000f000}, {0x9000f000, 0x10000000}} {
		portReuse(t, isns[0], isns[1])
	}
}

func portReuse(t *testing.T, oldISN, newISN uint32) {
	out := analyze(t, defaultOpts(), reconstruct.Config{}, func(w *synth.Writer) {
		old := linuxConn(w, oldISN)
		old.SYN(synth.T(0))
		old.SYNACK(synth.T(0) + 40*us)   // lost on its way to the client
		old.SYNACK(synth.T(0) + 1000*ms) // so is the server's resend
		fresh := linuxConn(w, newISN)
		second := synth.T(0) + 1400*ms
		fresh.SYN(second)
		old.ServerAck(second + 12*us) // the challenge ACK: the old ISN's
		old.ClientRST(second + 2*D + 12*us)
		again := second + 120*ms
		fresh.SYN(again)
		fresh.SYNACK(again + 40*us)
		fresh.ACK(again + 40*us + 2*D)
		est := again + 40*us + 2*D
		fresh.Client(est, get("/o/p9-6.png"))
		fresh.Server(est+2*ms, synth.Response(200, "image/png", synth.Body(500)))
		fresh.ClientAck(est + 2*ms + 2*D)
		fresh.Client(est+2*ms+2*D+1*ms, get("/o/p9-9.js"))
		fresh.Server(est+2*ms+2*D+3*ms, synth.Response(200, "text/javascript", synth.Body(500)))
		fresh.ClientAck(est + 2*ms + 2*D + 3*ms + 2*D)
	})
	if len(out.txs) != 2 {
		t.Fatalf("ISNs %#x then %#x: %d transactions, want the new connection's 2 (connections: %d)", oldISN, newISN, len(out.txs), len(out.conns))
	}
	tx := out.txs[0]
	est := synth.T(0) + 1400*ms + 120*ms + 40*us + 2*D
	// The client began connecting with the new SYN: its first copy drew
	// only the challenge ACK, so the wait for the resend is connect time.
	checkTx(t, tx, want{start: synth.T(0) + 1400*ms - D, tconn: est - (synth.T(0) + 1400*ms), tserver: 2*ms + 2*D,
		total: est - (synth.T(0) + 1400*ms) + 2*ms + 2*D})
	if tx.URL != "/o/p9-6.png" || out.txs[1].URL != "/o/p9-9.js" {
		t.Errorf("URLs %q, %q", tx.URL, out.txs[1].URL)
	}
	var fresh *reconstruct.Connection
	for _, c := range out.conns {
		if c.Established != 0 {
			fresh = c
		}
	}
	if fresh == nil || fresh.Flags&reconstruct.FlagReset != 0 || len(fresh.SYNTimes) != 2 {
		t.Errorf("new connection: %+v", fresh)
	}
	if out.stats.StrayResets != 1 {
		t.Errorf("stray resets %d, want 1", out.stats.StrayResets)
	}
}
