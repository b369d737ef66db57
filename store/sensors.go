package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/rtmon/rtmon/store/query"
)

// Sensors counts each sensor's records of r, table by table: where several
// front ends write into one store, this is the per-sensor breakdown and
// the list a sensor filter picks from.
func (q *querier) Sensors(ctx context.Context, r TimeRange) ([]query.SensorCounts, error) {
	by := map[string]*query.SensorCounts{}
	w := baseWhere(r, "")
	for _, t := range []table{connTable, txTable, pvTable} {
		text := fmt.Sprintf("SELECT sensor, count(*) AS n, min(start_ns), max(start_ns) FROM %s WHERE %s GROUP BY sensor ORDER BY n DESC, sensor LIMIT %d",
			q.d.table(t.name), w, query.MaxSensors)
		err := eachRow(ctx, q.db(), text, w.args, func(rows *sql.Rows) error {
			var name string
			var n, first, last int64
			if err := rows.Scan(&name, &n, &first, &last); err != nil {
				return err
			}
			s := by[name]
			if s == nil {
				s = &query.SensorCounts{Sensor: name}
				by[name] = s
			}
			switch t.name {
			case connTable.name:
				s.Connections = n
			case pvTable.name:
				s.Pageviews = n
			default:
				s.Transactions, s.First, s.Last = n, first, last
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("sensors of %s: %w", t.name, err)
		}
	}
	out := make([]query.SensorCounts, 0, len(by))
	for _, s := range by {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b query.SensorCounts) int {
		return cmp.Or(cmp.Compare(b.Transactions, a.Transactions), cmp.Compare(b.Connections, a.Connections), cmp.Compare(a.Sensor, b.Sensor))
	})
	if len(out) > query.MaxSensors {
		out = out[:query.MaxSensors]
	}
	return out, nil
}
