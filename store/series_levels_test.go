package store

import (
	"database/sql"
	"math/rand"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"
)

// TestSeriesLevelsPickContractIndex: the DECIMAL levels of
// pctSeriesDiscrete select index min(floor(q*n), n-1) in every group, as
// the sorted list does.
func TestSeriesLevelsPickContractIndex(t *testing.T) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Levels must stay DECIMAL (integer index arithmetic), not DOUBLE.
	var typ string
	if err := db.QueryRow("SELECT typeof([0.950000000000000000000000001, 1.000000000000000000000000000])").Scan(&typ); err != nil || typ != "DECIMAL(28,27)[]" {
		t.Fatalf("level list type %q (%v)", typ, err)
	}
	for trial := 0; trial < 30; trial++ {
		db.Exec("DROP TABLE IF EXISTS x")
		db.Exec("CREATE TABLE x (g BIGINT, v BIGINT)")
		var groups []SeriesPoint
		for g := 0; g < 40; g++ {
			n := int64(1 + rand.Intn([]int{5, 100, 1000, 20000}[trial%4]))
			if g%7 == 0 {
				n = int64(100 * (1 + rand.Intn(5)))
			}
			groups = append(groups, SeriesPoint{T: int64(g), Count: n})
			db.Exec("INSERT INTO x SELECT ?, (i * 7919) % ? FROM range(?) t(i)", g, n, n)
		}
		qs := []float64{0, 0.25, 0.5, 0.9, 0.95, 0.99, 1, rand.Float64()}
		levels, ok := seriesLevels(qs, groups)
		if !ok {
			t.Log("no levels", trial)
			continue
		}
		rows, err := db.Query("SELECT g, " + duckDialect.discrete("v", levels) + ", list_sort(list(v)) FROM x GROUP BY g ORDER BY g")
		if err != nil {
			t.Fatal(err, levels)
		}
		for rows.Next() {
			var g int64
			var got, s int64List
			if err := rows.Scan(&g, &got, &s); err != nil {
				t.Fatal(err)
			}
			n := int64(len(s))
			for i, x := range qs {
				k := n - 1
				if x < 1 {
					k = min(int64(x*float64(n)), n-1)
				}
				if got[i] != s[k] {
					t.Fatalf("trial %d g %d n %d q %v level %s: got %d want %d", trial, g, n, x, levels[i], got[i], s[k])
				}
			}
		}
		rows.Close()
	}
}
