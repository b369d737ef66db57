package whatif_test

import (
	"fmt"
	"log"
	"net/netip"
	"os"
	"time"

	"github.com/rtmon/rtmon/export"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/whatif"
)

// Predict what FAST SYN would have done for the premium clients: load the
// records rtmon analyze --out wrote, parse a rule, replay, and read the
// class's predicted distribution next to the measured one.
func Example() {
	dir, err := os.MkdirTemp("", "whatif-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	writeRecords(dir) // as rtmon analyze --out DIR would

	ds, err := whatif.Load(dir)
	if err != nil {
		log.Fatal(err)
	}
	rules, err := whatif.ParseRules("IF IP.SRC == 10.4.*.* THEN FAST SYN GAP 200ms")
	if err != nil {
		log.Fatal(err)
	}
	res, err := ds.Evaluate(rules, whatif.Options{Priorities: map[string]whatif.Priority{"premium": whatif.High}})
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range res.Classes {
		fmt.Printf("%s (%s): %d %ss, median %v -> %v, %d affected\n", c.Class, c.Priority, c.Predicted.N, res.Unit,
			time.Duration(c.Measured.P50), time.Duration(c.Predicted.P50), c.Affected)
	}
	// What the prediction takes for granted: rules[0].Actions[0].Assumptions().

	// Output:
	// others (low): 1 transactions, median 45ms -> 45ms, 0 affected
	// premium (high): 1 transactions, median 3.045s -> 245ms, 1 affected
}

// writeRecords writes two page fetches on fresh connections: a premium
// client whose first SYN the server dropped (its retransmission 3 s later
// was answered) and another client that connected at once.
func writeRecords(dir string) {
	w, err := export.NewRecordWriter(dir, export.JSONL)
	if err != nil {
		log.Fatal(err)
	}
	const ms = int64(time.Millisecond)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()
	server := netip.MustParseAddr("192.0.2.80")
	for i, c := range []struct {
		class, client string
		synLoss       int64 // the wait for the SYN retransmission
	}{{"premium", "10.4.0.7", 3000 * ms}, {"others", "198.51.100.9", 0}} {
		start := t0 + int64(i)*10_000*ms
		syns := []int64{start}
		if c.synLoss > 0 {
			syns = append(syns, start+c.synLoss)
		}
		hs := syns[len(syns)-1] // the SYN that was answered
		id := fmt.Sprint("c", i)
		w.Connection(&reconstruct.Connection{ID: id, Client: netip.MustParseAddr(c.client), ClientPort: 40000,
			Server: server, ServerPort: 80, Class: c.class, SYNTimes: syns, SYNACKTimes: []int64{hs + ms},
			Established: hs + 2*ms, FirstSeen: start, RTTClient: 2 * ms, Tconn: c.synLoss + 2*ms, MSSClient: 1460})
		req := hs + 3*ms
		w.Transaction(&reconstruct.Transaction{ID: fmt.Sprint("t", i), ConnectionID: id,
			Client: netip.MustParseAddr(c.client), ClientPort: 40000, Server: server, ServerPort: 80, Class: c.class,
			Method: "GET", URL: "/", Status: 200, ContentType: "text/html", ResponseBytes: 20_000,
			RequestFirst: req, RequestLast: req, ResponseFirst: req + 30*ms, ResponseLast: req + 40*ms,
			Start: start - ms, End: req + 41*ms, RTTClient: 2 * ms,
			Tconn: c.synLoss + 2*ms, Trequest: ms, Tserver: 32 * ms, Ttransfer: 10 * ms, Total: c.synLoss + 45*ms})
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
}
