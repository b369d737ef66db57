package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rtmon/rtmon/whatif"
)

func TestWhatifExportRules(t *testing.T) {
	dir := analyzedRecords(t)
	out, err := runCmd(t, "whatif", "--records", dir, "--format", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rep struct{ Ranking []whatif.Ranked }
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Ranking) < 2 {
		t.Fatalf("ranking (%v): %s", err, out)
	}
	for _, rank := range []string{"1", "2"} {
		// To stdout: the rules file alone.
		got, err := runCmd(t, "whatif", "--records", dir, "--export-rules", "-", "--export-rank", rank)
		if err != nil {
			t.Fatalf("%v\n%s", err, got)
		}
		want := rep.Ranking[map[string]int{"1": 0, "2": 1}[rank]]
		rs, err := whatif.ParseRules(got)
		if err != nil {
			t.Fatalf("rank %s: %v\n%s", rank, err, got)
		}
		var texts []string
		for _, r := range rs {
			texts = append(texts, r.String())
		}
		if strings.Join(texts, "\n") != strings.Join(want.Rules, "\n") {
			t.Errorf("rank %s: exported %q, want %q", rank, texts, want.Rules)
		}
		for _, m := range []string{"Rank " + rank + " of the ranking for class " + want.Class, "records " + dir, "Assumptions of the models:"} {
			if !strings.Contains(got, m) {
				t.Errorf("rank %s: the file lacks %q:\n%s", rank, m, got)
			}
		}
		if strings.Contains(got, "ranking for "+want.Class+" (gain") {
			t.Errorf("rank %s: the report went to stdout with the rules:\n%s", rank, got)
		}
	}
	// To a file, beside the report; out-of-range ranks are refused.
	path := filepath.Join(t.TempDir(), "front.rules")
	out, err = runCmd(t, "whatif", "--records", dir, "--export-rules", path)
	if err != nil || !strings.Contains(out, "assumptions:") {
		t.Fatalf("%v\n%s", err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if rs, err := whatif.ParseRules(string(b)); err != nil || len(rs) != len(rep.Ranking[0].Rules) {
		t.Errorf("the file holds %d rules (%v), want %d", len(rs), err, len(rep.Ranking[0].Rules))
	}
	if out, err := runCmd(t, "whatif", "--records", dir, "--export-rules", "-", "--export-rank", "999"); err == nil {
		t.Errorf("--export-rank 999 accepted:\n%s", out)
	}
}
