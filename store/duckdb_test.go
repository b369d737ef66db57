package store_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/storetest"
)

func TestDuckDBMemoryConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := store.Open(context.Background(), "memory:", store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, nil)
}

func TestDuckDBFileConformance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rtmon.duckdb")
	open := func(t *testing.T) store.Store {
		s, err := store.Open(context.Background(), "duckdb:"+path, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	storetest.Run(t, open, open)
}

func TestDuckDBTTL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ttl.duckdb")
	storetest.RunTTL(t, func(t *testing.T, ttl time.Duration) store.Store {
		s, err := store.Open(context.Background(), "duckdb:"+path, store.Options{TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
