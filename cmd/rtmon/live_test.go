package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/web"
)

// TestLiveLoopbackFeedsUI captures real HTTP exchanges on the loopback
// interface with rtmon live and watches the UI's server-sent events: the
// transactions must show up on them (how soon is logged, not asserted:
// beside a CPU hog the capture once started after the test's fixed 500 ms
// head start and its 2 s deadline saw none). Only loopback addresses are
// used.
func TestLiveLoopbackFeedsUI(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, strings.Repeat("x", 3000))
	}))
	defer backend.Close()
	port := backend.Listener.Addr().(*net.TCPAddr).Port
	uiAddr := freeLoopbackAddr(t)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	o := liveOptions{ifaces: []string{"lo"}, filter: fmt.Sprintf("tcp port %d", port), ui: uiOptions{listen: uiAddr}}
	o.analyzeOptions = defaultAnalyze()
	url, done := startLive(ctx, t, o)

	events := make(chan web.LiveEvent, 64)
	go func() {
		resp, err := http.Get(url + "api/live")
		if err != nil {
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev web.LiveEvent
				if json.Unmarshal([]byte(data), &ev) == nil {
					events <- ev
				}
			}
		}
	}()
	// Requests go out until the feed has shown enough of them: when the
	// capture starts is up to the machine (a busy one may take seconds),
	// and what is asserted is that captured traffic reaches the live page,
	// not how fast the machine is; the context bounds the wait.
	const requests = 5
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var seen, sentN int64
	var sent time.Time
	for seen < requests {
		select {
		case ev := <-events:
			var total int64 // counters are cumulative
			for _, c := range ev.Classes {
				total += c.Transactions
			}
			seen = max(seen, total)
		case <-tick.C:
			resp, err := client.Get(backend.URL + "/x")
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			sentN, sent = sentN+1, time.Now()
		case <-ctx.Done():
			t.Fatalf("the live feed showed %d transactions of %d requests sent", seen, sentN)
		}
	}
	t.Logf("%d transactions on the live page after %d requests, %v after the last", seen, sentN, time.Since(sent).Round(time.Millisecond))
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("live: %v", err)
	}
}

// startLive runs rtmon live with o until ctx ends and returns its UI's
// address, once printed, and where its error will come.
func startLive(ctx context.Context, t *testing.T, o liveOptions) (url string, done <-chan error) {
	t.Helper()
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		err := runLive(ctx, pw, o)
		pw.CloseWithError(err)
		errc <- err
	}()
	lines := bufio.NewScanner(pr)
	for url == "" && lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "rtmon UI on "); ok {
			url, _, _ = strings.Cut(rest, " ")
		}
	}
	if url == "" {
		t.Fatalf("live printed no UI address: %v", lines.Err())
	}
	go io.Copy(io.Discard, pr) // the summary at the end
	return url, errc
}

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestLiveCommandDefaults runs rtmon live as a user types it, with the
// command's own flag defaults (not a test's options): it captured nothing
// for a second and printed its summary. (Its defaults once lacked
// --reader, and every live run failed with "--reader \"\"".)
func TestLiveCommandDefaults(t *testing.T) {
	out, err := runCmd(t, "live", "-i", "lo", "--filter", "tcp port 9", "--duration", "1s", "--no-ui")
	if err != nil {
		t.Fatalf("rtmon live: %v\n%s", err, out)
	}
	if !strings.Contains(out, "tcp: packets") {
		t.Errorf("no summary:\n%s", out)
	}
}
