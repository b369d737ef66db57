package export

import (
	"strconv"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

// PageviewWriter writes pageviews.FORMAT in a directory. It is a
// pageview.Sink that writes only the pageviews (put it in a pageview.Tee
// next to pageview.Records(recordWriter)); write errors are kept and
// returned by Close so the pipeline never stalls on them.
type PageviewWriter struct {
	t   *table[*pageview.Pageview]
	err error // the first write error, for Close
}

// NewPageviewWriter creates (truncating) dir/pageviews.FORMAT.
func NewPageviewWriter(dir string, format Format) (*PageviewWriter, error) {
	t, err := newTable(dir, "pageviews", format, PageviewCSV)
	if err != nil {
		return nil, err
	}
	return &PageviewWriter{t: t}, nil
}

func (*PageviewWriter) Connection(*reconstruct.Connection)   {}
func (*PageviewWriter) Transaction(*reconstruct.Transaction) {}

// Pageview writes one row.
func (w *PageviewWriter) Pageview(p *pageview.Pageview) {
	if w.err == nil {
		w.err = w.t.write(p)
	}
}

// Close flushes the file and reports the first error seen.
func (w *PageviewWriter) Close() error {
	return closeTables("pageviews", w.err, w.t.close)
}

var pageviewHeader = []string{"id", "interface", "client", "user_agent", "class", "priority", "server", "host", "url",
	"status", "container_id", "start", "end", "total_ns", "tconn_ns", "tserver_ns", "ttransfer_ns", "tother_ns",
	"objects", "connections", "bytes", "syn_losses", "synack_losses", "retrans_bytes", "flags",
	"after_load", "redirects", "evidence"}

func pageviewRow(p *pageview.Pageview) []string {
	i := strconv.FormatInt
	return []string{cell(p.ID), strconv.Itoa(p.Interface), p.Client.String(), cell(p.UserAgent), cell(p.Class),
		cell(p.Priority), p.Server.String(), cell(p.Host), cell(p.URL), strconv.Itoa(p.Status), cell(p.ContainerID),
		i(p.Start, 10), i(p.End, 10), i(p.Total, 10), i(p.Tconn, 10), i(p.Tserver, 10), i(p.Ttransfer, 10),
		i(p.Tother, 10), strconv.Itoa(p.Objects), strconv.Itoa(p.Connections), i(p.Bytes, 10),
		strconv.Itoa(p.SYNLosses), strconv.Itoa(p.SYNACKLosses), i(p.RetransBytes, 10), p.Flags.Join("|"),
		strconv.Itoa(p.AfterLoad), strconv.Itoa(p.Redirects), cell(p.Evidence)}
}
