package chcluster_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store/chcluster"
)

// The package's cluster (2 shards x 2 replicas) is started once, by the
// first test that needs it, and stopped in TestMain. The tests never skip:
// a cluster that cannot be installed or started fails them.
var (
	shared    *chcluster.Cluster
	sharedErr error
	sharedOne sync.Once
	sharedDir string
	dbSeq     atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
	os.Exit(code)
}

func needCluster(t testing.TB) *chcluster.Cluster {
	t.Helper()
	sharedOne.Do(func() {
		if sharedDir, sharedErr = os.MkdirTemp("", "rtmon-chcluster-"); sharedErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		shared, sharedErr = chcluster.Start(ctx, sharedDir, chcluster.Options{})
	})
	if sharedErr != nil {
		t.Fatalf("clickhouse test cluster: %v", sharedErr)
	}
	// A server that crashed during an earlier test (an 18.16 bug, not
	// rtmon's) is started again, loudly: a crash fails at most the test it
	// happened in.
	notes, err := shared.Revive(context.Background())
	for _, n := range notes {
		t.Logf("clickhouse test cluster: %s", n)
	}
	if err != nil {
		t.Fatalf("clickhouse test cluster: revive: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, d := range shared.Diagnose() {
				t.Logf("clickhouse test cluster after the failure: %s", d)
			}
		}
	})
	return shared
}

// freshDB names a database no other test uses.
func freshDB() string { return fmt.Sprintf("rtmon_cl_%d_%d", os.Getpid(), dbSeq.Add(1)) }

func query(t testing.TB, c *chcluster.Cluster, i int, sql string) string {
	t.Helper()
	out, err := c.Query(context.Background(), i, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return strings.TrimSpace(out)
}

// Every server of the cluster sees the same 2 x 2 layout with
// internal replication, has its own macros and reaches ZooKeeper.
func TestClusterLayout(t *testing.T) {
	c := needCluster(t)
	if len(c.Nodes) != 4 {
		t.Fatalf("%d servers, want 4", len(c.Nodes))
	}
	var want []string
	for _, n := range c.Nodes {
		want = append(want, fmt.Sprintf("%d\t%d\t%d", n.Shard, n.Replica, n.TCPPort))
	}
	for i, n := range c.Nodes {
		got := query(t, c, i, "SELECT shard_num, replica_num, port FROM system.clusters WHERE cluster = 'rtmon' ORDER BY shard_num, replica_num")
		if got != strings.Join(want, "\n") {
			t.Errorf("server %d: system.clusters =\n%s\nwant\n%s", i, got, strings.Join(want, "\n"))
		}
		macros := query(t, c, i, "SELECT macro, substitution FROM system.macros ORDER BY macro")
		if wantM := fmt.Sprintf("replica\ts%dr%d\nshard\t%d", n.Shard, n.Replica, n.Shard); macros != wantM {
			t.Errorf("server %d: macros =\n%s\nwant\n%s", i, macros, wantM)
		}
		if got := query(t, c, i, "SELECT count() > 0 FROM system.zookeeper WHERE path = '/clickhouse'"); got != "1" {
			t.Errorf("server %d: ZooKeeper /clickhouse has no children (%s)", i, got)
		}
	}
}

// A server and ZooKeeper stop and start one by one, and a cluster
// started here is stopped by StopDir, as another process (make
// cluster-down) stops it, from the state file alone.
func TestClusterStopStart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c, err := chcluster.Start(ctx, dir, chcluster.Options{Name: "pair", Shards: 1, Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	query(t, c, 0, "CREATE TABLE default.kv (k UInt64) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/kv', '{replica}') ORDER BY k")
	query(t, c, 1, "CREATE TABLE default.kv (k UInt64) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/kv', '{replica}') ORDER BY k")

	c.StopNode(1)
	if _, err := c.Query(ctx, 1, "SELECT 1"); err == nil {
		t.Fatal("stopped server still answers")
	}
	query(t, c, 0, "INSERT INTO default.kv VALUES (1), (2), (3)")
	if err := c.StartNode(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(ctx, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	// The restarted replica fetches what was inserted while it was down.
	waitFor(t, "replica 2 catches up", func() (bool, string) {
		got, err := c.Query(ctx, 1, "SELECT count() FROM default.kv")
		return err == nil && strings.TrimSpace(got) == "3", got
	})

	c.StopZooKeeper()
	waitFor(t, "inserts fail without ZooKeeper", func() (bool, string) {
		_, err := c.Query(ctx, 0, "INSERT INTO default.kv VALUES (4)")
		return err != nil, fmt.Sprint(err)
	})
	if err := c.StartZooKeeper(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(ctx, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "inserts resume with ZooKeeper", func() (bool, string) {
		_, err := c.Query(ctx, 0, "INSERT INTO default.kv VALUES (5)")
		return err == nil, fmt.Sprint(err)
	})

	d, running, err := chcluster.Describe(dir)
	if err != nil || !running || d.URL(0, "x") != c.URL(0, "x") {
		t.Fatalf("Describe = %v running %v err %v, want the running cluster", d, running, err)
	}
	if err := chcluster.StopDir(dir); err != nil {
		t.Fatal(err)
	}
	if _, running, err := chcluster.Describe(dir); err != nil || running {
		t.Fatalf("after StopDir: running %v err %v", running, err)
	}
	for i := range c.Nodes {
		if _, err := c.Query(ctx, i, "SELECT 1"); err == nil {
			t.Errorf("server %d answers after StopDir", i)
		}
	}
}

// waitFor polls cond until it holds, with a generous bound (the machine
// is busy); last is shown on failure.
// A server that dies on its own between tests is found and started
// again, and the cluster then takes distributed DDL on every server.
func TestClusterRevive(t *testing.T) {
	c := needCluster(t)
	ctx := context.Background()
	n := c.Nodes[3]
	if err := syscall.Kill(n.PID(), syscall.SIGKILL); err != nil {
		t.Fatalf("kill s%dr%d: %v", n.Shard, n.Replica, err)
	}
	waitFor(t, "the killed server exits", func() (bool, string) { return n.Exited(), "" })
	if d := strings.Join(c.Diagnose(), "; "); !strings.Contains(d, "s2r2: EXITED") {
		t.Errorf("diagnosis %q does not name s2r2 as exited", d)
	}
	notes, err := c.Revive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "s2r2 had exited") {
		t.Errorf("revive notes %q, want one for s2r2", notes)
	}
	if notes, err := c.Revive(ctx); err != nil || len(notes) != 0 {
		t.Errorf("second revive: %q, %v; want nothing to do", notes, err)
	}
	db := freshDB()
	query(t, c, 0, fmt.Sprintf("CREATE DATABASE `%s` ON CLUSTER %s", db, c.Name))
	for i := range c.Nodes {
		if got := query(t, c, i, fmt.Sprintf("SELECT count() FROM system.databases WHERE name = '%s'", db)); got != "1" {
			t.Errorf("server %d has %s databases %s after the DDL", i, got, db)
		}
	}
	query(t, c, 0, fmt.Sprintf("DROP DATABASE `%s` ON CLUSTER %s", db, c.Name))
}

func waitFor(t testing.TB, what string, cond func() (ok bool, last string)) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 3 min (last: %s)", what, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
