package reconstruct

import (
	"testing"
	"unsafe"

	"github.com/rtmon/rtmon/reconstruct/http1"
)

// TestStateSizes holds the structures an open connection is counted by
// (ConnectionMemory, flowMemory, parserMemory, txMemory) within the
// allocator's size classes those figures assume: a field that pushes one
// past its class costs every open connection the next class, and what is
// counted against --max-memory would no longer be what is held.
func TestStateSizes(t *testing.T) {
	for _, s := range []struct {
		name        string
		size, class uintptr
	}{
		{"conn", unsafe.Sizeof(conn{}), 320},
		{"flowState", unsafe.Sizeof(flowState{}), flowMemory},
		{"txState", unsafe.Sizeof(txState{}), 208},
		{"http1.Parser", unsafe.Sizeof(http1.Parser{}), parserMemory},
	} {
		if s.size > s.class {
			t.Errorf("%s is %d B, past its %d-byte size class", s.name, s.size, s.class)
		}
	}
}
