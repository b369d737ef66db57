package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// Cluster mode: clickhouse://host:9000/db?cluster=NAME, NAME a cluster of
// the server's remote_servers (docs/cluster.md). Each table T of the
// single-server schema is T_local, the Replicated variant of its engine with
// the same columns, partitions and order on every server, and T, a
// Distributed table over them: every statement that reads or inserts T is
// unchanged. DDL runs ON CLUSTER, so ZooKeeper's distributed DDL queue
// carries it to servers that are down when it is issued.

// clusterOption takes ?cluster=NAME out of a store URL: the cluster name
// ("" without one) and the DSN for the driver, which would send an unknown
// parameter to the server as a setting.
func clusterOption(rawURL string, u *url.URL) (cluster, dsn string, err error) {
	q := u.Query()
	vals, ok := q["cluster"]
	if !ok {
		return "", rawURL, nil
	}
	if len(vals) != 1 || !identRe.MatchString(vals[0]) {
		return "", "", fmt.Errorf("cluster name %q must match %s", vals, identRe)
	}
	q.Del("cluster")
	v := *u
	v.RawQuery = q.Encode()
	return vals[0], v.String(), nil
}

// clusterSettings: an insert into a Distributed table returns once every
// shard's replica stored its rows (insert_distributed_sync; asynchronous,
// the server would acknowledge rows it holds in a local queue and may lose
// them).
func clusterSettings(o *clickhouse.Options) {
	if o.Settings == nil {
		o.Settings = clickhouse.Settings{}
	}
	o.Settings["insert_distributed_sync"] = 1
}

// checkCluster verifies that the server knows the cluster and, when a
// shard has replicas, reads and writes go to the same replica: the Distributed
// tables pick one per shard by load_balancing, and replication is
// asynchronous, so with the default (random) a read right after a write
// (the writer's dedup, a query after Flush) could miss it. 18.16 takes that
// setting from the user's profile only (the driver cannot send it to that
// server), so it is checked, not set.
func (c *chBackend) checkCluster(ctx context.Context) error {
	var servers, replicas uint64
	err := c.sdb.QueryRowContext(ctx, "SELECT count(), max(replica_num) FROM system.clusters WHERE cluster = ?", c.cluster).Scan(&servers, &replicas)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", c.cluster, err)
	}
	if servers == 0 {
		return fmt.Errorf("cluster %s is not in the server's remote_servers", c.cluster)
	}
	if replicas < 2 {
		return nil
	}
	var lb string
	if err := c.sdb.QueryRowContext(ctx, "SELECT value FROM system.settings WHERE name = 'load_balancing'").Scan(&lb); err != nil {
		return fmt.Errorf("cluster %s: load_balancing: %w", c.cluster, err)
	}
	if lb != "in_order" && lb != "first_or_random" {
		return fmt.Errorf("cluster %s has replicas but the user's load_balancing is %q: set <load_balancing>in_order</load_balancing> in its profile (docs/cluster.md)", c.cluster, lb)
	}
	return nil
}

func localName(t string) string { return t + "_local" }

// shardKey spreads t's rows over the shards: records by their client, so
// that a client's connections, transactions and pageviews meet on one
// shard whichever sensor saw them (cross-sensor stitching reads a client's
// records together); rollups by their key, so that the recomputes of one
// (kind, minute, class, sensor) meet where ReplacingMergeTree collapses
// them.
func shardKey(t table) string {
	has := func(name string) bool {
		return slices.ContainsFunc(t.cols, func(c column) bool { return c.name == name })
	}
	switch {
	case has("client"):
		return "cityHash64(client)"
	case t.name == rollupTable.name:
		return "cityHash64(kind, minute, class, sensor)"
	case has("id"):
		return "cityHash64(id)"
	}
	return "rand()"
}

