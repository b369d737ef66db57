package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

// Search counts the matches, then reads one page of them (searchTable).
func (q *querier) Search(ctx context.Context, sq SearchQuery) (SearchResult, error) {
	var res SearchResult
	k, t, err := kindTable(sq.Kind)
	if err != nil {
		return res, err
	}
	w, err := q.searchWhere(k, sq)
	if err != nil {
		return res, err
	}
	if k == Transactions {
		res.Total, res.Transactions, err = searchTable(ctx, q, t, w, sq.Limit, sq.Offset, scanTx, func(tx *reconstruct.Transaction) string { return tx.ID })
	} else {
		res.Total, res.Pageviews, err = searchTable(ctx, q, t, w, sq.Limit, sq.Offset, scanPv, func(pv *pageview.Pageview) string { return pv.ID })
	}
	return res, err
}

// SearchConnections pages the connections of a range as Search pages
// transactions, so a reader gets them in bulk rather than one pageview at
// a time.
func (q *querier) SearchConnections(ctx context.Context, cq ConnectionSearch) (ConnectionResult, error) {
	var res ConnectionResult
	var err error
	w := baseWhere(cq.Range, "")
	if cq.Sensor != "" {
		w.add("sensor = ?", cq.Sensor)
	}
	res.Total, res.Connections, err = searchTable(ctx, q, connTable, w, cq.Limit, cq.Offset, scanConn,
		func(c *reconstruct.Connection) string { return c.ID })
	if err != nil {
		return res, fmt.Errorf("connections: %w", err)
	}
	return res, nil
}

// searchTable counts the rows of t that match w, then reads page [offset,
// offset+limit) of them, newest first, in two steps: order and page over
// (start_ns, id) only, then read whole rows for that page. 18.16 has no
// lazy column reads, so one step would read every column of every match
// before the LIMIT. limit defaults to 50 and is at most 10000.
func searchTable[R any](ctx context.Context, q *querier, t table, w *where, limit, offset int,
	scan func(rowScanner, *string) (*R, error), id func(*R) string) (int64, []*R, error) {
	limit, offset = min(max(limit, 0), 10000), max(offset, 0)
	if limit == 0 {
		limit = 50
	}
	tbl := q.d.table(t.name)
	var total int64
	if err := q.db().QueryRowContext(ctx, fmt.Sprintf("SELECT count(*) FROM %s WHERE %s", tbl, w), w.args...).Scan(&total); err != nil {
		return 0, nil, fmt.Errorf("search count: %w", err)
	}
	p, err := q.searchPage(ctx, tbl, w, limit, offset)
	if err != nil || len(p.ids) == 0 {
		return total, nil, err
	}
	rows, err := searchRows(ctx, q, t, p, scan, id)
	return total, rows, err
}

// searchWhere is the condition sq's filters make.
func (q *querier) searchWhere(k Kind, sq SearchQuery) (*where, error) {
	w := baseWhere(sq.Range, sq.Class)
	if sq.Client != "" {
		cond, args, err := clientCond(sq.Client)
		if err != nil {
			return nil, err
		}
		w.add(cond, args...)
	}
	if sq.URLContains != "" {
		w.add(q.d.strpos+"(url, ?) > 0", sq.URLContains)
	}
	if sq.Status != 0 {
		w.add("status = ?", sq.Status)
	}
	if sq.MinTotal > 0 {
		w.add("total >= ?", sq.MinTotal)
	}
	if sq.ID != "" {
		w.add("id = ?", sq.ID)
	}
	switch {
	case sq.Sensor == "":
	case k == Pageviews && !strings.Contains(sq.Sensor, ","):
		// A stitched pageview is stored once, under its container's
		// sensor, and lists every sensor that saw part of it: it is each
		// one's pageview to find. (Distributions and rollups count it once,
		// under the container's sensor, so that sensors add up.)
		w.add("(sensor = ? OR "+q.d.strpos+"(concat(',', sensors, ','), ?) > 0)", sq.Sensor, ","+sq.Sensor+",")
	default:
		w.add("sensor = ?", sq.Sensor)
	}
	if sq.ComponentMin != 0 || sq.ComponentMax != 0 {
		// The column name comes from the fixed list, never from the query.
		col, err := componentCol(k, sq.Component)
		if err != nil {
			return nil, err
		}
		if sq.ComponentMin != 0 {
			w.add(col+" >= ?", sq.ComponentMin)
		}
		if sq.ComponentMax != 0 {
			w.add(col+" < ?", sq.ComponentMax)
		}
	}
	return w, nil
}

