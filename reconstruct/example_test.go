package reconstruct_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/synth"
)

// printer is a Sink that prints each record as it is handed over.
type printer struct{}

func (printer) Connection(c *reconstruct.Connection) {
	fmt.Printf("connection %v -> %v: %d transaction(s), client RTT %v\n",
		c.Client, c.Server, c.Transactions, time.Duration(c.RTTClient))
}

func (printer) Transaction(t *reconstruct.Transaction) {
	fmt.Printf("%s %s -> %d: total %v = connect %v + request %v + server %v + transfer %v\n",
		t.Method, t.URL, t.Status, time.Duration(t.Total), time.Duration(t.Tconn),
		time.Duration(t.Trequest), time.Duration(t.Tserver), time.Duration(t.Ttransfer))
}

// Example writes a capture of one exchange taken at the server, 100 ms of
// round trip away from the client, reads it back and prints the client's
// view: the server's 50 ms plus the round trip is the client's wait.
func Example() {
	dir, err := os.MkdirTemp("", "reconstruct-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "exchange.pcap")
	if err := writeExchange(path); err != nil {
		fmt.Println(err)
		return
	}

	src, err := capture.OpenFiles([]string{path}, capture.FileOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()
	tr := reconstruct.NewTracker(reconstruct.Config{}, printer{})
	if err := tr.ReadFrom(src, nil); err != nil { // flushes what is still open
		fmt.Println(err)
	}
	// Output:
	// GET / -> 200: total 250.03ms = connect 100.03ms + request 0s + server 150ms + transfer 0s
	// connection 198.51.100.7 -> 203.0.113.1: 1 transaction(s), client RTT 100ms
}

// writeExchange writes one HTTP exchange seen at the server: the client is
// 100 ms away, the server answers 50 ms after the request.
func writeExchange(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w, err := synth.NewWriter(f, synth.Options{})
	if err != nil {
		f.Close()
		return err
	}
	c := w.Conn(netip.MustParseAddrPort("198.51.100.7:40000"), netip.MustParseAddrPort("203.0.113.1:80"), 1000, 5000)
	c.SYN(synth.T(0))
	c.SYNACK(synth.T(0.000030))
	c.ACK(synth.T(0.100030))
	c.Client(synth.T(0.100030), synth.Request("GET", "example.test", "/"))
	c.Server(synth.T(0.150030), synth.Response(200, "text/html", []byte("<html></html>")))
	c.ClientAck(synth.T(0.250030))
	c.ClientFIN(synth.T(0.3))
	c.ServerFIN(synth.T(0.3))
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
