package reconstruct_test

import (
	"testing"
	"time"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct"
)

// The response parser parked while a HEAD waits for its answer (in that
// request's txState) is not lost when the next request makes addPending
// give the HEAD up (one request may wait): the FIFO still says the first
// response has no body, so both responses parse, without a desync, and
// the bodyless one is not read as 5 bytes into the next.
func TestParkedParserSurvivesPendingOverflow(t *testing.T) {
	f := newFlow(reconstruct.Config{MaxPendingRequests: 1})
	f.handshake()
	for _, req := range []string{"HEAD /a HTTP/1.1\r\nHost: x\r\n\r\n", "GET /b HTTP/1.1\r\nHost: x\r\n\r\n"} {
		f.send(true, capture.FlagACK|capture.FlagPSH, f.cNext, f.sNext, []byte(req))
		f.cNext += uint32(len(req))
		f.ts += int64(time.Millisecond)
	}
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok")
	f.send(false, capture.FlagACK|capture.FlagPSH, f.sNext, f.cNext, resp)
	f.sNext += uint32(len(resp))
	f.ts += int64(time.Millisecond)
	f.send(true, capture.FlagACK, f.cNext, f.sNext, nil)
	f.finish(t)
	var statuses []int
	for _, tx := range f.out.txs {
		statuses = append(statuses, tx.Status)
	}
	if st := f.tr.Stats(); st.ParseDesyncs != 0 || st.PendingOverflows != 1 {
		t.Errorf("%d desyncs, %d pending overflows: want 0 and 1", st.ParseDesyncs, st.PendingOverflows)
	}
	if len(statuses) != 3 || statuses[0] != 0 || statuses[1] != 200 || statuses[2] != 201 {
		t.Errorf("statuses %v: want the HEAD given up (0), then 200 and 201", statuses)
	}
}
