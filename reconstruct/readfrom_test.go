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
