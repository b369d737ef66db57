package store_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/query"
)

// Annotations go in bounded and come back by time range, on both engines,
// and survive a reopen of a file store.
func TestAnnotationsRoundTrip(t *testing.T) {
	t.Run("duckdb", func(t *testing.T) {
		url := "duckdb:" + filepath.Join(t.TempDir(), "ann.duckdb")
		checkAnnotations(t, url)
		s := openAt(t, url)
		got, err := s.Annotations(context.Background(), store.AnnotationQuery{})
		if err != nil || len(got) != 4 {
			t.Fatalf("after reopen: %d annotations, err %v; want 4", len(got), err)
		}
	})
	t.Run("clickhouse", func(t *testing.T) {
		checkAnnotations(t, needCH(t).URL(freshDB()))
	})
}

func openAt(t *testing.T, url string) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), url, store.Options{SpillDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func checkAnnotations(t *testing.T, url string) {
	ctx := context.Background()
	s, err := store.Open(ctx, url, store.Options{SpillDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).UnixMilli()
	hostile := "<script>alert(1)</script>" + strings.Repeat("é", 3000) + "\x00\x1b"
	in := []store.Annotation{
		{TimeMs: base, Text: "deploy v1.2", Tags: []string{"deploy", "web"}},
		{TimeMs: base + 60_000, Text: hostile, Tags: append([]string{"a,b", "x\ny", "a,b"}, strings.Split(strings.Repeat("t,", 30), ",")...), Class: "gold"},
		{TimeMs: base + 120_001, Text: "drops began", Source: query.SourceRtmon},
	}
	var stored []store.Annotation
	for _, a := range in {
		got, err := s.AddAnnotation(ctx, a)
		if err != nil {
			t.Fatalf("add %q: %v", a.Text[:min(20, len(a.Text))], err)
		}
		stored = append(stored, got)
	}
	before := time.Now().UnixMilli()
	now, err := s.AddAnnotation(ctx, store.Annotation{Text: "  now  "})
	if err != nil {
		t.Fatal(err)
	}
	if now.TimeMs < before || now.TimeMs > time.Now().UnixMilli() || now.Text != "now" || now.Source != query.SourceUser {
		t.Errorf("default time/source/trim: %+v (added at %d)", now, before)
	}
	h := stored[1]
	if len(h.Text) > query.MaxAnnotationText || !utf8.ValidString(h.Text) || !strings.HasPrefix(h.Text, "<script>alert(1)</script>é") || strings.ContainsAny(h.Text, "\x00\x1b") {
		t.Errorf("hostile text stored as %d bytes %q...", len(h.Text), h.Text[:40])
	}
	if len(h.Tags) > query.MaxAnnotationTags || h.Tags[0] != "ab" || h.Tags[1] != "xy" || h.Tags[2] != "t" {
		t.Errorf("tags %q: want commas and controls dropped, duplicates and empties gone, at most %d", h.Tags, query.MaxAnnotationTags)
	}
	// [base, base+120_001): the first two, oldest first, as stored.
	got, err := s.Annotations(ctx, store.AnnotationQuery{FromMs: base, ToMs: base + 120_001})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !sameAnnotation(got[0], stored[0]) || !sameAnnotation(got[1], stored[1]) {
		t.Fatalf("range listing:\n got %+v\nwant %+v", got, stored[:2])
	}
	// Limit keeps the newest, still oldest first.
	got, err = s.Annotations(ctx, store.AnnotationQuery{FromMs: base, ToMs: base + 1e6, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != stored[1].ID || got[1].ID != stored[2].ID || got[1].Source != query.SourceRtmon {
		t.Fatalf("limited listing %+v", got)
	}
	for _, bad := range []store.Annotation{{Text: " \x00 "}, {Text: "x", Source: "evil"}, {Text: "x", TimeMs: -5}} {
		if _, err := s.AddAnnotation(ctx, bad); err == nil {
			t.Errorf("%+v stored; want an error", bad)
		}
	}
}

func sameAnnotation(a, b store.Annotation) bool {
	return a.ID == b.ID && a.TimeMs == b.TimeMs && a.Text == b.Text && a.Source == b.Source && a.Class == b.Class &&
		strings.Join(a.Tags, "\x00") == strings.Join(b.Tags, "\x00")
}
