package store_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/chtest"
	"github.com/rtmon/rtmon/store/storetest"
)

// chServer is started once for the package, by the first test that needs
// it (not in TestMain: fuzz workers run the same binary and need none); the
// ClickHouse tests never skip: if no server can be installed or started,
// they fail.
var (
	chServer *chtest.Server
	chErr    error
	chOnce   sync.Once
	chDir    string
	dbSeq    atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	if chServer != nil {
		chServer.Stop()
	}
	if chDir != "" {
		os.RemoveAll(chDir)
	}
	os.Exit(code)
}

func needCH(t testing.TB) *chtest.Server {
	t.Helper()
	chOnce.Do(func() {
		if chDir, chErr = os.MkdirTemp("", "rtmon-chtest-"); chErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		chServer, chErr = chtest.Start(ctx, chDir, 0, 0)
	})
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
