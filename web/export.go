package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rtmon/rtmon/export"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
)

// exportPage is how many rows one store query returns while exporting.
const exportPage = 10000

// eachMatch pages through every match of q (ignoring its page) up to limit
// rows, newest first. Pages are keyed by offset, so rows stored while the
// export runs may shift the pages; an export is a snapshot, not a cursor.
func eachMatch(ctx context.Context, st store.Store, q store.SearchQuery, limit int, fn func(store.SearchResult) error) error {
	q.Offset, q.Limit = 0, exportPage
	for q.Offset < limit {
		q.Limit = min(exportPage, limit-q.Offset)
		res, err := st.Search(ctx, q)
		if err != nil {
			return fmt.Errorf("export search at row %d: %w", q.Offset, err)
		}
		if err := fn(res); err != nil {
			return err
		}
		n := len(res.Transactions) + len(res.Pageviews)
		q.Offset += n
		if n < q.Limit || int64(q.Offset) >= res.Total {
			return nil
		}
	}
	return nil
}

func exportName(q store.SearchQuery, ext string) string {
	return fmt.Sprintf("rtmon-%s-%s.%s", q.Kind, time.Now().UTC().Format("20060102-150405"), ext)
}

func attachment(c *gin.Context, name, ctype string) {
	c.Header("Content-Disposition", `attachment; filename="`+name+`"`)
	c.Header("Content-Type", ctype)
	c.Header("Cache-Control", "no-store")
}

var txCSVHeader = []string{"id", "connection_id", "index", "interface", "start", "end", "client", "client_port", "server", "server_port",
	"method", "host", "url", "status", "content_type", "total_ms", "tconn_ms", "trequest_ms", "tserver_ms", "ttransfer_ms",
	"rtt_client_ms", "request_bytes", "response_bytes", "retrans_bytes", "referer", "user_agent", "flags"}

var pvCSVHeader = []string{"id", "interface", "start", "end", "client", "class", "server", "host", "url", "status",
	"total_ms", "tconn_ms", "tserver_ms", "ttransfer_ms", "tother_ms", "objects", "connections", "bytes",
	"syn_losses", "synack_losses", "retrans_bytes", "user_agent", "flags", "after_load", "redirects", "evidence"}

// ms formats ns as milliseconds with µs precision, exact decimal text.
func ms(ns int64) string { return strconv.FormatFloat(float64(ns)/1e6, 'f', 3, 64) }

