package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"time"
)

// backend is one engine reached: its connection and the few things in which
// ClickHouse and DuckDB differ. Everything else (migrations, the writer,
// the queries, retention) is shared and set up by open.
type backend interface {
	inserter
	schema
	// String names the engine and its location, for errors.
	String() string
	// dialect is how the engine spells the few differing SQL forms.
	dialect() dialect
	// batchRows is the effective Options.BatchRows for a requested value
	// (0: the engine's default).
	batchRows(requested int) int
	// spillDir is the default Options.SpillDir ("-": none).
	spillDir() string
	// hangs: the engine can stop taking batches without failing them (a
	// hung server), so a writer that waited in vain spills; an engine
	// that cannot is only slow, and writers wait for it.
	hangs() bool
	// dropDaysBefore deletes every record and rollup of the days before
	// cutoff (retention).
	dropDaysBefore(ctx context.Context, cutoff time.Time) error
	// connections are what closeBackend releases, in order.
	connections() []io.Closer
}

// schema is what the migrations need of an engine.
type schema interface {
	// prepareSchema creates what the migrations themselves need: the
	// database and the schema_migrations table.
	prepareSchema(ctx context.Context) error
	// sqlDB is the connection pool the queries read through.
	sqlDB() *sql.DB
	// columnsQuery selects a table's column names in order; none if it
	// does not exist.
	columnsQuery(table string) (query string, args []any)
	createTable(ctx context.Context, t table) error
	// addColumn appends c to t with its kind's zero as default.
	addColumn(ctx context.Context, t table, c column) error
	// dropTable drops a table if it exists (in cluster mode its
	// Distributed and local tables on every server).
	dropTable(ctx context.Context, name string) error
	// schemaVersion is the newest applied migration (0: none).
	schemaVersion(ctx context.Context) (int, error)
	recordVersion(ctx context.Context, version int) error
}

// open is the one open path of both engines: migrate the schema, apply the
// engine's defaults, start the writer and the retention.
func open(ctx context.Context, b backend, opts Options) (Store, error) {
	fail := func(err error) (Store, error) {
		return nil, errors.Join(fmt.Errorf("%s: %w", b, err), closeBackend(b))
	}
	if err := b.prepareSchema(ctx); err != nil {
		return fail(err)
	}
	if err := migrate(ctx, b, migrations(b)); err != nil {
		return fail(err)
	}
	if opts.SpillDir == "" {
		opts.SpillDir = b.spillDir()
	}
	opts.BatchRows = b.batchRows(opts.BatchRows)
	q := &querier{pool: b.sqlDB, d: b.dialect(), ins: b, keepRollups: opts.keepRollups(), versions: &versionClock{}}
	shards := opts.shards
	if c, ok := b.(*chBackend); ok && c.cluster != "" {
		r, err := newShardRouter(ctx, c)
		if err != nil {
			return fail(err)
		}
		shards = r
	}
	w, err := newWriter(b, q, opts, b.hangs(), shards)
	if err != nil {
		if shards != nil {
			shards.close()
		}
		return fail(err)
	}
	q.onRollupError = w.countRollupError
	if opts.keepRollups() {
		q.pending = w.pendingMinutes
	}
	e := &engine{querier: q, writer: w, release: func() error { return closeBackend(b) }, logger: opts.Logger}
	if err := e.startTTL(ctx, opts.TTL, b.dropDaysBefore); err != nil {
		return nil, errors.Join(fmt.Errorf("%s: %w", b, err), e.Close())
	}
	if c, ok := b.(*chBackend); ok && c.cluster != "" {
		sp, err := newShardProbe(ctx, c)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("%s: %w", b, err), e.Close())
		}
		e.shards = sp
	}
	return e, nil
}

// closeBackend releases b's connections.
func closeBackend(b backend) error {
	var errs []error
	for _, c := range b.connections() {
		errs = append(errs, c.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s close: %w", b, err)
	}
	return nil
}

// migrations are the schema versions, oldest first.
func migrations(s schema) []migration {
	return []migration{
		{1, func(ctx context.Context) error { return createTables(ctx, s, tables) }},
		{2, func(ctx context.Context) error { return createTables(ctx, s, []table{rollupTable}) }},
		// 3: pageviews say how many after-load objects and redirects they
		// hold and what evidence their grouping rests on.
		{3, func(ctx context.Context) error { return addColumns(ctx, s, pvTable) }},
		// 4: transactions say when the server acknowledged the request
		// (time in its listen queue, for the what-if's server model).
		{4, func(ctx context.Context) error { return addColumns(ctx, s, txTable) }},
		// 5: TLS: transactions say how long the client's TLS handshake
		// took (Ttls), connections what it negotiated.
		{5, func(ctx context.Context) error {
			if err := addColumns(ctx, s, connTable); err != nil {
				return err
			}
			return addColumns(ctx, s, txTable)
		}},
		// 6: annotations (deploys, config changes, capture drops).
		{6, func(ctx context.Context) error { return createTables(ctx, s, []table{annotationTable}) }},
		// 7: pageviews say which sensors saw them; transactions keep what
		// grouping them again needs (a redirect's Location, Sec-Fetch-Dest);
		// cross-sensor stitching keeps its progress (stitch.go).
		{7, func(ctx context.Context) error {
			if err := addColumns(ctx, s, pvTable); err != nil {
				return err
			}
			if err := addColumns(ctx, s, txTable); err != nil {
				return err
			}
			return createTables(ctx, s, []table{checkpointTable})
		}},
		// 8: pageviews keep what their HTML and stylesheets named
		// (Pageview.Declared), so stitching groups on the same evidence.
		{8, func(ctx context.Context) error { return addColumns(ctx, s, pvTable) }},
		// 9: rollups are kept per sensor and merged at query time. The key
		// (ClickHouse's sorting and sharding keys) changes, which no ALTER
		// does on 18.16, so the table is made again: rollups are
		// recomputed from the records, and readers recompute the minutes
		// they find missing.
		{9, func(ctx context.Context) error { return remakeTable(ctx, s, rollupTable) }},
	}
}
