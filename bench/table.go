package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Row is one tool's run on one input.
type Row struct {
	Tool      string
	Input     string // label of the input, e.g. "full" or "prefix 200MB"
	Packets   int64
	Bytes     int64
	Wall      time.Duration
	MaxRSSKiB int64
	// Ratio is this tool's wall time over rtmon's on the same input (how many
	// times faster rtmon is); 0 for rtmon itself or when there is no rtmon row.
	Ratio float64
	Note  string
}

// PacketsPerSec and MBPerSec are rates over the wall time.
func (r Row) PacketsPerSec() float64 { return perSec(float64(r.Packets), r.Wall) }
func (r Row) MBPerSec() float64      { return perSec(float64(r.Bytes)/1e6, r.Wall) }

func perSec(v float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return v / d.Seconds()
}

// FillRatios sets each row's Ratio against the rtmon row with the same Input.
func FillRatios(rows []Row, rtmonTool string) {
	base := map[string]time.Duration{}
	for _, r := range rows {
		if r.Tool == rtmonTool {
			base[r.Input] = r.Wall
		}
	}
	for i := range rows {
		b, ok := base[rows[i].Input]
		if rows[i].Tool == rtmonTool || !ok || b <= 0 {
			continue
		}
		rows[i].Ratio = rows[i].Wall.Seconds() / b.Seconds()
	}
}

// WriteTable prints rows aligned; the ratio column reads "rtmon is N x faster
// than this tool on this input".
func WriteTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tool\tinput\tpackets\tMB\tseconds\tpackets/s\tMB/s\tmax RSS MiB\ttool/rtmon time\t")
	for _, r := range rows {
		ratio := "-"
		if r.Ratio > 0 {
			ratio = fmt.Sprintf("%.1fx", r.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.2f\t%.0f\t%.1f\t%.1f\t%s\t  %s\n",
			r.Tool, r.Input, r.Packets, float64(r.Bytes)/1e6, r.Wall.Seconds(),
			r.PacketsPerSec(), r.MBPerSec(), float64(r.MaxRSSKiB)/1024, ratio, r.Note)
	}
	return tw.Flush()
}