// clusterPrepareSchema creates the database and the schema version table
// on every server. Each DDL runs only when this server lacks its object:
// ON CLUSTER waits for every server, and an Open while one is down must
// not wait for DDL that has nothing to do. The version table is replicated
// to every server of the cluster (one ZooKeeper path for all shards), so
// any server answers for it.
func (c *chBackend) clusterPrepareSchema(ctx context.Context) error {
	if err := c.checkCluster(ctx); err != nil {
		return err
	}
	engines, err := c.engines(ctx)
	if err != nil {
		return err
	}
	if engines["schema_migrations"] == "" {
		if err := c.conn.Exec(ctx, fmt.Sprintf("CREATE DATABASE IF NOT EXISTS `%s` ON CLUSTER %s", c.db, c.cluster)); err != nil {
			return fmt.Errorf("create database %s on cluster %s: %w", c.db, c.cluster, err)
		}
		ddl := fmt.Sprintf("CREATE TABLE IF NOT EXISTS `%s`.schema_migrations ON CLUSTER %s (version UInt32, applied DateTime) "+
			"ENGINE = ReplicatedMergeTree('/clickhouse/tables/all/%s/schema_migrations', '{shard}-{replica}') ORDER BY version",
			c.db, c.cluster, c.db)
		if err := c.conn.Exec(ctx, ddl); err != nil {
			return fmt.Errorf("schema_migrations on cluster %s: %w", c.cluster, err)
		}
		if engines, err = c.engines(ctx); err != nil {
			return err
		}
	}
	return checkClusterEngines(c.db, engines)
}

