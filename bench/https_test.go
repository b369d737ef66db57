package bench

import (
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/reconstruct/tlsdecrypt"
)

type txCollector struct {
	txs   []*reconstruct.Transaction
	conns int
}

func (c *txCollector) Connection(*reconstruct.Connection)     { c.conns++ }
func (c *txCollector) Transaction(t *reconstruct.Transaction) { c.txs = append(c.txs, t) }

func analyzeHTTPS(t *testing.T, path string, kl *tlsdecrypt.KeyLog) (*txCollector, reconstruct.Stats) {
	t.Helper()
	src, err := capture.OpenFiles([]string{path}, capture.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out := &txCollector{}
	tr := reconstruct.NewTracker(reconstruct.Config{KeyLog: kl}, out)
	if err := tr.ReadFrom(src, nil); err != nil {
		t.Fatal(err)
	}
	if st := src.Stats(); st.Decode.SkippedTotal() != 0 {
		t.Fatalf("decoder skipped packets: %v", st.Decode)
	}
	return out, tr.Stats()
}

// Every generated request comes out of the capture decrypted with its URL
// and status, replicas included; keyless, the same number of transactions.
func TestHTTPSCapture(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "https.pcap")
	p := Params{Version: ParamsVersion, HTTPS: true, Sessions: 12, TargetBytes: 4e6, Seed: 5, PcapNanosecs: true}
	sum, err := GenerateHTTPSFile(path, p)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Connections <= p.Sessions || sum.Sessions != p.Sessions {
		t.Fatalf("summary %+v: want replicas beyond the %d sessions", sum, p.Sessions)
	}
	st, err := os.Stat(KeyLogPath(path))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key log mode %v, want 0600", st.Mode().Perm())
	}
	f, err := os.Open(KeyLogPath(path))
	if err != nil {
		t.Fatal(err)
	}
	kl, err := tlsdecrypt.ParseKeyLog(f, tlsdecrypt.KeyLogOptions{})
	f.Close()
	if err != nil {
		t.Fatal(err)
	}

	want := map[string]int{}
	for k := range sum.Connections {
		i := k % p.Sessions
		for _, e := range planExchanges(mrand.New(mrand.NewPCG(uint64(p.Seed), uint64(i))), i) {
			want[fmt.Sprintf("%s %d", e.URL, e.Status)]++
		}
	}
	out, stats := analyzeHTTPS(t, path, kl)
	if len(out.txs) != sum.Transactions || out.conns != sum.Connections {
		t.Fatalf("%d transactions in %d connections, generated %d in %d", len(out.txs), out.conns, sum.Transactions, sum.Connections)
	}
	got := map[string]int{}
	for _, tx := range out.txs {
		if tx.Flags&reconstruct.FlagTLS == 0 || tx.Host != httpsHost || tx.Method != "GET" {
			t.Errorf("tx %s: flags %v host %q method %q", tx.URL, tx.Flags, tx.Host, tx.Method)
		}
		got[fmt.Sprintf("%s %d", tx.URL, tx.Status)]++
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d decrypted, want %d", k, got[k], n)
		}
	}
	if stats.TLSDecrypted != uint64(sum.Connections) || stats.TLSDecryptErrors != 0 || stats.TLSNoKey != 0 {
		t.Errorf("stats: decrypted %d of %d, %d errors, %d without key", stats.TLSDecrypted, sum.Connections,
			stats.TLSDecryptErrors, stats.TLSNoKey)
	}

	keyless, _ := analyzeHTTPS(t, path, nil)
	if len(keyless.txs) != sum.Transactions {
		t.Errorf("keyless: %d transactions, want %d", len(keyless.txs), sum.Transactions)
	}
	info, err := ScanFile(path)
	if err != nil || info.Packets != sum.Packets {
		t.Errorf("scan: %d packets (err %v), generated %d", info.Packets, err, sum.Packets)
	}
}
