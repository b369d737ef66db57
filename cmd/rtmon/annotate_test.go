package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/query"
	"github.com/rtmon/rtmon/web"
)

// annotateServer serves a UI with auth over a fresh store, as rtmon serve
// does, and returns its URL.
func annotateServer(t *testing.T, opts uiOptions) (store.Store, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, "memory:", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts.listen = "127.0.0.1:0"
	srv, err := opts.server(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
		st.Close()
	})
	return st, srv.URL()
}

func runAnnotate(args ...string) (string, error) {
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"annotate"}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestAnnotateCommand(t *testing.T) {
	t.Setenv("RTMON_TOKEN", "")
	t.Setenv("RTMON_BASIC_AUTH", "")
	for _, tc := range []struct {
		name  string
		ui    uiOptions
		creds []string
	}{
		{"token", uiOptions{token: "s3cret"}, []string{"--token", "s3cret"}},
		{"basic", uiOptions{basic: "ops:pw"}, []string{"--basic-auth", "ops:pw"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, url := annotateServer(t, tc.ui)
			args := []string{"--url", url, "--text", "deploy v2.3", "--tag", "deploy", "--tag", "web,api", "--class", "premium",
				"--time", "2026-12-05T11:30:00Z"}
			if _, err := runAnnotate(args...); err == nil || !strings.Contains(err.Error(), "authentication required") {
				t.Fatalf("without credentials: %v, want refused", err)
			}
			if _, err := runAnnotate(append(args, tc.creds[0], "wrong:wrong")...); err == nil || !strings.Contains(err.Error(), "401") {
				t.Fatalf("with wrong credentials: %v, want 401", err)
			}
			out, err := runAnnotate(append(args, tc.creds...)...)
			if err != nil {
				t.Fatalf("with credentials: %v (%s)", err, out)
			}
			got, err := st.Annotations(context.Background(), query.AnnotationQuery{})
			if err != nil {
				t.Fatal(err)
			}
			at := time.Date(2026, 12, 5, 11, 30, 0, 0, time.UTC).UnixMilli()
			if len(got) != 1 {
				t.Fatalf("listed %+v, want the one annotation", got)
			}
			a := got[0]
			if a.Text != "deploy v2.3" || a.TimeMs != at || a.Class != "premium" || !slices.Equal(a.Tags, []string{"deploy", "webapi"}) || a.Source != query.SourceUser {
				t.Errorf("stored %+v", a)
			}
			if !strings.Contains(out, a.ID) || !strings.Contains(out, "2026-12-05 11:30:00") {
				t.Errorf("output %q does not name the annotation", out)
			}
		})
	}
}

func TestAnnotateCommandDefaultsToNow(t *testing.T) {
	t.Setenv("RTMON_BASIC_AUTH", "")
	t.Setenv("RTMON_TOKEN", "from-env")
	st, url := annotateServer(t, uiOptions{token: "from-env"})
	before := time.Now().UnixMilli()
	if out, err := runAnnotate("--url", url, "--text", "config change"); err != nil {
		t.Fatalf("%v (%s)", err, out)
	}
	got, err := st.Annotations(context.Background(), query.AnnotationQuery{})
	if err != nil || len(got) != 1 {
		t.Fatalf("%+v %v", got, err)
	}
	if got[0].TimeMs < before || got[0].TimeMs > time.Now().UnixMilli() {
		t.Errorf("time %d, want now (%d on)", got[0].TimeMs, before)
	}
	for _, bad := range [][]string{{"--url", url, "--text", " "}, {"--url", url, "--text", "x", "--time", "soon"}, {"--url", "ftp://x/", "--text", "x"}} {
		if _, err := runAnnotate(bad...); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestDropEpisodes(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	var d dropEpisodes
	steps := []struct {
		total int64
		after time.Duration
		want  bool
	}{
		{0, 0, false},                             // no drops yet
		{5, time.Second, true},                    // drops begin
		{9, 2 * time.Second, false},               // the same episode
		{9, dropQuiet, false},                     // quiet
		{12, dropQuiet + time.Second, false},      // rose again less than dropQuiet after the last rise
		{12, 2*dropQuiet + 4*time.Second, false},  // quiet long enough: the episode is over
		{13, 2*dropQuiet + 5*time.Second, true},   // a new episode
		{2, 2*dropQuiet + 6*time.Second, false},   // the counter went back: starts over
		{3, 2*dropQuiet + 7*time.Second, false},   // and rising from there is the same episode
		{40, 4*dropQuiet + 8*time.Second, true},   // until it was quiet long enough
		{40, 4*dropQuiet + 9*time.Second, false},  // no rise
		{41, 6*dropQuiet + 10*time.Second, true},  // a rise long after the last one
		{42, 6*dropQuiet + 11*time.Second, false}, // the same one
	}
	for i, s := range steps {
		if got := d.observe(s.total, t0.Add(s.after)); got != s.want {
			t.Errorf("step %d (%d at +%v): began %v, want %v", i, s.total, s.after, got, s.want)
		}
	}
	// Drops before the first look are an episode too.
	var late dropEpisodes
	if !late.observe(7, t0) {
		t.Error("drops counted before the first observation: no episode")
	}
}

// rtmon live's watcher writes one rtmon annotation when the feed shows
// drops, at the feed's packet time.
func TestAnnotateDropsFromFeed(t *testing.T) {
	st, err := store.Open(context.Background(), "memory:", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	feed := web.NewLiveFeed()
	packetTime := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC).UnixNano()
	feed.Publish(web.LiveEvent{Time: packetTime})
	stop := annotateDrops(context.Background(), feed, st, 10*time.Millisecond)
	defer stop()
	feed.Publish(web.LiveEvent{Time: packetTime + int64(time.Second), Pipeline: web.PipelineStats{CaptureDrops: 17, InterfaceDrops: 3}})
	deadline := time.Now().Add(time.Minute)
	var got []query.Annotation
	for len(got) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no annotation within a minute of the drops")
		}
		time.Sleep(20 * time.Millisecond)
		if got, err = st.Annotations(context.Background(), query.AnnotationQuery{}); err != nil {
			t.Fatal(err)
		}
	}
	a := got[0]
	if a.Source != query.SourceRtmon || a.TimeMs != (packetTime+int64(time.Second))/int64(time.Millisecond) ||
		!strings.Contains(a.Text, "20 packets dropped") || !slices.Equal(a.Tags, []string{"capture-drops"}) {
		t.Errorf("annotation %+v", a)
	}
}
