package reconstruct

import (
	"errors"
	"unsafe"

	"github.com/rtmon/rtmon/reconstruct/tlsdecrypt"
	"github.com/rtmon/rtmon/reconstruct/tlswire"
)

// Late keys. In a live capture the key log is written as the handshakes
// happen and read every so often, so a connection's line is often not
// there yet when its ServerHello passes. With Config.KeyLogWait the
// connection then holds its TLS events (record bodies included) and asks
// the key log again at each new one; when the line has come, the session
// starts and the events are replayed through decryption, as if the key
// had been there all along. When the wait ends (KeyLogWait past the
// ServerHello, maxKeyWaitBytes held, a hole in the records, or the
// connection's end) with no key, the events are replayed keyless. While
// they are held, the connection's TCP carries on: ACKs and retransmissions
// of records not yet replayed are judged as for any response not yet
// seen, so the wait is kept short.

// keyWait is what a connection holds while its key line is awaited.
type keyWait struct {
	params tlsdecrypt.Params
	until  int64 // capture time the wait ends
	events []tlswire.Event
	client []bool // each event's direction
	bytes  int    // record bodies held
	// closed: the connection ended while it waited; the tracker ends it
	// when the wait does (resolveKeyWaits). clientFIN, serverFIN: a
	// direction's stream ended meanwhile; its parser closes after the
	// held records.
	closed, clientFIN, serverFIN bool
}

// maxKeyWaitBytes bounds the record bodies one connection holds.
const maxKeyWaitBytes = 64 << 10

// eventSize is one held event's own size, and its direction's.
var eventSize = unsafe.Sizeof(tlswire.Event{}) + 1

// held is what w holds, for the memory count (0 for nil).
func (w *keyWait) held() int {
	if w == nil {
		return 0
	}
	return w.bytes + cap(w.events)*int(eventSize)
}

// tlsWaitForKey starts holding the connection's records for the key line
// of params.
func (c *conn) tlsWaitForKey(params tlsdecrypt.Params) {
	c.tls.keyWait = &keyWait{params: params, until: c.curTS + int64(c.t.cfg.KeyLogWait)}
	c.tlsKeepBodies(true)
}

// tlsAwaitKey holds evs, then asks the key log again.
func (c *conn) tlsAwaitKey(client bool, evs []tlswire.Event) {
	w := c.tls.keyWait
	lost := false
	for i := range evs {
		w.events = append(w.events, evs[i])
		w.client = append(w.client, client)
		w.bytes += len(evs[i].Body)
		lost = lost || evs[i].Kind == tlswire.KindLost
	}
	c.tlsTryKey(lost || w.bytes > maxKeyWaitBytes || c.curTS >= w.until)
}

// tlsKeyAwaited reports whether the connection closed while its records
// waited for a key line.
func (c *conn) tlsKeyAwaited() bool {
	w := c.tls.keyWaitOf()
	return w != nil && w.closed
}

// keyWaitOf is s's wait for a key line, nil for none (or no TLS).
func (s *tlsSession) keyWaitOf() *keyWait {
	if s == nil {
		return nil
	}
	return s.keyWait
}

// endOrAwaitKey ends the connection as it closes, unless its records wait
// for a key line: a short connection (one request) closes long before a
// key log read every so often has its line, so the tracker ends it when
// the wait does.
func (c *conn) endOrAwaitKey() {
	if w := c.tls.keyWaitOf(); w != nil {
		if !w.closed {
			w.closed = true
			c.t.keyWaiters = append(c.t.keyWaiters, c)
		}
		return
	}
	c.end(0)
}

// resolveKeyWaits asks the key log again for the connections that closed
// while they waited, and ends those whose wait is over (key found, or
// KeyLogWait past). One the tracker finished meanwhile (evicted, flushed)
// ended then, keyless.
func (t *Tracker) resolveKeyWaits() {
	kept := t.keyWaiters[:0]
	for _, c := range t.keyWaiters {
		if c.is(cfDone) {
			continue
		}
		// Ending flushes the connection's out-of-order buffers outside
		// Packet, which counts them otherwise: uncounted, their bytes
		// stayed in the memory count after the connection was gone.
		held := c.reorderHeld()
		c.tlsTryKey(t.now >= c.tls.keyWait.until)
		if c.tls.keyWait != nil {
			kept = append(kept, c)
		} else {
			c.end(0)
		}
		t.reorderBytes += c.reorderHeld() - held
		t.recount(c)
	}
	clear(t.keyWaiters[len(kept):])
	t.keyWaiters = kept
}

// tlsKeyWaitEnd ends a wait at the connection's end.
func (c *conn) tlsKeyWaitEnd() {
	if c.tls.keyWait != nil {
		c.tlsTryKey(true)
	}
}

// tlsTryKey looks the key up: found, or the wait over (last), the held
// events are replayed, decrypted or keyless.
func (c *conn) tlsTryKey(last bool) {
	w := c.tls.keyWait
	sess, err := tlsdecrypt.NewSession(c.t.cfg.KeyLog, w.params)
	switch {
	case err == nil:
		c.tls.plain = &tlsPlain{sess: sess}
		c.t.stats.TLSDecrypted++
		c.t.stats.TLSKeyLate++
	case !last && errors.Is(err, tlsdecrypt.ErrNoSecret):
		return
	case errors.Is(err, tlsdecrypt.ErrNoSecret):
		c.t.stats.TLSNoKey++
		c.tlsKeepBodies(false)
	default:
		c.t.stats.TLSDecryptErrors++
		c.tlsKeepBodies(false)
	}
	c.tls.keyWait = nil
	for i := range w.events {
		c.tlsEvents(w.client[i], w.events[i:i+1])
	}
	if w.clientFIN {
		c.reqP().Close((*requestEvents)(c))
	}
	if w.serverFIN {
		c.closeServerParser()
	}
}
