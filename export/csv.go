package export

import (
	"encoding/csv"
	"fmt"
	"io"
	"strings"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

// CSVWriter writes records of one kind as CSV in rtmon's one layout: a
// header, then a row per record with times in ns since the epoch and
// durations in ns (exact, whatever reads them), and captured text defused
// (see cell). The record files and the web UI's search export both use it.
type CSVWriter[T any] struct {
	w   *csv.Writer
	row func(T) []string
}

func newCSV[T any](w io.Writer, header []string, row func(T) []string) (*CSVWriter[T], error) {
	c := &CSVWriter[T]{w: csv.NewWriter(w), row: row}
	if err := c.w.Write(header); err != nil {
		return nil, fmt.Errorf("csv header: %w", err)
	}
	return c, nil
}

// ConnectionCSV writes the header of connections and returns their writer.
func ConnectionCSV(w io.Writer) (*CSVWriter[*reconstruct.Connection], error) {
	return newCSV(w, connectionHeader, connectionRow)
}

// TransactionCSV writes the header of transactions and returns their writer.
func TransactionCSV(w io.Writer) (*CSVWriter[*reconstruct.Transaction], error) {
	return newCSV(w, transactionHeader, transactionRow)
}

// PageviewCSV writes the header of pageviews and returns their writer.
func PageviewCSV(w io.Writer) (*CSVWriter[*pageview.Pageview], error) {
	return newCSV(w, pageviewHeader, pageviewRow)
}

// Write buffers one record's row.
func (c *CSVWriter[T]) Write(r T) error { return c.w.Write(c.row(r)) }

// Flush writes the buffered rows and reports any error so far.
func (c *CSVWriter[T]) Flush() error {
	c.w.Flush()
	return c.w.Error()
}

// cell defuses captured text that a spreadsheet would run as a formula: the
// values came from the network, so a leading =, +, -, @ or control character
// gets a quote in front (OWASP's CSV-injection advice).
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
