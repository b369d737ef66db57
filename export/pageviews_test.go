package export

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/rtmon/rtmon/pageview"
)

func TestPageviewWriter(t *testing.T) {
	dir := t.TempDir()
	pv, _ := groupedPageview(t, t.TempDir(), dir, JSONL)
	f, err := os.Open(filepath.Join(dir, "pageviews.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var rows []pageview.Pageview
	for sc.Scan() {
		var p pageview.Pageview
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, p)
	}
	if len(rows) != 1 || rows[0].ID != pv.ID || rows[0].Total != pv.Total || rows[0].Objects != 2 ||
		rows[0].SYNLosses != 1 || rows[0].Class != "default" || rows[0].Tconn+rows[0].Tserver+rows[0].Ttransfer+rows[0].Tother != rows[0].Total {
		t.Errorf("rows %+v", rows)
	}
}

func TestPageviewWriterCSV(t *testing.T) {
	dir := t.TempDir()
	w, err := NewPageviewWriter(dir, CSV)
	if err != nil {
		t.Fatal(err)
	}
	w.Pageview(&pageview.Pageview{ID: "abc", URL: "=HYPERLINK(\"http://evil\")", UserAgent: "@SUM(1)", Class: "premium", Total: 5})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "pageviews.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || len(recs[0]) != len(recs[1]) || recs[0][0] != "id" {
		t.Fatalf("csv %v", recs)
	}
	col := map[string]string{}
	for i, h := range recs[0] {
		col[h] = recs[1][i]
	}
	if col["url"] != "'=HYPERLINK(\"http://evil\")" || col["user_agent"] != "'@SUM(1)" || col["class"] != "premium" || col["total_ns"] != "5" {
		t.Errorf("row %v", col)
	}
}
