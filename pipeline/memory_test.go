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
	n := int(budget * grouperShare / heldRecordMemory)
	g := c.Grouper
	if g.MaxMembers != n/4 || g.MaxConnCache != n/4 || g.MaxOrphans != n/8 || g.MaxOpen != n/16 || g.MaxHeld != 77 {
		t.Errorf("grouper bounds %+v: want members and connection cache %d, orphans %d, open %d, held the explicit 77", g, n/4, n/8, n/16)
	}
	// What the grouper may hold at most stays within its share.
	if held := (g.MaxHeld + g.MaxMembers + g.MaxConnCache + g.MaxOrphans + g.MaxPending + g.MaxOpen) * heldRecordMemory; float64(held) > budget*grouperShare {
		t.Errorf("grouper bounds add up to %d B, over its share %.0f B", held, budget*grouperShare)
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
