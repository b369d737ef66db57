// Package chcluster starts a ClickHouse cluster on this machine for tests
// and operators: one ZooKeeper and shards x replicas clickhouse-server
// processes (package chtest's servers, with a cluster config beside their
// own), each on free loopback ports and a directory of its own, forming the
// cluster "rtmon" of remote_servers (internal_replication on, macros
// {shard} and {replica}, distributed DDL through ZooKeeper). Servers and
// ZooKeeper stop and start one by one for failure tests. The ports and
// PIDs are kept in DIR/cluster.json, so StopDir stops a cluster another
// process started (make cluster-down) and a restart reuses the ports the
// replicas registered in ZooKeeper.
package chcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rtmon/rtmon/store/chtest"
)

// Options shape a cluster; zero values take the defaults.
type Options struct {
	Name     string // remote_servers name; "rtmon"
	Shards   int    // 2
	Replicas int    // per shard; 2
}

var nameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (o Options) withDefaults() (Options, error) {
	if o.Name == "" {
		o.Name = "rtmon"
	}
	if !nameRe.MatchString(o.Name) {
		return o, fmt.Errorf("cluster name %q must match %s", o.Name, nameRe)
	}
	if o.Shards == 0 {
		o.Shards = 2
	}
	if o.Replicas == 0 {
		o.Replicas = 2
	}
	// Bounded: each server is a process with its own caches.
	if o.Shards < 1 || o.Replicas < 1 || o.Shards*o.Replicas > 8 {
		return o, fmt.Errorf("cluster of %d x %d servers: want 1-8 servers", o.Shards, o.Replicas)
	}
	return o, nil
}

// Node is one clickhouse-server of the cluster.
type Node struct {
	Shard     int // 1-based, the {shard} macro
	Replica   int // 1-based within the shard; the {replica} macro is "sNrM"
	Dir       string
	TCPPort   int
	HTTPPort  int
	InterPort int // interserver HTTP, replicas fetch parts through it
	srv       *chtest.Server
}

// Addr is host:port of the node's native protocol.
func (n *Node) Addr() string { return fmt.Sprintf("127.0.0.1:%d", n.TCPPort) }

// Running says whether this process started the node and has not
// stopped it.
func (n *Node) Running() bool { return n.srv != nil }

// Exited says whether the node, started and not stopped, has exited on
// its own.
func (n *Node) Exited() bool { return n.srv != nil && n.srv.Exited() }

// PID is the node's server process id, 0 when it is not running.
func (n *Node) PID() int {
	if n.srv == nil {
		return 0
	}
	return n.srv.PID()
}

// Cluster is a running cluster.
type Cluster struct {
	Dir    string
	Name   string
	ZKPort int
	ZK     *ZooKeeper // nil while stopped
	Nodes  []*Node    // shard by shard: s1r1, s1r2, s2r1, ...
	mu     sync.Mutex // state file writes
}

// URL is the store URL of database db in cluster mode, through node i.
func (c *Cluster) URL(i int, db string) string {
	return fmt.Sprintf("clickhouse://%s/%s?cluster=%s", c.Nodes[i].Addr(), db, c.Name)
}

// Start starts a cluster in dir (created if needed). A dir that holds a
// stopped cluster is started again with its ports and data.
func Start(ctx context.Context, dir string, opts Options) (*Cluster, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("cluster dir: %w", err)
	}
	c, err := layout(dir, opts)
	if err != nil {
		return nil, err
	}
	if err := c.saveState(); err != nil {
		return nil, err
	}
	if err := c.StartZooKeeper(ctx); err != nil {
		return nil, err
	}
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i := range c.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = c.StartNode(ctx, i) }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.WaitReady(ctx, 3*time.Minute); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.warmUp(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// warmUp runs one ON CLUSTER DDL before anyone else does: 18.16 has been
// seen to crash (in zkutil::ZooKeeper::createImpl) on its first
// distributed DDL on a busy machine. A server that died is started again
// and the DDL repeated, at most three times, so the crash is the
// harness's to absorb, not the first test's.
func (c *Cluster) warmUp(ctx context.Context) error {
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		_, err := c.Query(ctx, 0, fmt.Sprintf("CREATE DATABASE IF NOT EXISTS chcluster_warmup ON CLUSTER %s", c.Name))
		died := false
		for i, n := range c.Nodes {
			if n.srv != nil && n.srv.Exited() {
				died = true
				n.srv = nil
				if serr := c.StartNode(ctx, i); serr != nil {
					return fmt.Errorf("warm-up: restart s%dr%d: %w", n.Shard, n.Replica, serr)
				}
			}
		}
		if err == nil && !died {
			_, err = c.Query(ctx, 0, fmt.Sprintf("DROP DATABASE IF EXISTS chcluster_warmup ON CLUSTER %s", c.Name))
			return err
		}
		last = err
		if died {
			last = errors.Join(err, errors.New("a server died during the first distributed DDL"))
		}
		if err := c.WaitReady(ctx, 3*time.Minute); err != nil {
			return err
		}
	}
	return fmt.Errorf("warm-up DDL on cluster %s: %w", c.Name, last)
}

