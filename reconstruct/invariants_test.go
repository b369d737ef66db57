package reconstruct_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/rtmon/rtmon/reconstruct"
)

// Flags travel as names in JSON, and come back as the same bits.
func TestFlagsJSON(t *testing.T) {
	in := reconstruct.Transaction{ID: "x", Flags: reconstruct.FlagHole | reconstruct.FlagAfterLoad | reconstruct.FlagUpstreamLoss}
	b, err := json.Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct{ Flags []string }
	if err := json.Unmarshal(b, &raw); err != nil || len(raw.Flags) != 3 || raw.Flags[0] != "hole" || raw.Flags[2] != "after_load" {
		t.Fatalf("%s: %v %v", b, raw.Flags, err)
	}
	var out reconstruct.Transaction
	if err := json.Unmarshal(b, &out); err != nil || out.Flags != in.Flags {
		t.Fatalf("round trip: %v, %v", out.Flags, err)
	}
	if b, _ := json.Marshal(&reconstruct.Transaction{}); bytes.Contains(b, []byte(`"flags"`)) {
		t.Errorf("no flags should leave the field out: %s", b)
	}
	if err := json.Unmarshal([]byte(`{"flags":["hole","nonsense"]}`), &out); err == nil {
		t.Error("an unknown flag name was accepted")
	}
	if s := in.Flags.String(); s != "hole,upstream_loss,after_load" {
		t.Errorf("String %q", s)
	}
}
