package web

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/synth"
)

// testClasses splits the synthetic clients (198.51.100.1...) into two
// classes so every per-class view has more than one row.
const testClassesYAML = `
classes:
  - name: premium
    priority: high
    match: "198.51.100.0/29"
default: { name: standard, priority: low }
`

func testClasses(t testing.TB) *pageview.Classes {
	t.Helper()
	c, err := pageview.ParseClasses([]byte(testClassesYAML))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ingest runs a capture file through the same stages as rtmon analyze
// (capture -> reconstruct -> pageview grouper) into st.
func ingest(t testing.TB, st store.Store, classes *pageview.Classes, path string) {
	t.Helper()
	src, err := capture.OpenFiles([]string{path}, capture.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	g := pageview.NewGrouper(pageview.Config{}, classes, st)
	tr := reconstruct.NewTracker(reconstruct.Config{}, g)
	if err := tr.ReadFrom(src, nil); err != nil {
		t.Fatal(err)
	}
	g.Flush()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func openStore(t testing.TB, classes *pageview.Classes) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), "memory:", store.Options{
		Classify: func(a netip.Addr) string { n, _ := classes.Classify(a); return n },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// The known capture: synthetic browsers with SYN, SYN/ACK and data loss,
// so the 1 s / 3 s peaks and every counter have something to show.
var (
	knownOnce  sync.Once
	knownPath  string
	knownErr   error
	knownStore store.Store
)

func knownWorkload() synth.Workload {
	return synth.Workload{Seed: 11, Clients: 24, Servers: 3, Duration: 90 * time.Second, PageviewsPerClient: 4,
		SYNLossRate: 0.06, SYNACKLossRate: 0.03, DataLossRate: 0.01}
}

// knownCapturePath is the known capture's file.
func knownCapturePath(t testing.TB) string {
	knownCapture(t)
	return knownPath
}

// knownCapture returns a store filled from the known capture, shared by the
// tests of this package (it is read-only for them).
func knownCapture(t testing.TB) store.Store {
	t.Helper()
	knownOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rtmon-web-test-")
		if err != nil {
			knownErr = err
			return
		}
		knownPath = filepath.Join(dir, "known.pcap")
		if _, err := synth.GenerateFile(knownPath, synth.Options{Nanosecond: true}, knownWorkload()); err != nil {
			knownErr = err
			return
		}
		classes := testClasses(t)
		st, err := store.Open(context.Background(), "memory:", store.Options{
			Classify: func(a netip.Addr) string { n, _ := classes.Classify(a); return n },
		})
		if err != nil {
			knownErr = err
			return
		}
		ingest(t, st, classes, knownPath)
		knownStore = st
	})
	if knownErr != nil {
		t.Fatal(knownErr)
	}
	return knownStore
}

func TestMain(m *testing.M) {
	code := m.Run()
	if knownStore != nil {
		knownStore.Close()
	}
	if knownPath != "" {
		os.RemoveAll(filepath.Dir(knownPath))
	}
	if twoSensorsDir != "" {
		os.RemoveAll(twoSensorsDir)
	}
	os.Exit(code)
}

// newTestServer serves cfg on a loopback httptest server.
func newTestServer(t testing.TB, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

func get(t testing.TB, url string) *http.Response {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func readAll(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
