package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLiveLateKeyLines runs rtmon live on loopback HTTPS whose client
// writes its TLS secrets to the key log a second after it handshakes (a
// writer that flushes late; rtmon also reads the log only every so often).
// The key lines come after their connection's ServerHello passed: those
// connections must hold their records for the line and be decrypted
// (tls_key_late_total on /metrics), not timed keyless. Requests go out
// until enough were, however busy the machine; the context bounds it.
func TestLiveLateKeyLines(t *testing.T) {
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, strings.Repeat("x", 3000))
	}))
	backend.StartTLS()
	defer backend.Close()
	port := backend.Listener.Addr().(*net.TCPAddr).Port
	keyPath := filepath.Join(t.TempDir(), "keys.log")
	keys, err := os.OpenFile(keyPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	o := liveOptions{ifaces: []string{"lo"}, filter: fmt.Sprintf("tcp port %d", port), ui: uiOptions{listen: freeLoopbackAddr(t)}}
	o.analyzeOptions = defaultAnalyze()
	o.keyLog = keyPath
	url, done := startLive(ctx, t, o)

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, KeyLogWriter: lateWriter{keys, time.Second}}}}
	const want = 3
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var late, decrypted, sent int64
	for late < want {
		select {
		case <-ctx.Done():
			t.Fatalf("after %d HTTPS requests: %d connections decrypted, %d of them with a late key line", sent, decrypted, late)
		case <-tick.C:
		}
		resp, err := client.Get(backend.URL + "/x")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		sent++
		late, decrypted = metricValue(t, url, "rtmon_tls_key_late_total"), metricValue(t, url, "rtmon_tls_decrypted_total")
	}
	t.Logf("%d HTTPS requests: %d connections decrypted, %d of them with a late key line", sent, decrypted, late)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("live: %v", err)
	}
}

// lateWriter writes each line to w after delay.
type lateWriter struct {
	w     io.Writer
	delay time.Duration
}

func (l lateWriter) Write(p []byte) (int, error) {
	line := append([]byte(nil), p...)
	time.AfterFunc(l.delay, func() { l.w.Write(line) })
	return len(p), nil
}

// metricValue reads one counter from the UI's /metrics (0 when absent).
func metricValue(t *testing.T, base, name string) int64 {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(base, "/") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return int64(f)
		}
	}
	return 0
}
