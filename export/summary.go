package export

import (
	"fmt"
	"io"
	"math/bits"
	"sort"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

// Components names the response-time parts summarised, in report order:
// a transaction's parts, then their total.
var Components = append(TransactionParts(), "total")

// Distribution is a streaming summary of one duration, in nanoseconds.
type Distribution struct {
	sketch *ddsketch.DDSketch
	count  int64
}

func newDistribution() *Distribution {
	return &Distribution{sketch: pageview.NewSketch()}
}

// Add records one duration; negative values (clock oddities) count as zero.
func (d *Distribution) Add(ns int64) {
	if ns < 0 {
		ns = 0
	}
	d.count++
	// DDSketch cannot hold zero in its log buckets; it keeps a zero count.
	_ = d.sketch.Add(float64(ns))
}

// Count is the number of values added.
func (d *Distribution) Count() int64 { return d.count }

// Quantile returns the q-quantile in nanoseconds, 0 when empty.
func (d *Distribution) Quantile(q float64) int64 {
	if d.count == 0 {
		return 0
	}
	v, err := d.sketch.GetValueAtQuantile(q)
	if err != nil {
		return 0
	}
	return int64(v)
}

// Summary aggregates a run: counts, percentiles of each component, losses,
// and what went wrong with the input.
type Summary struct {
	Connections  int64
	Transactions int64
	SYNLosses    int64
	SYNACKLosses int64
	LossConns    int64 // connections with any SYN or SYN/ACK loss
	RetransBytes int64
	Incomplete   int64
	// flagCounts counts transactions per flag bit; names are made only
	// for the report (FlagCounts).
	flagCounts   [32]int64
	Components   map[string]*Distribution
	Packets      uint64
	Bytes        uint64
	Elapsed      time.Duration
	Tracker      reconstruct.Stats
	Malformed    map[string]uint64
	CaptureDrops map[string]uint64
	Errors       []string
}

// NewSummary returns an empty summary; it implements reconstruct.Sink.
func NewSummary() *Summary {
	s := &Summary{Components: map[string]*Distribution{}}
	for _, c := range Components {
		s.Components[c] = newDistribution()
	}
	return s
}

func (s *Summary) Connection(c *reconstruct.Connection) {
	s.Connections++
	s.SYNLosses += int64(c.SYNLosses)
	s.SYNACKLosses += int64(c.SYNACKLosses)
	if c.SYNLosses+c.SYNACKLosses > 0 {
		s.LossConns++
	}
	s.RetransBytes += c.RetransBytes
}

func (s *Summary) Transaction(t *reconstruct.Transaction) {
	s.Transactions++
	for f := t.Flags; f != 0; f &= f - 1 {
		s.flagCounts[bits.TrailingZeros32(uint32(f))]++
	}
	if t.Flags&(reconstruct.FlagIncomplete|reconstruct.FlagNoResponse|reconstruct.FlagNoRequest) != 0 {
		s.Incomplete++
		return // partial times would drag every percentile down
	}
	if t.Tconn > 0 || t.Index == 0 && t.Flags&(reconstruct.FlagMidStream|reconstruct.FlagPreconnected) == 0 {
		s.Components["tconn"].Add(t.Tconn)
	}
	if t.Ttls > 0 || t.Index == 0 && t.Flags&reconstruct.FlagTLS != 0 && t.Flags&(reconstruct.FlagMidStream|reconstruct.FlagPreconnected) == 0 {
		s.Components["ttls"].Add(t.Ttls) // fresh TLS connections only, as tconn counts fresh ones
	}
	s.Components["trequest"].Add(t.Trequest)
	s.Components["tserver"].Add(t.Tserver)
	s.Components["ttransfer"].Add(t.Ttransfer)
	s.Components["total"].Add(t.Total)
}

// FlagCounts maps each flag's name to the number of transactions that
// carry it (flags no transaction carries are absent).
func (s *Summary) FlagCounts() map[string]int64 {
	m := map[string]int64{}
	for i, n := range s.flagCounts {
		if name := reconstruct.Flags(1 << i).String(); n > 0 && name != "" {
			m[name] = n
		}
	}
	return m
}

func ms(ns int64) string { return fmt.Sprintf("%.3f", float64(ns)/1e6) }

// WriteText prints the summary for a terminal.
func (s *Summary) WriteText(w io.Writer) {
	fmt.Fprintf(w, "connections %d  transactions %d  (incomplete or unmatched %d)\n",
		s.Connections, s.Transactions, s.Incomplete)
	fmt.Fprintf(w, "SYN losses %d  SYN/ACK losses %d  (connections affected %d)  retransmitted bytes %d\n",
		s.SYNLosses, s.SYNACKLosses, s.LossConns, s.RetransBytes)
	fmt.Fprintf(w, "\n%-10s %8s %10s %10s %10s %10s\n", "component", "n", "p50 ms", "p90 ms", "p99 ms", "max ms")
	for _, c := range Components {
		d := s.Components[c]
		fmt.Fprintf(w, "%-10s %8d %10s %10s %10s %10s\n", c, d.Count(),
			ms(d.Quantile(0.5)), ms(d.Quantile(0.9)), ms(d.Quantile(0.99)), ms(d.Quantile(1)))
	}
	if counts := s.FlagCounts(); len(counts) > 0 {
		fmt.Fprintf(w, "\ntransaction flags:")
		for _, k := range sortedKeys(counts) {
			fmt.Fprintf(w, " %s=%d", k, counts[k])
		}
		fmt.Fprintln(w)
	}
	t := s.Tracker
	fmt.Fprintf(w, "tcp: packets %d  mid-stream %d  expired %d  evicted %d  retransmitted segments %d  out-of-order %d  holes %d (%d bytes)  parse desyncs %d  out-of-window %d  stray resets %d\n",
		t.Packets, t.MidStream, t.Expired, t.Evicted, t.RetransSegments, t.OutOfOrderSegments, t.Holes, t.HoleBytes, t.ParseDesyncs, t.OutOfWindow, t.StrayResets)
	if len(s.Malformed) > 0 {
		fmt.Fprintf(w, "skipped packets:")
		for _, k := range sortedKeys(s.Malformed) {
			fmt.Fprintf(w, " %s=%d", k, s.Malformed[k])
		}
		fmt.Fprintln(w)
	}
	if len(s.CaptureDrops) > 0 {
		fmt.Fprintf(w, "capture drops:")
		for _, k := range sortedKeys(s.CaptureDrops) {
			fmt.Fprintf(w, " %s=%d", k, s.CaptureDrops[k])
		}
		fmt.Fprintln(w)
	}
	if s.Elapsed > 0 {
		sec := s.Elapsed.Seconds()
		fmt.Fprintf(w, "read %d packets, %.1f MB in %.2fs: %.0f packets/s, %.1f MB/s\n",
			s.Packets, float64(s.Bytes)/1e6, sec, float64(s.Packets)/sec, float64(s.Bytes)/1e6/sec)
	}
	for _, e := range s.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