// searchPage is one page of matches: their ids in order and the span of
// their start times, which bounds the read of their rows.
type searchPage struct {
	ids    []string
	pos    map[string]int // id -> index in ids
	lo, hi int64
}

func (q *querier) searchPage(ctx context.Context, tbl string, w *where, limit, offset int) (searchPage, error) {
	p := searchPage{pos: map[string]int{}}
	err := eachRow(ctx, q.db(), fmt.Sprintf("SELECT id, start_ns FROM %s WHERE %s ORDER BY start_ns DESC, id ASC LIMIT ? OFFSET ?", tbl, w),
		append(w.args, limit, offset), func(rows *sql.Rows) error {
			var id string
			var st int64
			if err := rows.Scan(&id, &st); err != nil {
				return err
			}
			if len(p.ids) == 0 {
				p.lo, p.hi = st, st
			}
			p.lo, p.hi = min(p.lo, st), max(p.hi, st)
			p.pos[id] = len(p.ids)
			p.ids = append(p.ids, id)
			return nil
		})
	if err != nil {
		return p, fmt.Errorf("search: %w", err)
	}
	return p, nil
}

// searchRows reads the whole rows of page p, in the page's order.
func searchRows[R any](ctx context.Context, q *querier, t table, p searchPage, scan func(rowScanner, *string) (*R, error), id func(*R) string) ([]*R, error) {
	args := []any{p.lo, p.hi}
	for _, id := range p.ids {
		args = append(args, id)
	}
	byPos := make([]*R, len(p.ids))
	var sensor string
	err := eachRow(ctx, q.db(), fmt.Sprintf("SELECT %s FROM %s WHERE start_ns >= ? AND start_ns <= ? AND id IN (%s)", t.selectList(), q.d.table(t.name), marks(len(p.ids))),
		args, func(rows *sql.Rows) error {
			r, err := scan(rows, &sensor)
			if err != nil {
				return err
			}
			byPos[p.pos[id(r)]] = r
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("search rows: %w", err)
	}
	var out []*R
	for _, r := range byPos {
		if r != nil {
			out = append(out, r)
		}
	}
	return out, nil
}

func (q *querier) PageviewByID(ctx context.Context, id string) (*PageviewDetail, error) {
	var sensor string
	row := q.db().QueryRowContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE id = ? LIMIT 1", pvTable.selectList(), q.d.table(pvTable.name)), id)
	pv, err := scanPv(row, &sensor)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("pageview %q: %w", id, ErrNotFound)
		}
		return nil, fmt.Errorf("pageview %q: %w", id, err)
	}
	det := &PageviewDetail{Pageview: pv}
	// Exact membership: the pageview stage stamps every transaction it
	// forwards with its pageview id. No time or client window is added,
	// because an object's transaction may start before the pageview does
	// (a connection opened in advance) and a window would silently drop it.
	connIDs := map[string]bool{}
	err = eachRow(ctx, q.db(), fmt.Sprintf("SELECT %s FROM %s WHERE pageview_id = ? ORDER BY start_ns, id",
		txTable.selectList(), q.d.table(txTable.name)), []any{pv.ID}, func(rows *sql.Rows) error {
		tx, err := scanTx(rows, &sensor)
		if err != nil {
			return err
		}
		det.Transactions = append(det.Transactions, tx)
		connIDs[tx.ConnectionID] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pageview transactions: %w", err)
	}
	if len(connIDs) == 0 {
		return det, nil
	}
	args := make([]any, 0, len(connIDs))
	for _, id := range slices.Sorted(maps.Keys(connIDs)) {
		args = append(args, id)
	}
	err = eachRow(ctx, q.db(), fmt.Sprintf("SELECT %s FROM %s WHERE id IN (%s) ORDER BY start_ns, id",
		connTable.selectList(), q.d.table(connTable.name), marks(len(args))), args, func(rows *sql.Rows) error {
		c, err := scanConn(rows, &sensor)
		if err != nil {
			return err
		}
		det.Connections = append(det.Connections, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pageview connections: %w", err)
	}
	return det, nil
}
