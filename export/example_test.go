package export_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/rtmon/rtmon/export"
	"github.com/rtmon/rtmon/reconstruct"
)

// Write transactions to a CSV record file and summarise them, as rtmon
// analyze does with the records the pipeline hands it.
func Example() {
	dir, err := os.MkdirTemp("", "rtmon-export")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	records, err := export.NewRecordWriter(dir, export.CSV)
	if err != nil {
		log.Fatal(err)
	}
	summary := export.NewSummary()
	for i, total := range []int64{80e6, 120e6, 400e6} {
		tx := &reconstruct.Transaction{ID: fmt.Sprintf("c%d/0", i), ConnectionID: fmt.Sprintf("c%d", i),
			Tconn: 20e6, Tserver: total - 30e6, Ttransfer: 10e6, Total: total, Status: 200}
		records.Transaction(tx)
		summary.Transaction(tx)
	}
	// Close reports the first write error, if any.
	if err := records.Close(); err != nil {
		log.Fatal(err)
	}

	median := summary.Components["total"].Quantile(0.5)
	fmt.Printf("%d transactions, median total %.0f ms\n", summary.Transactions, float64(median)/1e6)
	b, err := os.ReadFile(filepath.Join(dir, "transactions.csv"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.Count(string(b), "\n"), "lines in transactions.csv: a header and 3 rows")
	// Output:
	// 3 transactions, median total 120 ms
	// 4 lines in transactions.csv: a header and 3 rows
}
