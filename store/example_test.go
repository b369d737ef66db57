package store_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
)

// Open an embedded store, write a transaction and read it back: found by
// a search on its client's network, and counted in the percentiles.
func Example() {
	ctx := context.Background()
	s, err := store.Open(ctx, "memory:", store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	start := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC).UnixNano()
	tx := &reconstruct.Transaction{
		ID: "c1/0", ConnectionID: "c1",
		Client: netip.MustParseAddr("10.1.2.3"), ClientPort: 40000,
		Server: netip.MustParseAddr("203.0.113.1"), ServerPort: 80,
		Start: start, End: start + 120e6,
		Tconn: 20e6, Tserver: 90e6, Ttransfer: 10e6, Total: 120e6,
		Method: "GET", Host: "www.example.com", URL: "/", Status: 200, Class: "gold",
	}
	if err := s.WriteBatch(ctx, store.Batch{Transactions: []*reconstruct.Transaction{tx}}); err != nil {
		log.Fatal(err)
	}
	// WriteBatch only queues; Flush returns once the records are stored.
	if err := s.Flush(ctx); err != nil {
		log.Fatal(err)
	}

	day := store.TimeRange{From: start - int64(time.Hour), To: start + int64(time.Hour)}
	res, err := s.Search(ctx, store.SearchQuery{Range: day, Client: "10.1.0.0/16"})
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range res.Transactions {
		fmt.Println(t.ID, t.Host+t.URL, time.Duration(t.Total))
	}
	ps, err := s.Percentiles(ctx, store.PercentileQuery{Range: day, Component: "total", Qs: []float64{0.5}})
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range ps {
		fmt.Println(p.Class, p.Count, time.Duration(p.Values[0]))
	}
	// Output:
	// c1/0 www.example.com/ 120ms
	// gold 1 120ms
}
