package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"

	"github.com/ClickHouse/clickhouse-go/v2"
	chdriver "github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/go-faster/city"
)

// Cluster mode writes each shard's rows to that shard's local tables
// itself (docs/cluster.md, "Writing"): a shard that is down holds back
// only its own rows, and the others keep taking theirs. The rows go where
// the Distributed tables would put them (cityHash64(client), the cluster's
// shard weights), so reads, stitching and the sharding key see one layout
// whichever way a row came in.

// shardSink is where a sharded writer stores its rows; shardRouter in
// cluster mode, a fake in tests.
type shardSink interface {
	shardCount() int
	// shardOf is the shard (0-based) of a client's records.
	shardOf(client netip.Addr) int
	// storeShard drops the items already stored on shard s and inserts the
	// rest there; items[g] are group g's items of that shard.
	storeShard(ctx context.Context, s int, groups []recordGroup, items [][]recordItem) (dups int, err error)
	close() error
}

// shardRouter reaches every replica of a cluster.
type shardRouter struct {
	db       string
	weights  []uint64 // per shard, in shard_num order
	total    uint64
	replicas [][]*replica // per shard, in replica_num order (in_order)
}

// replica is one server, connected on first use.
type replica struct {
	addr string
	opts clickhouse.Options
	mu   sync.Mutex
	conn chdriver.Conn
	sdb  *sql.DB
}

func newShardRouter(ctx context.Context, c *chBackend) (*shardRouter, error) {
	opts, err := clickhouse.ParseDSN(c.dsn)
	if err != nil {
		return nil, fmt.Errorf("shard router: %w", err)
	}
	clusterSettings(opts)
	rows, err := c.sdb.QueryContext(ctx, "SELECT shard_num, shard_weight, host_address, port FROM system.clusters WHERE cluster = ? ORDER BY shard_num, replica_num", c.cluster)
	if err != nil {
		return nil, fmt.Errorf("replicas of cluster %s: %w", c.cluster, err)
	}
	defer rows.Close()
	r := &shardRouter{db: c.db}
	for rows.Next() {
		var shard, weight uint32
		var host string
		var port uint16
		if err := rows.Scan(&shard, &weight, &host, &port); err != nil {
			return nil, fmt.Errorf("replicas of cluster %s: %w", c.cluster, err)
		}
		for len(r.replicas) < int(shard) {
			r.replicas = append(r.replicas, nil)
			r.weights = append(r.weights, 0)
		}
		ro := *opts
		ro.Addr = []string{net.JoinHostPort(host, strconv.Itoa(int(port)))}
		// Statements name the database. A stopped replica refuses at once;
		// a blackholed one must not hold the flusher long.
		ro.Auth.Database = "default"
		if ro.DialTimeout == 0 || ro.DialTimeout > probeTimeout {
			ro.DialTimeout = probeTimeout
		}
		r.replicas[shard-1] = append(r.replicas[shard-1], &replica{addr: ro.Addr[0], opts: ro})
		r.weights[shard-1] = uint64(weight)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("replicas of cluster %s: %w", c.cluster, err)
	}
	for s, reps := range r.replicas {
		if len(reps) == 0 || r.weights[s] == 0 {
			return nil, fmt.Errorf("cluster %s: shard %d has no replica or no weight", c.cluster, s+1)
		}
		r.total += r.weights[s]
	}
	if r.total == 0 {
		return nil, fmt.Errorf("cluster %s: no shards", c.cluster)
	}
	return r, nil
}

func (r *shardRouter) shardCount() int { return len(r.replicas) }

// shardOf is ClickHouse's choice for a Distributed insert: the key modulo
// the sum of the weights, the shards owning consecutive slots by weight.
func (r *shardRouter) shardOf(client netip.Addr) int {
	slot := city.CH64([]byte(addrKey(client))) % r.total
	for s, w := range r.weights {
		if slot < w {
			return s
		}
		slot -= w
	}
	return len(r.weights) - 1
}

// storeShard works on the shard's first replica that answers (as in_order
// load balancing would), dedup read and insert on the same one: the other
// may not have fetched the last blocks yet. A retry that lands on the
// other replica after a failed insert resends the same block, which the
// replicated table's block deduplication drops.
func (r *shardRouter) storeShard(ctx context.Context, s int, groups []recordGroup, items [][]recordItem) (int, error) {
	var errs []error
	for _, rep := range r.replicas[s] {
		conn, sdb, err := rep.open(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// A short ping first: a hung server must not hold the flusher (and
		// every other shard's rows) for the whole insert timeout.
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		err = conn.Ping(pctx)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("replica %s: %w", rep.addr, err))
			continue
		}
		existing := func(ctx context.Context, t table, lo, hi int64, ids map[string]bool) (map[string]bool, error) {
			return existingIDsIn(ctx, sdb, fmt.Sprintf("`%s`.%s", r.db, localName(t.name)), lo, hi, ids)
		}
		insert := func(ctx context.Context, cs *colSet) error {
			return insertCH(ctx, conn, r.db, localName(cs.t.name), cs)
		}
		dups, err := storeGroups(ctx, groups, items, existing, insert, noChunks)
		if err != nil {
			return 0, fmt.Errorf("shard %d (replica %s): %w", s+1, rep.addr, err)
		}
		return dups, nil
	}
	return 0, fmt.Errorf("shard %d: no replica answers: %w", s+1, errors.Join(errs...))
}

// noChunks: one insert per table and shard (see chBackend.chunkRows).
func noChunks(int) int { return 0 }

// storeGroups dedups and inserts each group's items, the tables in
// parallel; chunk splits a table's inserts (insertItems).
func storeGroups(ctx context.Context, groups []recordGroup, items [][]recordItem,
	existing existingFunc, insert func(context.Context, *colSet) error, chunk func(int) int) (int, error) {
	dups := make([]int, len(groups))
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for gi := range groups {
		if len(items[gi]) == 0 {
			continue
		}
		wg.Go(func() {
			keep, d, err := dedupItems(ctx, &groups[gi], items[gi], existing)
			if err == nil {
				err = insertItems(ctx, &groups[gi], keep, chunk, insert)
			}
			dups[gi], errs[gi] = d, err
		})
	}
	wg.Wait()
	n := 0
	for _, d := range dups {
		n += d
	}
	return n, errors.Join(errs...)
}

func (rep *replica) open(ctx context.Context) (chdriver.Conn, *sql.DB, error) {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	if rep.conn != nil {
		return rep.conn, rep.sdb, nil
	}
	conn, err := clickhouse.Open(&rep.opts)
	if err != nil {
		return nil, nil, fmt.Errorf("replica %s: %w", rep.addr, err)
	}
	rep.conn = conn
	rep.sdb = clickhouse.OpenDB(&rep.opts)
	rep.sdb.SetMaxOpenConns(4)
	return rep.conn, rep.sdb, nil
}

func (r *shardRouter) close() error {
	var errs []error
	for _, reps := range r.replicas {
		for _, rep := range reps {
			rep.mu.Lock()
			if rep.conn != nil {
				errs = append(errs, rep.conn.Close(), rep.sdb.Close())
				rep.conn, rep.sdb = nil, nil
			}
			rep.mu.Unlock()
		}
	}
	return errors.Join(errs...)
}
