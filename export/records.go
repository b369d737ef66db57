package export

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rtmon/rtmon/reconstruct"
)

// Format is a record file format.
type Format string

const (
	JSONL Format = "jsonl"
	CSV   Format = "csv"
)

// ParseFormat validates a --format value.
func ParseFormat(s string) (Format, error) {
	switch Format(strings.ToLower(s)) {
	case JSONL, "json", "ndjson":
		return JSONL, nil
	case CSV:
		return CSV, nil
	}
	return "", fmt.Errorf("unknown format %q (want jsonl or csv)", s)
}

// table writes one kind of record to one file, as JSON Lines or CSV.
type table[T any] struct {
	f   *os.File
	buf *bufio.Writer
	enc *json.Encoder
	csv *CSVWriter[T]
}

// newTable creates (truncating) dir/name.FORMAT, and dir if need be.
func newTable[T any](dir, name string, format Format, newCSV func(io.Writer) (*CSVWriter[T], error)) (*table[T], error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	path := filepath.Join(dir, name+"."+string(format))
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	t := &table[T]{f: f, buf: bufio.NewWriterSize(f, 256<<10)}
	if format == CSV {
		if t.csv, err = newCSV(t.buf); err != nil {
			f.Close()
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
	} else {
		t.enc = json.NewEncoder(t.buf)
		t.enc.SetEscapeHTML(false)
	}
	return t, nil
}

func (t *table[T]) write(v T) error {
	if t.csv != nil {
		return t.csv.Write(v)
	}
	return t.enc.Encode(v)
}

func (t *table[T]) close() error {
	if t.csv != nil {
		if err := t.csv.Flush(); err != nil {
			t.f.Close()
			return err
		}
	}
	if err := t.buf.Flush(); err != nil {
		t.f.Close()
		return err
	}
	return t.f.Close()
}

// RecordWriter writes connections.FORMAT and transactions.FORMAT in a
// directory. It implements reconstruct.Sink; write errors are kept and
// returned by Close so the pipeline never stalls on them.
type RecordWriter struct {
	conns *table[*reconstruct.Connection]
	txs   *table[*reconstruct.Transaction]
	err   error
}

// NewRecordWriter creates (truncating) the record files in dir.
func NewRecordWriter(dir string, format Format) (*RecordWriter, error) {
	conns, err := newTable(dir, "connections", format, ConnectionCSV)
	if err != nil {
		return nil, err
	}
	txs, err := newTable(dir, "transactions", format, TransactionCSV)
	if err != nil {
		conns.close()
		return nil, err
	}
	return &RecordWriter{conns: conns, txs: txs}, nil
}

func (w *RecordWriter) Connection(c *reconstruct.Connection) {
	if w.err == nil {
		w.err = w.conns.write(c)
	}
}

func (w *RecordWriter) Transaction(t *reconstruct.Transaction) {
	if w.err == nil {
		w.err = w.txs.write(t)
	}
}

// Close flushes both files and reports the first error seen.
func (w *RecordWriter) Close() error {
	return closeTables("records", w.err, w.conns.close, w.txs.close)
}

// closeTables runs each table's close and reports the first of err (the
// first write error) and their errors.
func closeTables(what string, err error, closes ...func() error) error {
	for _, closeTable := range closes {
		if cerr := closeTable(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	return nil
}

var connectionHeader = []string{"id", "interface", "client", "client_port", "server", "server_port",
	"first_seen", "last_seen", "established", "closed", "syn_count", "synack_count", "syn_losses",
	"synack_losses", "syn_loss_gap_ns", "synack_loss_gap_ns", "rtt_client_ns", "rtt_server_ns",
	"tconn_ns", "bytes_client", "bytes_server", "retrans_bytes", "transactions", "class", "flags",
	"tls_version", "sni", "alpn", "ttls_ns"}

func connectionRow(c *reconstruct.Connection) []string {
	i := strconv.FormatInt
	return []string{c.ID, strconv.Itoa(c.Interface), c.Client.String(), strconv.Itoa(int(c.ClientPort)),
		c.Server.String(), strconv.Itoa(int(c.ServerPort)), i(c.FirstSeen, 10), i(c.LastSeen, 10),
		i(c.Established, 10), i(c.Closed, 10), strconv.Itoa(len(c.SYNTimes)), strconv.Itoa(len(c.SYNACKTimes)),
		strconv.Itoa(c.SYNLosses), strconv.Itoa(c.SYNACKLosses), i(c.SYNLossGap, 10), i(c.SYNACKLossGap, 10),
		i(c.RTTClient, 10), i(c.RTTServer, 10), i(c.Tconn, 10), i(c.BytesClient, 10), i(c.BytesServer, 10),
		i(c.RetransBytes, 10), strconv.Itoa(c.Transactions), cell(c.Class), c.Flags.Join("|"),
		strconv.Itoa(int(c.TLSVersion)), cell(c.SNI), cell(c.ALPN), i(c.Ttls, 10)}
}

var transactionHeader = []string{"id", "connection_id", "index", "interface", "client", "client_port",
	"server", "server_port", "start", "end", "request_first", "request_last", "response_first",
	"response_last", "response_acked", "tconn_ns", "trequest_ns", "tserver_ns", "ttransfer_ns",
	"total_ns", "rtt_client_ns", "retrans_bytes", "request_bytes", "response_bytes", "body_bytes",
	"method", "host", "url", "status", "content_type", "referer", "user_agent", "hole_bytes",
	"pageview_id", "class", "flags", "request_acked", "ttls_ns"}

func transactionRow(t *reconstruct.Transaction) []string {
	i := strconv.FormatInt
	return []string{t.ID, t.ConnectionID, strconv.Itoa(t.Index), strconv.Itoa(t.Interface),
		t.Client.String(), strconv.Itoa(int(t.ClientPort)), t.Server.String(), strconv.Itoa(int(t.ServerPort)),
		i(t.Start, 10), i(t.End, 10), i(t.RequestFirst, 10), i(t.RequestLast, 10), i(t.ResponseFirst, 10),
		i(t.ResponseLast, 10), i(t.ResponseAcked, 10), i(t.Tconn, 10), i(t.Trequest, 10), i(t.Tserver, 10),
		i(t.Ttransfer, 10), i(t.Total, 10), i(t.RTTClient, 10), i(t.RetransBytes, 10), i(t.RequestBytes, 10),
		i(t.ResponseBytes, 10), i(t.BodyBytes, 10), cell(t.Method), cell(t.Host), cell(t.URL), strconv.Itoa(t.Status),
		cell(t.ContentType), cell(t.Referer), cell(t.UserAgent), i(t.HoleBytes, 10),
		t.PageviewID, cell(t.Class), t.Flags.Join("|"), i(t.RequestAcked, 10), i(t.Ttls, 10)}
}

var _ io.Closer = (*RecordWriter)(nil)