func tstamp(ns int64) string {
	if ns == 0 {
		return ""
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

// cell defuses captured text a spreadsheet would run as a formula (a
// leading =, +, -, @ or control character gets a quote), as export does.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

func txCSV(t *reconstruct.Transaction) []string {
	i := strconv.Itoa
	return []string{t.ID, t.ConnectionID, i(t.Index), i(t.Interface), tstamp(t.Start), tstamp(t.End), t.Client.String(), i(int(t.ClientPort)),
		t.Server.String(), i(int(t.ServerPort)), cell(t.Method), cell(t.Host), cell(t.URL), i(t.Status), cell(t.ContentType),
		ms(t.Total), ms(t.Tconn), ms(t.Trequest), ms(t.Tserver), ms(t.Ttransfer), ms(t.RTTClient),
		strconv.FormatInt(t.RequestBytes, 10), strconv.FormatInt(t.ResponseBytes, 10), strconv.FormatInt(t.RetransBytes, 10),
		cell(t.Referer), cell(t.UserAgent), strings.Join(t.Flags.Names(), "|")}
}

func pvCSV(p *pageview.Pageview) []string {
	i := strconv.Itoa
	return []string{p.ID, i(p.Interface), tstamp(p.Start), tstamp(p.End), p.Client.String(), cell(p.Class), p.Server.String(),
		cell(p.Host), cell(p.URL), i(p.Status), ms(p.Total), ms(p.Tconn), ms(p.Tserver), ms(p.Ttransfer), ms(p.Tother),
		i(p.Objects), i(p.Connections), strconv.FormatInt(p.Bytes, 10), i(p.SYNLosses), i(p.SYNACKLosses),
		strconv.FormatInt(p.RetransBytes, 10), cell(p.UserAgent), strings.Join(p.Flags.Names(), "|"),
		i(p.AfterLoad), i(p.Redirects), cell(p.Evidence)}
}

func (s *Server) exportQuery(c *gin.Context) (store.SearchQuery, bool) {
	ctx := c.Request.Context()
	q, err := searchParams(c, func() (extent, error) { return dataExtent(ctx, s.cfg.Store) })
	if err != nil {
		bad(c, err)
		return q, false
	}
	// Check the filters before the first byte, so errors are real statuses.
	probe := q
	probe.Offset, probe.Limit = 0, 1
	if _, err := s.cfg.Store.Search(ctx, probe); err != nil {
		bad(c, fmt.Errorf("search: %w", err))
		return q, false
	}
	return q, true
}

func (s *Server) exportSearchCSV(c *gin.Context) {
	q, ok := s.exportQuery(c)
	if !ok {
		return
	}
	attachment(c, exportName(q, "csv"), "text/csv; charset=utf-8")
	w := csv.NewWriter(c.Writer)
	if q.Kind == store.Pageviews {
		_ = w.Write(pvCSVHeader)
	} else {
		_ = w.Write(txCSVHeader)
	}
	err := eachMatch(c.Request.Context(), s.cfg.Store, q, s.cfg.MaxExportRows, func(res store.SearchResult) error {
		for _, t := range res.Transactions {
			if err := w.Write(txCSV(t)); err != nil {
				return err
			}
		}
		for _, p := range res.Pageviews {
			if err := w.Write(pvCSV(p)); err != nil {
				return err
			}
		}
		w.Flush()
		return w.Error()
	})
	w.Flush()
	if err != nil {
		// The status is sent; a truncated file is all we can signal.
		s.cfg.Logger.Warn("csv export ended early", "err", err)
	}
}

func (s *Server) exportSearchJSON(c *gin.Context) {
	q, ok := s.exportQuery(c)
	if !ok {
		return
	}
	attachment(c, exportName(q, "json"), "application/json")
	bw := bufio.NewWriterSize(c.Writer, 64<<10)
	enc := json.NewEncoder(bw)
	first := true
	fmt.Fprintf(bw, "{\"kind\":%q,\"records\":[\n", q.Kind)
	item := func(v any) error {
		if !first {
			bw.WriteString(",")
		}
		first = false
		return enc.Encode(v)
	}
	err := eachMatch(c.Request.Context(), s.cfg.Store, q, s.cfg.MaxExportRows, func(res store.SearchResult) error {
		for _, t := range res.Transactions {
			if err := item(t); err != nil {
				return err
			}
		}
		for _, p := range res.Pageviews {
			if err := item(p); err != nil {
				return err
			}
		}
		return nil
	})
	bw.WriteString("]}\n")
	_ = bw.Flush()
	if err != nil {
		s.cfg.Logger.Warn("json export ended early", "err", err)
	}
}

func (s *Server) exportHAR(c *gin.Context) {
	id := strings.TrimSuffix(c.Param("id"), ".har")
	det, err := s.cfg.Store.PageviewByID(c.Request.Context(), id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			c.AbortWithStatusJSON(http.StatusNotFound, gin.H{"error": err.Error()})
			return
		}
		fail(c, err)
		return
	}
	conns := make(map[string]*reconstruct.Connection, len(det.Connections))
	for _, cn := range det.Connections {
		conns[cn.ID] = cn
	}
	var buf bytes.Buffer
	if err := export.WriteHAR(&buf, det.Pageview, det.Transactions, conns); err != nil {
		fail(c, fmt.Errorf("har: %w", err))
		return
	}
	attachment(c, "rtmon-pageview-"+safeName(id)+".har", "application/json")
	c.Data(http.StatusOK, "application/json", buf.Bytes())
}

// safeName keeps ids (which we make, but from URLs) tame in file names.
func safeName(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}
