package pipeline

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMemoryBudgetSplit: MaxMemory is split among the stages; bounds set
// explicitly stay; no budget changes nothing.
func TestMemoryBudgetSplit(t *testing.T) {
	c := DefaultConfig()
	c.MaxMemory = 1 << 30
	c.Grouper.MaxHeld = 77
	c.applyMemoryBudget()
	budget := float64(c.MaxMemory)
	if c.Tracker.MaxMemory != int64(budget*trackerShare) {
		t.Errorf("tracker share %d, want 60%% of 1 GiB", c.Tracker.MaxMemory)
	}
	if want := int(budget * grouperShare / heldRecordMemory); c.Grouper.MaxMembers != want || c.Grouper.MaxHeld != 77 {
		t.Errorf("grouper members %d (want %d), held %d (want the explicit 77)", c.Grouper.MaxMembers, want, c.Grouper.MaxHeld)
	}
	if want := int(budget * writerShare / heldRecordMemory); c.StoreOptions.MaxBufferRows != want {
		t.Errorf("writer rows %d, want %d", c.StoreOptions.MaxBufferRows, want)
	}
	u := DefaultConfig()
	u.applyMemoryBudget()
	if u.Tracker.MaxMemory != 0 || u.Grouper.MaxMembers != 0 || u.StoreOptions.MaxBufferRows != 0 {
		t.Errorf("no budget changed bounds: %+v %+v %+v", u.Tracker, u.Grouper, u.StoreOptions)
	}
}

// TestMemTotal reads /proc/meminfo's format, and says what is wrong with
// a file without it.
func TestMemTotal(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "meminfo")
	if err := os.WriteFile(good, []byte("MemTotal:       16318888 kB\nMemFree:  1 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := memTotal(good); err != nil || n != 16318888<<10 {
		t.Errorf("memTotal = %d, %v; want %d", n, err, 16318888<<10)
	}
	bad := filepath.Join(dir, "other")
	if err := os.WriteFile(bad, []byte("MemFree: 1 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := memTotal(bad); err == nil {
		t.Error("no MemTotal: want an error")
	}
	if m := DefaultMaxMemory(); m < 256<<20 || m > 16<<30 {
		t.Errorf("DefaultMaxMemory = %d, outside 256 MiB..16 GiB", m)
	}
}
