package http2wire

import (
	"reflect"
	"testing"
)

// FuzzConn feeds arbitrary bytes to both directions, split where the
// fuzzer says, and checks that nothing panics, that counters agree with
// what was emitted, that emitted times are in order and that memory stays
// bounded.
func FuzzConn(f *testing.F) {
	client, server := script(f)
	f.Add(client, server, uint16(7), uint16(3), false)
	f.Add(client, server, uint16(1), uint16(1), true)
	f.Add([]byte(ClientPreface+"\x00\x00\x00\x04\x00\x00\x00\x00\x00"), []byte{}, uint16(0), uint16(0), false)
	f.Add([]byte(ClientPreface), []byte("\x00\x40\x01\x09\x00\x00\x00\x00\x00"), uint16(2), uint16(5), false)
	f.Fuzz(func(t *testing.T, client, server []byte, clientStep, serverStep uint16, gap bool) {
		c := New(Config{MaxStreams: 8, MaxHeaderListSize: 4096, MaxValueLen: 64, MaxHeaderTableSize: 4096})
		emitted := 0
		var at int64
		// Copies of the emitted streams: the Conn must not touch them again.
		var kept []*Stream
		var copies []Stream
		check := func(evs []Event) {
			for _, ev := range evs {
				if ev.At != at {
					t.Fatalf("event at %d, fed at %d", ev.At, at)
				}
				switch ev.Kind {
				case KindStream:
					emitted++
					checkTimes(t, ev.Stream)
					checkBounds(t, ev.Stream, 64)
					kept, copies = append(kept, ev.Stream), append(copies, *ev.Stream)
				case KindError:
					if ev.Err == nil || c.Err(ev.Dir) == nil {
						t.Fatalf("error event without error: %+v", ev)
					}
				}
			}
			checkStats(t, c, emitted)
		}
		steps := [2]int{int(clientStep)%64 + 1, int(serverStep)%64 + 1}
		data := [2][]byte{client, server}
		for len(data[0])+len(data[1]) > 0 {
			for dir := range data {
				n := min(steps[dir], len(data[dir]))
				if n == 0 {
					continue
				}
				at++
				check(c.Feed(Dir(dir), data[dir][:n], at))
				data[dir] = data[dir][n:]
				if gap && dir == 1 && len(data[1])%97 == 5 {
					at++
					check(c.Gap(ServerToClient, 3, at))
				}
			}
		}
		at++
		check(c.Close(at))
		if c.OpenStreams() != 0 {
			t.Fatalf("%d streams open after Close", c.OpenStreams())
		}
		for i, st := range kept {
			if !reflect.DeepEqual(*st, copies[i]) {
				t.Fatalf("stream %d changed after it was emitted", st.ID)
			}
		}
		s := c.Stats()
		if s.Bytes[0] != int64(len(client)) || s.Bytes[1] != int64(len(server)) {
			t.Fatalf("bytes %v, fed %d %d", s.Bytes, len(client), len(server))
		}
	})
}

// checkBounds tests that retained header data stays within the Config.
func checkBounds(t *testing.T, st *Stream, maxValue int) {
	t.Helper()
	r := st.Request
	for _, v := range []string{r.Method, r.Scheme, r.Authority, r.Path, r.Protocol, r.UserAgent, r.ContentType,
		st.Response.ContentType} {
		if len(v) > maxValue {
			t.Fatalf("value of %d bytes retained", len(v))
		}
	}
	if len(r.Trailers) > MaxTrailers || len(st.Response.Trailers) > MaxTrailers ||
		len(st.Response.Informational) > maxInformational {
		t.Fatalf("unbounded lists in %+v", st)
	}
	for _, f := range append(r.Trailers, st.Response.Trailers...) {
		if len(f.Name) > maxValue || len(f.Value) > maxValue {
			t.Fatalf("trailer of %d bytes retained", len(f.Value))
		}
	}
}
