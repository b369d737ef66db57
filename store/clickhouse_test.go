package store_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/chtest"
	"github.com/rtmon/rtmon/store/storetest"
)

// chServer is started once for the package by TestMain; the ClickHouse
// tests never skip: if no server can be installed or started, they fail.
var (
	chServer *chtest.Server
	chErr    error
	dbSeq    atomic.Int64
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rtmon-chtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	chServer, chErr = chtest.Start(ctx, dir, 0, 0)
	cancel()
	code := m.Run()
	chServer.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

func needCH(t testing.TB) *chtest.Server {
	t.Helper()
	if chErr != nil {
		t.Fatalf("clickhouse test server: %v", chErr)
	}
	return chServer
}

// freshDB names a database no other test uses.
func freshDB() string { return fmt.Sprintf("rtmon_test_%d_%d", os.Getpid(), dbSeq.Add(1)) }

func TestClickHouseConformance(t *testing.T) {
	srv := needCH(t)
	url := srv.URL(freshDB())
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

func TestClickHouseTTL(t *testing.T) {
	url := needCH(t).URL(freshDB())
	storetest.RunTTL(t, func(t *testing.T, ttl time.Duration) store.Store {
		s, err := store.Open(context.Background(), url, store.Options{TTL: ttl, SpillDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