// engines maps the tables of the database on this server to their
// engines.
func (c *chBackend) engines(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	rows, err := c.sdb.QueryContext(ctx, "SELECT name, engine FROM system.tables WHERE database = ?", c.db)
	if err != nil {
		return nil, fmt.Errorf("tables of %s: %w", c.db, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, engine string
		if err := rows.Scan(&name, &engine); err != nil {
			return nil, fmt.Errorf("tables of %s: %w", c.db, err)
		}
		out[name] = engine
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tables of %s: %w", c.db, err)
	}
	return out, nil
}

// checkClusterEngines refuses a database a single-server store made: its
// tables would be written around the cluster.
func checkClusterEngines(db string, engines map[string]string) error {
	if e := engines["schema_migrations"]; e != "ReplicatedMergeTree" {
		return fmt.Errorf("database %s holds a single-server store (schema_migrations is %s): cluster mode needs a database of its own", db, e)
	}
	for _, t := range append([]table{rollupTable, annotationTable}, tables...) {
		if e, ok := engines[t.name]; ok && e != "Distributed" {
			return fmt.Errorf("database %s holds a single-server store (%s is %s): cluster mode needs a database of its own", db, t.name, e)
		}
	}
	return nil
}

// clusterCreateTable creates t's local tables on every server, then its
// Distributed table over their columns.
func (c *chBackend) clusterCreateTable(ctx context.Context, t table) error {
	local := localName(t.name)
	have, err := columnsOf(ctx, c, local)
	if err != nil {
		return err
	}
	if len(have) == 0 {
		engine, args, keys := chLayout(t)
		// {shard} and {replica} are each server's macros: the replicas of
		// a shard share the path.
		zk := fmt.Sprintf("'/clickhouse/tables/{shard}/%s/%s', '{replica}'", c.db, local)
		if args != "" {
			zk += ", " + args
		}
		ddl := fmt.Sprintf("CREATE TABLE IF NOT EXISTS `%s`.%s ON CLUSTER %s (%s) ENGINE = Replicated%s(%s) %s",
			c.db, local, c.cluster, columnDefs(t, chTypes, ""), engine, zk, keys)
		if err := c.conn.Exec(ctx, ddl); err != nil {
			return fmt.Errorf("create %s on cluster %s: %w", local, c.cluster, err)
		}
		if have, err = columnsOf(ctx, c, local); err != nil {
			return err
		}
	}
	return c.syncDistributed(ctx, t, have)
}

// clusterDropTable drops name's Distributed table, then its local tables,
// on every server.
func (c *chBackend) clusterDropTable(ctx context.Context, name string) error {
	for _, t := range []string{name, localName(name)} {
		if err := c.conn.Exec(ctx, fmt.Sprintf("DROP TABLE IF EXISTS `%s`.%s ON CLUSTER %s", c.db, t, c.cluster)); err != nil {
			return fmt.Errorf("drop %s on cluster %s: %w", t, c.cluster, err)
		}
	}
	return nil
}

// clusterAddColumn adds col to t's local tables on every server, then
// remakes the Distributed table with it.
func (c *chBackend) clusterAddColumn(ctx context.Context, t table, col column) error {
	local := localName(t.name)
	have, err := columnsOf(ctx, c, local)
	if err != nil {
		return err
	}
	if !slices.Contains(have, col.name) {
		err := c.conn.Exec(ctx, fmt.Sprintf("ALTER TABLE `%s`.%s ON CLUSTER %s ADD COLUMN %s %s DEFAULT %s",
			c.db, local, c.cluster, col.name, chTypes[col.kind], zeroOf(col.kind)))
		// Another sensor migrating at the same time may have added it
		// first (18.16 has no ADD COLUMN IF NOT EXISTS): the columns read
		// next decide.
		if err != nil && !columnExists(err) {
			return fmt.Errorf("add %s.%s on cluster %s: %w", local, col.name, c.cluster, err)
		}
		if have, err = columnsOf(ctx, c, local); err != nil {
			return err
		}
	}
	return c.syncDistributed(ctx, t, have)
}

// columnExists: the server refused to add a column it has.
func columnExists(err error) bool {
	var ex *clickhouse.Exception
	// 15 DUPLICATE_COLUMN, 44 ILLEGAL_COLUMN ("column with this name
	// already exists" on 18.16).
	return errors.As(err, &ex) && (ex.Code == 15 || ex.Code == 44)
}

// syncDistributed makes t's Distributed table have the local tables'
// columns (local, a prefix of t's). 18.16 refuses ALTER ON CLUSTER of a
// table that is not replicated when the cluster's shards are, so a
// Distributed table that lacks columns is dropped and created again: it
// holds no data (inserts into it are synchronous), and a statement that
// meanwhile finds it missing fails and is retried like any other.
func (c *chBackend) syncDistributed(ctx context.Context, t table, local []string) error {
	n := len(local)
	if n == 0 || n > len(t.cols) || !slices.Equal(local, t.names()[:n]) {
		return fmt.Errorf("table %s exists with columns %v, want a prefix of %v", localName(t.name), local, t.names())
	}
	dist, err := columnsOf(ctx, c, t.name)
	if err != nil {
		return err
	}
	if slices.Equal(dist, local) {
		return nil
	}
	if len(dist) > 0 {
		if err := c.conn.Exec(ctx, fmt.Sprintf("DROP TABLE IF EXISTS `%s`.%s ON CLUSTER %s", c.db, t.name, c.cluster)); err != nil {
			return fmt.Errorf("drop %s on cluster %s to remake it: %w", t.name, c.cluster, err)
		}
	}
	prefix := table{name: t.name, cols: t.cols[:n]}
	ddl := fmt.Sprintf("CREATE TABLE IF NOT EXISTS `%s`.%s ON CLUSTER %s (%s) ENGINE = Distributed(%s, %s, %s, %s)",
		c.db, t.name, c.cluster, columnDefs(prefix, chTypes, ""), c.cluster, c.db, localName(t.name), shardKey(t))
	if err := c.conn.Exec(ctx, ddl); err != nil {
		return fmt.Errorf("create %s on cluster %s: %w", t.name, c.cluster, err)
	}
	return nil
}

// clusterDropDaysBefore drops the expired day partitions of the local
// tables on every shard. cluster() reads one replica of each shard; the
// drop is replicated.
func (c *chBackend) clusterDropDaysBefore(ctx context.Context, cutoff time.Time) error {
	lim := cutoff.Format("20060102")
	for _, t := range retainedTables() {
		local := localName(t.name)
		parts, err := queryStrings(ctx, c.sdb, fmt.Sprintf("SELECT DISTINCT partition FROM cluster('%s', system, parts) "+
			"WHERE database = ? AND table = ? AND active AND partition < ?", c.cluster), c.db, local, lim)
		if err != nil {
			return fmt.Errorf("list partitions of %s on cluster %s: %w", local, c.cluster, err)
		}
		for _, p := range parts {
			if !partitionRe.MatchString(p) {
				continue
			}
			if err := c.conn.Exec(ctx, fmt.Sprintf("ALTER TABLE `%s`.%s ON CLUSTER %s DROP PARTITION %s", c.db, local, c.cluster, p)); err != nil {
				return fmt.Errorf("drop partition %s of %s on cluster %s: %w", p, local, c.cluster, err)
			}
		}
	}
	return nil
}
