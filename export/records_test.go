package export

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rtmon/rtmon/reconstruct"
)

func sampleTx() *reconstruct.Transaction {
	return &reconstruct.Transaction{
		ID: "c1-0", ConnectionID: "c1", Client: netip.MustParseAddr("198.51.100.1"), ClientPort: 40000,
		Server: netip.MustParseAddr("203.0.113.1"), ServerPort: 80, Start: 10, End: 110, Tconn: 20, Trequest: 5,
		Tserver: 50, Ttransfer: 25, Total: 100, Method: "GET", URL: "=HYPERLINK(\"http://evil\")",
		UserAgent: "<script>alert(1)</script>", Status: 200, Flags: reconstruct.FlagHole,
	}
}

func TestRecordWriterJSONL(t *testing.T) {
	dir := t.TempDir()
	w, err := NewRecordWriter(dir, JSONL)
	if err != nil {
		t.Fatal(err)
	}
	w.Transaction(sampleTx())
	w.Connection(&reconstruct.Connection{ID: "c1", SYNTimes: []int64{1, 2}, SYNLosses: 1})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "transactions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		t.Fatal("no line")
	}
	var got reconstruct.Transaction
	if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Total != 100 || got.URL != sampleTx().URL || got.Client != sampleTx().Client || got.Flags != reconstruct.FlagHole {
		t.Errorf("round trip: %+v", got)
	}
	// Captured text stays as it was in JSON: escaping is the reader's job,
	// and HTML escaping would corrupt it for other tools.
	if !strings.Contains(sc.Text(), "<script>") {
		t.Errorf("JSON altered the user agent: %s", sc.Text())
	}
	b, err := os.ReadFile(filepath.Join(dir, "connections.jsonl"))
	if err != nil || !strings.Contains(string(b), `"syn_losses":1`) {
		t.Errorf("connections: %s %v", b, err)
	}
}

func TestRecordWriterCSVDefusesFormulas(t *testing.T) {
	dir := t.TempDir()
	w, err := NewRecordWriter(dir, CSV)
	if err != nil {
		t.Fatal(err)
	}
	w.Transaction(sampleTx())
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "transactions.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || len(rows[0]) != len(rows[1]) {
		t.Fatalf("rows: %v", rows)
	}
	col := map[string]string{}
	for i, h := range rows[0] {
		col[h] = rows[1][i]
	}
	if col["url"] != "'"+sampleTx().URL || col["total_ns"] != "100" || col["method"] != "GET" || col["flags"] != "hole" {
		t.Errorf("csv row: %v", col)
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"jsonl": JSONL, "JSON": JSONL, "csv": CSV} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("xml"); err == nil {
		t.Error("xml accepted")
	}
}

func TestSummaryPercentiles(t *testing.T) {
	s := NewSummary()
	for i := 1; i <= 1000; i++ {
		tx := &reconstruct.Transaction{Index: 1, Total: int64(i) * 1e6, Tserver: int64(i) * 1e6}
		s.Transaction(tx)
	}
	s.Transaction(&reconstruct.Transaction{Flags: reconstruct.FlagIncomplete, Total: 1e12})
	total := s.Components["total"]
	if total.Count() != 1000 || s.Incomplete != 1 || s.Transactions != 1001 {
		t.Fatalf("counts: %d %d %d", total.Count(), s.Incomplete, s.Transactions)
	}
	for q, want := range map[float64]float64{0.5: 500e6, 0.9: 900e6, 0.99: 990e6} {
		got := float64(total.Quantile(q))
		if got < want*0.99 || got > want*1.01 {
			t.Errorf("p%v = %v, want %v within 1%%", q*100, got, want)
		}
	}
	if s.Components["tconn"].Count() != 0 {
		t.Error("reused-connection transactions counted in tconn")
	}
	var b strings.Builder
	s.WriteText(&b)
	if !strings.Contains(b.String(), "total") || !strings.Contains(b.String(), "incomplete or unmatched 1") {
		t.Errorf("text: %s", b.String())
	}
}
