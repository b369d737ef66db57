package query_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rtmon/rtmon/store/query"
)

// fake answers PageviewByID from nothing: any reader depending on the
// query package alone can be tested without an engine.
type fake struct{ query.Querier }

func (fake) PageviewByID(ctx context.Context, id string) (*query.PageviewDetail, error) {
	return nil, fmt.Errorf("pageview %q: %w", id, query.ErrNotFound)
}

// A reader builds requests and tells a missing record from a failure with
// errors.Is, whatever engine, or fake, answers.
func Example() {
	var q query.Querier = fake{}
	_, err := q.PageviewByID(context.Background(), "pv-1")
	fmt.Println(errors.Is(err, query.ErrNotFound))

	hq := query.HistogramQuery{
		Kind:  query.Pageviews,
		Range: query.TimeRange{From: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()},
		Edges: query.LinearEdges(int64(100*time.Millisecond), 5),
	}
	fmt.Println(hq.Edges)
	fmt.Println(query.Components(query.Pageviews))
	// Output:
	// true
	// [0 100000000 200000000 300000000 400000000 500000000]
	// [total tconn tserver ttransfer tother]
}
