package pageview_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/rtmon/rtmon/export"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

// Example shows the wiring of rtmon analyze --classes FILE --har DIR:
// tracker -> Grouper -> Tee(records, pageviews, HAR files, class summary).
func Example() {
	dir, _ := os.MkdirTemp("", "rtmon-example")
	defer os.RemoveAll(dir)
	classFile := filepath.Join(dir, "classes.yaml")
	os.WriteFile(classFile, []byte("classes:\n  - {name: premium, priority: high, match: 'IP.SRC == 198.51.100.*'}\n"), 0o644)

	classes, err := pageview.LoadClasses(classFile) // or pageview.DefaultClasses()
	if err != nil {
		fmt.Println(err)
		return
	}
	records, _ := export.NewRecordWriter(dir, export.JSONL)
	pageviews, _ := export.NewPageviewWriter(dir, export.JSONL)
	hars, _ := export.NewHARDir(filepath.Join(dir, "har"))
	summary := pageview.NewClassSummary()
	g := pageview.NewGrouper(pageview.Config{}, classes,
		pageview.Tee{pageview.Records(records), pageviews, hars, summary})
	tracker := reconstruct.NewTracker(reconstruct.Config{}, g)

	// ... tracker.Packet(&p) for every packet; here two finished records:
	_ = tracker
	client := netip.MustParseAddr("198.51.100.7")
	page := &reconstruct.Transaction{ID: "c1-0", ConnectionID: "c1", Client: client, Start: 1e18, End: 1e18 + 3e8,
		Total: 3e8, Tserver: 3e8, Host: "www.example.com", URL: "/", ContentType: "text/html", Status: 200}
	img := &reconstruct.Transaction{ID: "c2-0", ConnectionID: "c2", Client: client, Start: 1e18 + 2.5e8,
		End: 1e18 + 5e8, Total: 2.5e8, Tconn: 1e8, Tserver: 1e8, Ttransfer: 0.5e8, Host: "www.example.com", URL: "/a.png",
		Referer: "http://www.example.com/", ContentType: "image/png", Status: 200}
	g.Transaction(page)
	g.Transaction(img)
	g.Connection(&reconstruct.Connection{ID: "c1", Client: client, LastSeen: 1e18 + 5e8})
	g.Connection(&reconstruct.Connection{ID: "c2", Client: client, LastSeen: 1e18 + 5e8})

	// End of input: the tracker first, then the grouper.
	tracker.Flush()
	g.Flush()
	for _, c := range []interface{ Close() error }{records, pageviews, hars} {
		if err := c.Close(); err != nil {
			fmt.Println(err)
		}
	}
	for _, r := range summary.Rows() {
		fmt.Printf("%s %s: %d pageview, %d transactions, p50 %v\n", r.Class, r.Priority, r.Pageviews, r.Transactions, r.P50.Round(1e7))
	}
	fmt.Println(hars.Written(), "HAR file")
	// Output:
	// premium high: 1 pageview, 2 transactions, p50 500ms
	// 1 HAR file
}

// ExampleClassify stamps records with their class before a stage that
// must see it ahead of the Grouper; the Grouper keeps that class.
func ExampleClassify() {
	classes, err := pageview.ParseClasses([]byte("classes:\n  - {name: premium, priority: high, match: '198.51.100.0/24'}\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	var seen []string
	peek := peekSink{next: pageview.NewGrouper(pageview.Config{}, classes, pageview.Tee{}),
		seen: func(tx *reconstruct.Transaction) { seen = append(seen, tx.Class+"/"+tx.Priority) }}
	in := pageview.Classify(classes, peek)
	in.Transaction(&reconstruct.Transaction{ID: "c1-0", Client: netip.MustParseAddr("198.51.100.7"), URL: "/"})
	in.Transaction(&reconstruct.Transaction{ID: "c2-0", Client: netip.MustParseAddr("192.0.2.1"), URL: "/"})
	fmt.Println(seen)
	// Output:
	// [premium/high default/low]
}

// peekSink looks at transactions on their way to the Grouper.
type peekSink struct {
	next reconstruct.Sink
	seen func(*reconstruct.Transaction)
}

func (s peekSink) Connection(c *reconstruct.Connection) { s.next.Connection(c) }
func (s peekSink) Transaction(t *reconstruct.Transaction) {
	s.seen(t)
	s.next.Transaction(t)
}
