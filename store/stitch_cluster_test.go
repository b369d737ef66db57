package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// TestDDLWaitTimedOut: only a distributed DDL wait that timed out (159)
// lets a cluster mutation go on to have its effect checked; any other
// error, wrapped or not, still fails it.
func TestDDLWaitTimedOut(t *testing.T) {
	timeout := &clickhouse.Exception{Code: 159, Message: "Watching task /clickhouse/task_queue/ddl/query-0000000026 is executing longer than distributed_ddl_task_timeout (=180) seconds"}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{timeout, true},
		{fmt.Errorf("delete: %w", timeout), true},
		{&clickhouse.Exception{Code: 60, Message: "Table doesn't exist"}, false},
		{errors.New("connection reset"), false},
		{nil, false},
	} {
		if got := ddlWaitTimedOut(c.err); got != c.want {
			t.Errorf("ddlWaitTimedOut(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
