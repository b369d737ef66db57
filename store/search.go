package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

func (q *querier) Search(ctx context.Context, sq SearchQuery) (SearchResult, error) {
	var res SearchResult
	k, t, err := kindTable(sq.Kind)
	if err != nil {
		return res, err
	}
	w := baseWhere(sq.Range, sq.Class)
	if sq.Client != "" {
		cond, args, err := clientCond(sq.Client)
		if err != nil {
			return res, err
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
	if sq.Limit <= 0 {
		sq.Limit = 50
	}
	if sq.Limit > 10000 {
		sq.Limit = 10000
	}
	if sq.Offset < 0 {
		sq.Offset = 0
	}
	tbl := q.d.table(t.name)
	if err := q.db.QueryRowContext(ctx, fmt.Sprintf("SELECT count(*) FROM %s WHERE %s", tbl, w), w.args...).Scan(&res.Total); err != nil {
		return res, fmt.Errorf("search count: %w", err)
	}
	// Two steps: order and page over (start_ns, id) only, then read whole
	// rows for that page. 18.16 has no lazy column reads, so one step would
	// read every column of every match before the LIMIT.
	rows, err := q.db.QueryContext(ctx, fmt.Sprintf("SELECT id, start_ns FROM %s WHERE %s ORDER BY start_ns DESC, id ASC LIMIT ? OFFSET ?", tbl, w),
		append(w.args, sq.Limit, sq.Offset)...)
	if err != nil {
		return res, fmt.Errorf("search: %w", err)
	}
	var ids []string
	pos := map[string]int{}
	var lo, hi int64
	for rows.Next() {
		var id string
		var st int64
		if err := rows.Scan(&id, &st); err != nil {
			rows.Close()
			return res, fmt.Errorf("search: %w", err)
		}
		if len(ids) == 0 {
			lo, hi = st, st
		}
		lo, hi = min(lo, st), max(hi, st)
		pos[id] = len(ids)
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("search: %w", err)
	}
	if len(ids) == 0 {
		return res, nil
	}
	args := []any{lo, hi}
	for _, id := range ids {
		args = append(args, id)
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")
	rows, err = q.db.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE start_ns >= ? AND start_ns <= ? AND id IN (%s)", t.selectList(), tbl, marks), args...)
	if err != nil {
		return res, fmt.Errorf("search rows: %w", err)
	}
	defer rows.Close()
	txs := make([]*reconstruct.Transaction, len(ids))
	pvs := make([]*pageview.Pageview, len(ids))
	for rows.Next() {
		var sensor string
		if k == Transactions {
			tx, err := scanTx(rows, &sensor)
			if err != nil {
				return res, err
			}
			txs[pos[tx.ID]] = tx
		} else {
			pv, err := scanPv(rows, &sensor)
			if err != nil {
				return res, err
			}
			pvs[pos[pv.ID]] = pv
		}
	}
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("search rows: %w", err)
	}
	for i := range ids {
		if k == Transactions && txs[i] != nil {
			res.Transactions = append(res.Transactions, txs[i])
		}
		if k == Pageviews && pvs[i] != nil {
			res.Pageviews = append(res.Pageviews, pvs[i])
		}
	}
	return res, nil
}

func (q *querier) PageviewByID(ctx context.Context, id string) (*PageviewDetail, error) {
	var sensor string
	row := q.db.QueryRowContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE id = ? LIMIT 1", pvTable.selectList(), q.d.table(pvTable.name)), id)
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
	rows, err := q.db.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE pageview_id = ? ORDER BY start_ns, id",
		txTable.selectList(), q.d.table(txTable.name)), pv.ID)
	if err != nil {
		return nil, fmt.Errorf("pageview transactions: %w", err)
	}
	connIDs := map[string]bool{}
	for rows.Next() {
		tx, err := scanTx(rows, &sensor)
		if err != nil {
			rows.Close()
			return nil, err
		}
		det.Transactions = append(det.Transactions, tx)
		connIDs[tx.ConnectionID] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pageview transactions: %w", err)
	}
	if len(connIDs) == 0 {
		return det, nil
	}
	ids := make([]string, 0, len(connIDs))
	for id := range connIDs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err = q.db.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE id IN (%s) ORDER BY start_ns, id",
		connTable.selectList(), q.d.table(connTable.name), marks), args...)
	if err != nil {
		return nil, fmt.Errorf("pageview connections: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		c, err := scanConn(rows, &sensor)
		if err != nil {
			return nil, err
		}
		det.Connections = append(det.Connections, c)
	}
	return det, rows.Err()
}
