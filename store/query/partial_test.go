package query

import (
	"context"
	"slices"
	"sync"
	"testing"
)

// A Partial collects shards from concurrent reads, each once, sorted; a
// context without one says reads must be complete.
func TestPartial(t *testing.T) {
	if PartialFrom(context.Background()) != nil {
		t.Fatal("a plain context carries a Partial")
	}
	ctx, p := WithPartial(context.Background())
	if PartialFrom(ctx) != p {
		t.Fatal("PartialFrom does not return the context's Partial")
	}
	if m := p.MissingShards(); len(m) != 0 {
		t.Fatalf("fresh Partial misses %v", m)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { p.Add(3-i%3, 3) })
	}
	wg.Wait()
	if m := p.MissingShards(); !slices.Equal(m, []int{1, 2, 3}) {
		t.Fatalf("MissingShards = %v, want [1 2 3]", m)
	}
	m := p.MissingShards()
	m[0] = 99
	if p.MissingShards()[0] != 1 {
		t.Fatal("MissingShards hands out its own slice")
	}
}
