package chcluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/storetest"
)

// The engine conformance suite, run against cluster mode: every query over
// the Distributed tables answers exactly what the reference computes, and
// dedup, sanitising and reopening behave as on one server.
func TestClusterConformance(t *testing.T) {
	c := needCluster(t)
	url := c.URL(0, freshDB())
	spill := t.TempDir()
	open := func(t *testing.T) store.Store {
		s, err := store.Open(context.Background(), url, store.Options{SpillDir: spill})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	storetest.Run(t, open, open)
}

// Retention drops the expired days' partitions of the local tables on
// every shard.
func TestClusterTTL(t *testing.T) {
	url := needCluster(t).URL(0, freshDB())
	storetest.RunTTL(t, func(t *testing.T, ttl time.Duration) store.Store {
		s, err := store.Open(context.Background(), url, store.Options{TTL: ttl, SpillDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// Cluster URLs that cannot work are refused at Open with the reason: a
// name that is no identifier, a cluster the server does not know, and a
// database a single-server store made (its tables are not replicated).
func TestClusterOpenErrors(t *testing.T) {
	c := needCluster(t)
	ctx := context.Background()
	single := freshDB()
	s, err := store.Open(ctx, fmt.Sprintf("clickhouse://%s/%s", c.Nodes[0].Addr(), single), store.Options{SpillDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for url, want := range map[string]string{
		fmt.Sprintf("clickhouse://%s/x?cluster=a-b", c.Nodes[0].Addr()):         "cluster name",
		fmt.Sprintf("clickhouse://%s/x?cluster=a&cluster=b", c.Nodes[0].Addr()): "cluster name",
		fmt.Sprintf("clickhouse://%s/x?cluster=nosuch", c.Nodes[0].Addr()):      "not in the server's remote_servers",
		c.URL(0, single): "single-server store",
	} {
		s, err := store.Open(ctx, url, store.Options{SpillDir: t.TempDir()})
		if err == nil {
			s.Close()
			t.Errorf("Open(%s) succeeded, want an error with %q", url, want)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%s) = %v, want %q", url, err, want)
		}
	}
}
