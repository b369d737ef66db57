package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// Stitching in cluster mode (docs/cluster.md, "Stitching"). Reads and
// inserts go through the Distributed tables like everything else; a
// Distributed table cannot be altered, so the delete and update mutations
// go to every shard's local table ON CLUSTER (replicated through
// ZooKeeper), and are waited for on every server of the cluster: a read
// after the stitcher's pass may go to either replica of a shard.

// mutable is what an ALTER ... DELETE/UPDATE of table t names: the
// table itself on one server, its local tables on every server in cluster
// mode. The names are the schema's and the validated database and cluster.
func (c *chBackend) mutable(t string) string {
	if c.cluster == "" {
		return fmt.Sprintf("`%s`.%s", c.db, t)
	}
	return fmt.Sprintf("`%s`.%s ON CLUSTER %s", c.db, localName(t), c.cluster)
}

// mutate submits a mutation. In cluster mode, a server that timed out
// waiting for the others to run it ON CLUSTER has still queued it, and
// the caller then reads its effect on every server (waitClusterMutations),
// which is the test that matters: 18.16's DDL worker can leave a task
// "unfinished" on one replica of a shard whose other replica ran it (seen:
// "Node exists .../executed" in the log, then 180 s and code 159 for the
// statement) although the mutation itself replicates.
func (c *chBackend) mutate(ctx context.Context, query string, args ...any) error {
	err := c.conn.Exec(ctx, query, args...)
	if c.cluster != "" && ddlWaitTimedOut(err) {
		slog.Warn("stitch: a server did not report the mutation ON CLUSTER in time; checking its effect on every server", "err", err)
		return nil
	}
	return err
}

// ddlWaitTimedOut: the statement's distributed DDL task outlived
// distributed_ddl_task_timeout (159 TIMEOUT_EXCEEDED).
func ddlWaitTimedOut(err error) bool {
	var ex *clickhouse.Exception
	return errors.As(err, &ex) && ex.Code == 159
}

// rowCheck is a count that must read 0 on every server once a mutation
// is applied there.
type rowCheck struct {
	query string
	args  []any
}

// deletedCheck: none of the ids left in t's local table.
func (c *chBackend) deletedCheck(t string, ids []string) rowCheck {
	return rowCheck{fmt.Sprintf("SELECT count() FROM `%s`.%s WHERE id IN (%s)", c.db, localName(t), marks(len(ids))), anys(ids)}
}

// updatedCheck: no transaction of ids without its new pageview id and
// flags.
func (c *chBackend) updatedCheck(ids, pvIDs []string, flags []uint32) rowCheck {
	q := fmt.Sprintf("SELECT count() FROM `%s`.%s WHERE id IN (%s) AND "+
		"(pageview_id != transform(id, ?, ?, pageview_id) OR flags != transform(id, ?, ?, flags))",
		c.db, localName(txTable.name), marks(len(ids)))
	return rowCheck{q, append(anys(ids), ids, pvIDs, ids, flags)}
}

// clusterMutationWait bounds the wait for one table's mutations on every
// server: a replica that cannot apply them fails the window, which a
// later run repeats.
const clusterMutationWait = 10 * time.Minute

// waitClusterMutations waits until every server of the cluster has no
// unfinished mutation of t's local table and reads 0 for every check. Both
// are asked: a replica lists a mutation only once it has fetched it from
// ZooKeeper, so "none unfinished" alone could be read before it knows of
// it; the checks read the mutation's effect. A replica that has not yet
// fetched a part the mutation covers applies it when it does (replicated
// mutations cover every part older than them).
func (c *chBackend) waitClusterMutations(ctx context.Context, t string, checks []rowCheck) error {
	ctx, cancel := context.WithTimeout(ctx, clusterMutationWait)
	defer cancel()
	addrs, err := c.clusterAddrs(ctx)
	if err != nil {
		return err
	}
	for _, addr := range addrs {
		if err := c.waitServer(ctx, addr, t, checks); err != nil {
			return fmt.Errorf("mutations of %s on %s: %w", localName(t), addr, err)
		}
	}
	return nil
}

// clusterAddrs lists the native address of every server of the cluster
// (18.16 has no clusterAllReplicas: each is asked in turn).
func (c *chBackend) clusterAddrs(ctx context.Context) ([]string, error) {
	var out []string
	err := eachRow(ctx, c.sdb, "SELECT host_address, port FROM system.clusters WHERE cluster = ? ORDER BY shard_num, replica_num",
		[]any{c.cluster}, func(rows *sql.Rows) error {
			var host string
			var port uint16
			if err := rows.Scan(&host, &port); err != nil {
				return err
			}
			out = append(out, net.JoinHostPort(host, strconv.Itoa(int(port))))
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("servers of cluster %s: %w", c.cluster, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cluster %s lists no servers", c.cluster)
	}
	return out, nil
}

// waitServer polls one server, through a connection of its own made
// with the store's credentials, until its mutations of t are done and
// every check reads 0.
func (c *chBackend) waitServer(ctx context.Context, addr, t string, checks []rowCheck) error {
	opts, err := clickhouse.ParseDSN(c.dsn)
	if err != nil {
		return fmt.Errorf("dsn: %w", err)
	}
	opts.Addr = []string{addr}
	opts.Auth.Database = "default"
	db := clickhouse.OpenDB(opts)
	defer db.Close()
	db.SetMaxOpenConns(1)
	pause := 20 * time.Millisecond
	for {
		done, err := serverApplied(ctx, db, c.db, localName(t), checks)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// serverApplied reads one server's state once.
func serverApplied(ctx context.Context, db *sql.DB, database, local string, checks []rowCheck) (bool, error) {
	var n uint64
	err := db.QueryRowContext(ctx, "SELECT count() FROM system.mutations WHERE database = ? AND table = ? AND is_done = 0",
		database, local).Scan(&n)
	if err != nil || n > 0 {
		return false, err
	}
	for _, ch := range checks {
		if err := db.QueryRowContext(ctx, ch.query, ch.args...).Scan(&n); err != nil || n > 0 {
			return false, err
		}
	}
	return true, nil
}
