package http2wire_test

import (
	"fmt"

	"github.com/rtmon/rtmon/reconstruct/http2wire"
)

// A monitor feeds each direction's bytes as it captures them and collects
// the streams the Conn emits.
func Example() {
	c := http2wire.New(http2wire.Config{})
	// The client's preface and an empty SETTINGS frame.
	evs := c.Feed(http2wire.ClientToServer, []byte(http2wire.ClientPreface+"\x00\x00\x00\x04\x00\x00\x00\x00\x00"), 1000)
	fmt.Println(len(evs), c.Err(http2wire.ClientToServer))
	// The connection ends before any stream.
	fmt.Println(len(c.Close(2000)), c.Stats().Frames[http2wire.ClientToServer][http2wire.FrameSettings])
	// Output:
	// 0 <nil>
	// 0 1
}
