package reconstruct

import (
	"encoding/json"
	"strings"
	"testing"
	"unsafe"
)

// The flags are written without building a list of names; the bytes must
// be what encoding/json makes of that list, and they must read back.
func TestFlagsMarshalAsNames(t *testing.T) {
	for _, f := range []Flags{0, FlagIncomplete, FlagHole | FlagReset, FlagAfterLoad, 1<<len(flagNames) - 1, FlagNoAck | 1<<30} {
		got, err := f.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		names := f.Names()
		if names == nil {
			names = []string{}
		}
		want, _ := json.Marshal(names)
		if string(got) != string(want) {
			t.Errorf("%#x: %s, want %s", uint32(f), got, want)
		}
		if j := f.Join("|"); j != strings.Join(f.Names(), "|") {
			t.Errorf("%#x: Join %q", uint32(f), j)
		}
		var back Flags
		if err := json.Unmarshal(got, &back); err != nil || back != f&(1<<len(flagNames)-1) {
			t.Errorf("%#x: read back %#x, %v", uint32(f), uint32(back), err)
		}
	}
}

// Transactions are the records held by the thousand between the tracker
// and the pageview stage; see the note at the end of Transaction.
func TestTransactionSize(t *testing.T) {
	if n := unsafe.Sizeof(Transaction{}); n > 512 {
		t.Errorf("Transaction is %d bytes, over 512", n)
	}
}
