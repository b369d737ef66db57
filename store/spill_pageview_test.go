package store

import (
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

// downInserter is an engine that takes nothing, so everything queued ends
// in spill files at Close.
type downInserter struct{ inserter }

func (downInserter) insert(context.Context, *colSet) error { return errors.New("engine down") }

// A pageview streamed through the Sink is spilled without its
// Transactions: they are spilled once, as the transaction records they
// also are (the pageview used to carry all 20 a second time: 5,455 B of
// spill instead of 3,493 B). The caller's record keeps them for the sinks
// after the store.
func TestSpilledPageviewCarriesNoTransactions(t *testing.T) {
	dir := t.TempDir()
	st := openDown(t, Options{SpillDir: dir})
	p := &pageview.Pageview{ID: "pv1", Class: "premium", Start: 1e18, End: 1e18 + 2e8, Total: 2e8}
	for i := range 20 {
		tx := &reconstruct.Transaction{ID: fmt.Sprintf("c1-%d", i), ConnectionID: "c1", Index: i, PageviewID: "pv1",
			Class: "premium", Start: 1e18 + int64(i)*1e7, End: 1e18 + int64(i+1)*1e7, Total: 1e7, Tserver: 1e7,
			Host: "www.example.com", URL: fmt.Sprintf("/img/%d.png", i), ContentType: "image/png", Status: 200}
		st.Transaction(tx)
		p.Transactions = append(p.Transactions, tx)
	}
	st.Pageview(p)
	if err := st.Close(); err == nil {
		t.Fatal("Close with the engine down: no error")
	}
	if len(p.Transactions) != 20 {
		t.Errorf("the caller's pageview lost its transactions: %d left", len(p.Transactions))
	}
	files, _ := filepath.Glob(filepath.Join(dir, "seg-*.gob"))
	var pvs, txs int
	for _, f := range files {
		b, err := loadSpill(f)
		if err != nil {
			t.Fatal(err)
		}
		txs += len(b.Transactions)
		for _, sp := range b.Pageviews {
			pvs++
			if len(sp.Transactions) != 0 {
				t.Errorf("spilled pageview %s carries %d transactions a second time", sp.ID, len(sp.Transactions))
			}
		}
	}
	if pvs != 1 || txs != 20 {
		t.Fatalf("spilled %d pageviews and %d transactions in %d files, want 1 and 20", pvs, txs, len(files))
	}
	// The spill is the size of the records once: re-encoding the same
	// batch with the transactions inside the pageview makes it larger.
	var spilled int64
	for _, f := range files {
		fi, _ := os.Stat(f)
		spilled += fi.Size()
	}
	twice := gobSize(t, &Batch{Transactions: p.Transactions, Pageviews: []*pageview.Pageview{p}})
	if spilled >= twice {
		t.Errorf("spill files %d B, no smaller than with the transactions inside the pageview (%d B)", spilled, twice)
	}
	t.Logf("spilled %d B; with the transactions twice it would be %d B", spilled, twice)
}

func gobSize(t *testing.T, b *Batch) int64 {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "batch")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := gob.NewEncoder(f).Encode(b); err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	return fi.Size()
}
