package reconstruct_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/reconstruct/tlsdecrypt"
	"github.com/rtmon/rtmon/synth"
)

// In a live capture the key log line of a connection often comes after
// its ServerHello passed (the log is read every so often). With
// KeyLogWait the connection holds its records for it: a line that comes
// within the wait gives the same transactions as a line there from the
// start (decrypted, timed alike); one that does not come gives the
// keyless ones. Without the wait, the connection is keyless at once.
func TestLateKeyLine(t *testing.T) {
	var keys bytes.Buffer
	urls := []string{"/", "/app.js"}
	writes := recordTLSSessionKeys(t, tls.VersionTLS13, []string{"http/1.1"}, urls, 20000, &keys)
	path := filepath.Join(t.TempDir(), "late.pcap")
	var tt tlsTimes
	if err := synth.WriteFile(path, defaultOpts(), func(w *synth.Writer) error {
		c := w.Conn(client, netip.AddrPortFrom(server.Addr(), 443), 7800, 9800)
		tt = scriptTLS(c, writes, 300*us, 30*ms)
		last := tt.respLast[len(tt.respLast)-1]
		c.ClientFIN(last + 3*D)
		c.ServerFIN(last + 3*D + 100*us)
		c.ClientAck(last + 5*D)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// run reads the capture, adding the key log lines to the tracker's
	// key log once the capture reaches keyAt (never when 0). A keyAt past
	// the capture's end adds them after its last packet, and a packet of
	// another connection keyAt+1.5 s makes the tracker sweep; what was
	// emitted by then is in out.beforeFlush.
	run := func(wait time.Duration, keyAt int64) *collected {
		kl := tlsdecrypt.NewKeyLog(tlsdecrypt.KeyLogOptions{})
		out := &collected{}
		tr := reconstruct.NewTracker(reconstruct.Config{KeyLog: kl, KeyLogWait: wait}, out)
		src, err := capture.OpenFiles([]string{path}, capture.FileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		added := false
		for {
			var p capture.Packet
			if err := src.Next(&p); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			if !added && keyAt > 0 && p.Timestamp >= keyAt {
				kl.Write(keys.Bytes())
				added = true
			}
			tr.Packet(&p)
		}
		if !added && keyAt > 0 {
			kl.Write(keys.Bytes())
			p := capture.Packet{Timestamp: keyAt + 1500*ms, SrcIP: client.Addr(), DstIP: server.Addr(), SrcPort: 7801, DstPort: 443,
				Flags: capture.FlagSYN, Seq: 1}
			tr.Packet(&p)
		}
		out.beforeFlush = len(out.txs)
		tr.Flush()
		out.stats = tr.Stats()
		checkInvariants(t, out)
		return out
	}
	ref := run(0, 1) // the line there from the start
	late := run(time.Second, tt.reqLast[0])
	never := run(time.Second, 0)
	nowait := run(0, tt.reqLast[0])
	// The line comes after the connection closed (one request, then FIN,
	// as short connections do), within the wait: the sweep after it
	// decrypts and ends the connection.
	closed := run(time.Second, tt.respLast[len(tt.respLast)-1]+300*ms)
	if len(ref.txs) != len(urls) || ref.txs[0].URL != "/" || ref.stats.TLSDecrypted != 1 {
		t.Fatalf("reference: %d transactions, first %q, %d decrypted", len(ref.txs), ref.txs[0].URL, ref.stats.TLSDecrypted)
	}
	same := func(name string, got *collected, decrypted bool) {
		t.Helper()
		if len(got.txs) != len(ref.txs) {
			t.Fatalf("%s: %d transactions, want %d", name, len(got.txs), len(ref.txs))
		}
		for i, x := range got.txs {
			r := ref.txs[i]
			if x.Start != r.Start || x.End != r.End || x.Tserver != r.Tserver || x.Ttransfer != r.Ttransfer || x.Ttls != r.Ttls ||
				(x.URL == r.URL) != decrypted {
				t.Errorf("%s: tx %d %q start %d end %d tserver %v ttransfer %v; decrypted %q start %d end %d tserver %v ttransfer %v",
					name, i, x.URL, x.Start, x.End, time.Duration(x.Tserver), time.Duration(x.Ttransfer), r.URL, r.Start, r.End,
					time.Duration(r.Tserver), time.Duration(r.Ttransfer))
			}
		}
	}
	same("key line late", late, true)
	same("key line never", never, false)
	same("no wait", nowait, false)
	same("key line after the close", closed, true)
	if closed.beforeFlush != len(urls) || closed.stats.TLSKeyLate != 1 {
		t.Errorf("key line after the close: %d transactions before the flush, %d late keys", closed.beforeFlush, closed.stats.TLSKeyLate)
	}
	if late.stats.TLSDecrypted != 1 || late.stats.TLSKeyLate != 1 || never.stats.TLSNoKey != 1 || nowait.stats.TLSNoKey != 1 ||
		late.stats.MemoryInUse != 0 || never.stats.MemoryInUse != 0 {
		t.Errorf("stats: late %+v; never %+v", late.stats, never.stats)
	}
}
