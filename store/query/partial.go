package query

import (
	"context"
	"slices"
	"sync"
)

// Partial answers (a ClickHouse cluster with a shard down, docs/cluster.md):
// by default a read that cannot reach every shard fails, so no caller gets
// an undercount it did not ask for. A caller that prefers an answer from
// the shards that are up reads under WithPartial and then asks the Partial
// which shards the answers lack.

type partialKey struct{}

// Partial collects the shards (1-based, remote_servers order) that reads
// under its context could not reach. Safe for concurrent reads.
type Partial struct {
	mu      sync.Mutex
	missing []int
}

// WithPartial lets the reads under the returned context answer without the
// shards that are down; p names them afterwards.
func WithPartial(ctx context.Context) (context.Context, *Partial) {
	p := &Partial{}
	return context.WithValue(ctx, partialKey{}, p), p
}

// PartialFrom is the Partial of ctx; nil: reads must see every shard.
func PartialFrom(ctx context.Context) *Partial {
	p, _ := ctx.Value(partialKey{}).(*Partial)
	return p
}

// Add notes shards that a read could not reach.
func (p *Partial) Add(shards ...int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range shards {
		if !slices.Contains(p.missing, s) {
			p.missing = append(p.missing, s)
		}
	}
	slices.Sort(p.missing)
}

// MissingShards lists the shards the answers lack, sorted; empty: complete.
func (p *Partial) MissingShards() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.missing)
}
