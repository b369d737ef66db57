package store

import (
	"context"
	"database/sql"
	"fmt"
)

// Declared calls fn with what each stored pageview starting in [from,
// to) read in its HTML and stylesheets (pageview.Pageview.Declared), by
// the sensor that stored it and its container transaction's id: grouping
// again replays it in place of that transaction's body, which no store
// keeps. Pageviews without one (no HTML read, or stored before schema 8)
// are left out.
func (s *Stitching) Declared(ctx context.Context, from, to int64, fn func(sensor, containerID, declared string) error) error {
	q := fmt.Sprintf("SELECT sensor, container_id, declared FROM %s WHERE start_ns >= ? AND start_ns < ? AND declared != '' AND container_id != ''",
		s.q.d.table(pvTable.name))
	err := eachRow(ctx, s.q.db(), q, []any{from, to}, func(rows *sql.Rows) error {
		var sensor, container, declared string
		if err := rows.Scan(&sensor, &container, &declared); err != nil {
			return err
		}
		return fn(sensor, container, declared)
	})
	if err != nil {
		return fmt.Errorf("stitch: read declared references: %w", err)
	}
	return nil
}
