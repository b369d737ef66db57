package reconstruct_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/synth"
)

// ReadFrom calls its progress hook as it goes and stops at the hook's error,
// still flushing what was read.
func TestReadFromProgressStops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.pcap")
	sum, err := synth.GenerateFile(path, synth.Options{}, synth.Workload{Seed: 1, Clients: 60, Duration: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Packets <= 1<<16 {
		t.Fatalf("workload too small for the test: %d packets", sum.Packets)
	}
	src, err := capture.OpenFiles([]string{path}, capture.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out := &collected{}
	tr := reconstruct.NewTracker(reconstruct.Config{}, out)
	stop := errors.New("stop")
	calls := 0
	err = tr.ReadFrom(src, func() error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("err %v after %d calls", err, calls)
	}
	if st := tr.Stats(); st.Packets != 1<<16 || st.OpenConnections != 0 || len(out.conns) == 0 {
		t.Errorf("packets %d open %d conns %d", st.Packets, st.OpenConnections, len(out.conns))
	}
}

// A live dashboard's hook reads the source's and the tracker's counters every
// 16 packets: neither may allocate.
func TestReadFromEveryStatsAllocFree(t *testing.T) {
	path := filepath.Join(t.TempDir(), "small.pcap")
	if _, err := synth.GenerateFile(path, synth.Options{}, synth.Workload{Seed: 1, Clients: 2, Duration: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	src, err := capture.OpenFiles([]string{path}, capture.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	tr := reconstruct.NewTracker(reconstruct.Config{}, &collected{})
	var packets uint64
	poll := func() {
		cs, ts := src.Stats(), tr.Stats()
		packets = ts.Packets + uint64(len(cs.Sources))
	}
	calls := 0
	err = tr.ReadFromEvery(src, 16, func() error {
		calls++
		if calls > 1 {
			poll()
			return nil
		}
		if n := testing.AllocsPerRun(10, poll); n != 0 {
			return errors.New("stats allocate")
		}
		return nil
	})
	if err != nil || calls == 0 || packets == 0 {
		t.Fatalf("err %v after %d calls", err, calls)
	}
}
