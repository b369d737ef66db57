package pageview

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"

	"github.com/rtmon/rtmon/reconstruct"
)

// Tee fans the pageview stage's output out to several sinks.
type Tee []Sink

// Connection implements Sink.
func (t Tee) Connection(c *reconstruct.Connection) {
	for _, s := range t {
		s.Connection(c)
	}
}

// Transaction implements Sink.
func (t Tee) Transaction(x *reconstruct.Transaction) {
	for _, s := range t {
		s.Transaction(x)
	}
}

// Pageview implements Sink.
func (t Tee) Pageview(p *Pageview) {
	for _, s := range t {
		s.Pageview(p)
	}
}

// Records adapts a record-only sink (such as export.RecordWriter) to Sink;
// pageviews are ignored.
func Records(s reconstruct.Sink) Sink { return records{s} }

type records struct{ reconstruct.Sink }

func (records) Pageview(*Pageview) {}

// ClassSummary accumulates per-class counts and pageview response-time
// percentiles. It is a Sink: put it in a Tee after the Grouper. Class names come from the configuration, so the table is small.
type ClassSummary struct {
	classes map[string]*classAcc
}

type classAcc struct {
	priority     string
	pageviews    uint64
	transactions uint64
	standAlone   uint64
	connections  uint64
	totals       *ddsketch.DDSketch
}

// ClassRow is one class's line of the summary.
type ClassRow struct {
	Class        string        `json:"class"`
	Priority     string        `json:"priority,omitempty"`
	Pageviews    uint64        `json:"pageviews"`
	Transactions uint64        `json:"transactions"`
	StandAlone   uint64        `json:"stand_alone"` // transactions in no pageview
	Connections  uint64        `json:"connections"`
	P50          time.Duration `json:"p50_ns"` // pageview Total percentiles
	P90          time.Duration `json:"p90_ns"`
	P99          time.Duration `json:"p99_ns"`
}

// NewClassSummary returns an empty summary.
func NewClassSummary() *ClassSummary { return &ClassSummary{classes: map[string]*classAcc{}} }

func (s *ClassSummary) acc(name string) *classAcc {
	a := s.classes[name]
	if a == nil {
		a = &classAcc{totals: NewSketch()}
		s.classes[name] = a
	}
	return a
}

// Connection implements Sink.
func (s *ClassSummary) Connection(c *reconstruct.Connection) { s.acc(c.Class).connections++ }

// Transaction implements Sink.
func (s *ClassSummary) Transaction(t *reconstruct.Transaction) {
	a := s.acc(t.Class)
	a.priority = t.Priority
	a.transactions++
	if t.PageviewID == "" {
		a.standAlone++
	}
}

// Pageview implements Sink.
func (s *ClassSummary) Pageview(p *Pageview) {
	a := s.acc(p.Class)
	a.priority = p.Priority
	a.pageviews++
	// Add only fails on negative values; a pageview total is End - Start >= 0.
	_ = a.totals.Add(float64(max(p.Total, 0)))
}

// Rows returns one row per class, by name.
func (s *ClassSummary) Rows() []ClassRow {
	rows := make([]ClassRow, 0, len(s.classes))
	for name, a := range s.classes {
		r := ClassRow{Class: name, Priority: a.priority, Pageviews: a.pageviews, Transactions: a.transactions,
			StandAlone: a.standAlone, Connections: a.connections}
		if a.pageviews > 0 {
			q, err := a.totals.GetValuesAtQuantiles([]float64{0.5, 0.9, 0.99})
			if err == nil {
				r.P50, r.P90, r.P99 = time.Duration(q[0]), time.Duration(q[1]), time.Duration(q[2])
			}
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b ClassRow) int { return strings.Compare(a.Class, b.Class) })
	return rows
}

// WriteText writes the summary as an aligned table.
func (s *ClassSummary) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "class\tpriority\tpageviews\ttransactions\tstand-alone\tconnections\tp50\tp90\tp99\t")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/1e6) }
	for _, r := range s.Rows() {
		name := r.Class
		if name == "" {
			name = "(unclassified)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t\n", name, r.Priority, r.Pageviews, r.Transactions,
			r.StandAlone, r.Connections, ms(r.P50), ms(r.P90), ms(r.P99))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write class summary: %w", err)
	}
	return nil
}
