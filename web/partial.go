package web

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/rtmon/rtmon/store/query"
)

// A ClickHouse cluster with a shard down (docs/cluster.md): the store's
// reads fail rather than undercount, unless asked for a partial answer.
// While the writer reports shards down, the overview and search ask for
// one and say which shards it lacks, so an on-call SRE still sees the
// other shards' clients, knowingly.

// partialContext asks for partial answers while st reports shards down;
// the returned Partial (nil otherwise) names the shards the reads lacked.
func partialContext(ctx context.Context, st query.Querier) (context.Context, *query.Partial) {
	if len(st.Stats().ShardsDown) == 0 {
		return ctx, nil
	}
	return query.WithPartial(ctx)
}

// missingShards is what p's reads lacked; nil when complete.
func missingShards(p *query.Partial) []int {
	if p == nil {
		return nil
	}
	if m := p.MissingShards(); len(m) > 0 {
		return m
	}
	return nil
}

// shardNumbers is shards as decimal strings.
func shardNumbers(shards []int) []string {
	s := make([]string, len(shards))
	for i, n := range shards {
		s[i] = strconv.Itoa(n)
	}
	return s
}

// shardsText names shards for the UI's status: "shard 2", "shards 1, 2".
func shardsText(shards []int) string {
	if len(shards) == 1 {
		return "shard " + strconv.Itoa(shards[0])
	}
	return "shards " + strings.Join(shardNumbers(shards), ", ")
}

// partialText is what a page or file lacking shards says, as the UI's
// partialNote does.
func partialText(shards []int) string {
	verb := "were"
	if len(shards) == 1 {
		verb = "was"
	}
	name := shardsText(shards)
	return strings.ToUpper(name[:1]) + name[1:] + " " + verb + " down: these numbers leave out the records stored there."
}

// shardList is shards for a header: "1,2".
func shardList(shards []int) string { return strings.Join(shardNumbers(shards), ",") }

// unionShards merges shard lists, sorted, each shard once; nil if none.
func unionShards(lists ...[]int) []int {
	var out []int
	for _, l := range lists {
		out = append(out, l...)
	}
	if len(out) == 0 {
		return nil
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// partialRange is the preamble of the overview's side panels: the range
// parameters resolved against the data, under partialContext. On false it
// has answered the request with the error.
func (s *Server) partialRange(c *gin.Context) (context.Context, *query.Partial, extent, query.TimeRange, bool) {
	ctx, partial := partialContext(c.Request.Context(), s.cfg.Store)
	ext, err := dataExtent(ctx, s.cfg.Store)
	if err != nil {
		fail(c, err)
		return ctx, partial, ext, query.TimeRange{}, false
	}
	r, err := rangeFrom(c).resolve(ext)
	if err != nil {
		bad(c, err)
		return ctx, partial, ext, r, false
	}
	return ctx, partial, ext, r, true
}