// layout is the cluster in dir: the ports of a previous run's state, or
// fresh free ones.
func layout(dir string, opts Options) (*Cluster, error) {
	if st, err := readState(dir); err == nil {
		if st.Name != opts.Name || len(st.Nodes) != opts.Shards*opts.Replicas {
			return nil, fmt.Errorf("%s holds cluster %s of %d servers, not %s of %d: use another dir", dir, st.Name, len(st.Nodes), opts.Name, opts.Shards*opts.Replicas)
		}
		return st.cluster(dir), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	c := &Cluster{Dir: dir, Name: opts.Name}
	ports, err := freePorts(1 + 3*opts.Shards*opts.Replicas)
	if err != nil {
		return nil, err
	}
	c.ZKPort, ports = ports[0], ports[1:]
	for s := 1; s <= opts.Shards; s++ {
		for r := 1; r <= opts.Replicas; r++ {
			n := &Node{Shard: s, Replica: r, Dir: filepath.Join(dir, fmt.Sprintf("s%dr%d", s, r)),
				TCPPort: ports[0], HTTPPort: ports[1], InterPort: ports[2]}
			ports = ports[3:]
			c.Nodes = append(c.Nodes, n)
		}
	}
	return c, nil
}

// freePorts picks n distinct free loopback ports, all held open until
// all are picked so that none is handed out twice.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	out := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// StartZooKeeper starts ZooKeeper (again) on its port and data.
func (c *Cluster) StartZooKeeper(ctx context.Context) error {
	if c.ZK != nil {
		return nil
	}
	z, err := startZooKeeper(ctx, filepath.Join(c.Dir, "zookeeper"), c.ZKPort)
	if err != nil {
		return err
	}
	c.ZK = z
	return c.saveState()
}

// StopZooKeeper stops ZooKeeper; the servers keep running and retry.
func (c *Cluster) StopZooKeeper() {
	c.ZK.Stop()
	c.ZK = nil
	c.saveState()
}

// StartNode starts node i (again) on its ports and data.
func (c *Cluster) StartNode(ctx context.Context, i int) error {
	n := c.Nodes[i]
	if n.srv != nil {
		return nil
	}
	if err := writeNodeConfig(c, n); err != nil {
		return err
	}
	srv, err := chtest.Start(ctx, n.Dir, n.TCPPort, n.HTTPPort)
	if err != nil {
		return fmt.Errorf("server s%dr%d: %w", n.Shard, n.Replica, err)
	}
	n.srv = srv
	return c.saveState()
}

// StopNode stops node i by PID.
func (c *Cluster) StopNode(i int) {
	c.Nodes[i].srv.Stop()
	c.Nodes[i].srv = nil
	c.saveState()
}

// Stop stops every server, then ZooKeeper (so the servers do not spend
// their shutdown reconnecting). Data and the state file are kept.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		if n.srv == nil {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); c.StopNode(i) }()
	}
	wg.Wait()
	if c.ZK != nil {
		c.StopZooKeeper()
	}
}

// WaitReady waits until every running server answers, sees the whole
// cluster and has a working ZooKeeper session.
func (c *Cluster) WaitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	want := strconv.Itoa(len(c.Nodes))
	for i, n := range c.Nodes {
		if n.srv == nil {
			continue
		}
		var last error
		restarts := 0
		for {
			// 18.16 can crash while it starts (a DDL worker that lost its
			// first ZooKeeper session): start it again, a bounded number
			// of times, rather than wait on a dead process.
			if n.srv.Exited() && restarts < 2 {
				restarts++
				n.srv = nil
				if err := c.StartNode(ctx, i); err != nil {
					return fmt.Errorf("restart s%dr%d, which exited while starting: %w", n.Shard, n.Replica, err)
				}
			}
			got, err := c.Query(ctx, i, fmt.Sprintf("SELECT count() FROM system.clusters WHERE cluster = '%s'", c.Name))
			if err == nil && strings.TrimSpace(got) != want {
				err = fmt.Errorf("system.clusters lists %s servers of %s, want %s", strings.TrimSpace(got), c.Name, want)
			}
			if err == nil {
				_, err = c.Query(ctx, i, "SELECT count() FROM system.zookeeper WHERE path = '/'")
			}
			if err == nil {
				break
			}
			last = err
			if time.Now().After(deadline) {
				return fmt.Errorf("server s%dr%d not ready within %v: %w", n.Shard, n.Replica, limit, last)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	return nil
}

// Revive starts again every node this process started that exited on its
// own (18.16 has been seen to segfault in its DDL worker after a lost
// ZooKeeper session on a busy machine, long after the loss), waits until
// the cluster is ready and, when every node is up, repeats the warm-up
// DDL. It returns, per revived node, the end of its error log.
func (c *Cluster) Revive(ctx context.Context) ([]string, error) {
	var revived []string
	allUp := true
	for i, n := range c.Nodes {
		if n.srv == nil {
			allUp = false
			continue
		}
		if !n.srv.Exited() {
			continue
		}
		revived = append(revived, fmt.Sprintf("s%dr%d had exited; its error log ended: %s", n.Shard, n.Replica, n.errLogTail(600)))
		n.srv = nil
		if err := c.StartNode(ctx, i); err != nil {
			return revived, fmt.Errorf("revive s%dr%d: %w", n.Shard, n.Replica, err)
		}
	}
	if len(revived) == 0 {
		return nil, nil
	}
	if err := c.WaitReady(ctx, 3*time.Minute); err != nil {
		return revived, err
	}
	if allUp {
		return revived, c.warmUp(ctx)
	}
	return revived, nil
}

// Diagnose says, per node, whether it runs, exited on its own or was
// stopped, with the end of the error log of one that exited: what a
// failed test prints.
func (c *Cluster) Diagnose() []string {
	var out []string
	for _, n := range c.Nodes {
		state := "running"
		switch {
		case n.srv == nil:
			state = "stopped"
		case n.srv.Exited():
			state = "EXITED; its error log ended: " + n.errLogTail(1500)
		}
		out = append(out, fmt.Sprintf("s%dr%d: %s", n.Shard, n.Replica, state))
	}
	return out
}

// errLogTail is the last max bytes of the node's server.err.log.
func (n *Node) errLogTail(max int) string {
	b, err := os.ReadFile(filepath.Join(n.Dir, "server.err.log"))
	if err != nil {
		return err.Error()
	}
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}
