package capture_test

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/synth"
)

// writeExchange writes a capture of one HTTP exchange: handshake, request,
// response, the client's ACK.
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
	c.ACK(synth.T(0.100))
	c.Client(synth.T(0.101), synth.Request("GET", "example.test", "/"))
	c.Server(synth.T(0.150), synth.Response(200, "text/html", []byte("<html></html>")))
	c.ClientAck(synth.T(0.250))
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func Example() {
	dir, err := os.MkdirTemp("", "capture-example")
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
	var p capture.Packet // reused: Payload is valid until the next call
	for {
		err := src.Next(&p)
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err) // errors.Is(err, capture.ErrTruncated) for a cut-off file
			return
		}
		fmt.Printf("%v -> %v flags %#02x payload %d\n", netip.AddrPortFrom(p.SrcIP, p.SrcPort),
			netip.AddrPortFrom(p.DstIP, p.DstPort), p.Flags, p.PayloadLen)
	}
	st := src.Stats()
	fmt.Printf("%d TCP segments of %d frames\n", st.Decode.TCP, st.Sources[0].Frames)
	// Output:
	// 198.51.100.7:40000 -> 203.0.113.1:80 flags 0x02 payload 0
	// 203.0.113.1:80 -> 198.51.100.7:40000 flags 0x12 payload 0
	// 198.51.100.7:40000 -> 203.0.113.1:80 flags 0x10 payload 0
	// 198.51.100.7:40000 -> 203.0.113.1:80 flags 0x18 payload 38
	// 203.0.113.1:80 -> 198.51.100.7:40000 flags 0x18 payload 77
	// 198.51.100.7:40000 -> 203.0.113.1:80 flags 0x10 payload 0
	// 6 TCP segments of 6 frames
}
