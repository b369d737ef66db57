package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rtmon/rtmon/compare"
	"github.com/rtmon/rtmon/store/query"
)

// The report's stylesheet is inlined (the file must stand alone); when the
// server itself shows the report, the CSP allows exactly this text by hash.
//
//go:embed templates/report.css
var reportCSS string

var reportStyleHash = func() string {
	sum := sha256.Sum256([]byte(reportCSS))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}()

// Palette shared with the UI (web/ui/src/app.js) so classes keep colours.
var palette = []string{"#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563"}

type reportData struct {
	Title     string
	Generated string
	From, To  string
	Class     string
	O         *Overview
	CSS       template.CSS
	Hist      template.HTML // SVG built from numbers only
	Series    template.HTML
	Legend    []legendItem
	Rows      []reportRow
	Breakdown []reportRow
	Counters  [][2]string
	Top       []reportTop
	// Compare: the comparison the report URL asked for (web/compare.go).
	Compare        []compareClass
	CompareA       string
	CompareB       string
	CompareSummary string
	// Partial: the cluster shards whose records the report lacks, said
	// on it ("" when complete; see partial.go).
	Partial string
}

type legendItem struct{ Class, Color string }

type reportRow struct {
	Class string
	Count int64
	Cells []string
}

type reportTop struct {
	Title string
	Rows  []query.TopRow
}

func fmtMS(ns int64) string {
	v := float64(ns) / 1e6
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.1f s", v/1000)
	case v >= 1000:
		return fmt.Sprintf("%.2f s", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	default:
		return fmt.Sprintf("%.1f ms", v)
	}
}

var reportFuncs = template.FuncMap{
	"ms":    fmtMS,
	"mulq":  func(q float64) float64 { return q * 100 },
	"comps": func(k query.Kind) []string { return breakdownComponents(k) },
}

// buildReport renders the overview of a range as one self-contained HTML
// document: inline CSS, SVG charts, no scripts, nothing fetched.
func (s *Server) buildReport(ctx context.Context, p overviewParams, cmp *compare.Report, cmpMissing []int) ([]byte, error) {
	o, err := s.overview(ctx, p)
	if err != nil {
		return nil, err
	}
	d := reportData{Title: s.cfg.Title, Generated: time.Now().UTC().Format(time.RFC3339), O: o, CSS: template.CSS(reportCSS),
		From: tstamp(o.Span[0]), To: tstamp(o.Span[1]), Class: p.class}
	if missing := unionShards(o.MissingShards, cmpMissing); len(missing) > 0 {
		d.Partial = partialText(missing)
	}
	if d.Class == "" {
		d.Class = "all classes"
	}
	if p.sensor != "" {
		d.Class += " · sensor " + p.sensor
	}
	color := map[string]string{}
	for i, h := range o.Histograms {
		color[h.Class] = palette[i%len(palette)]
		d.Legend = append(d.Legend, legendItem{h.Class, color[h.Class]})
	}
	for _, cp := range o.Percentiles {
		row := reportRow{Class: cp.Class, Count: cp.Count}
		for _, v := range cp.Values {
			row.Cells = append(row.Cells, fmtMS(v))
		}
		d.Rows = append(d.Rows, row)
	}
	comps := breakdownComponents(o.Kind)
	for _, b := range o.Breakdown {
		row := reportRow{Class: b.Class, Count: b.Count}
		for _, comp := range comps {
			row.Cells = append(row.Cells, fmtMS(b.Mean[comp]))
		}
		row.Cells = append(row.Cells, fmtMS(b.Mean["total"]))
		d.Breakdown = append(d.Breakdown, row)
	}
	k := o.Counters
	n := func(v int64) string { return fmt.Sprint(v) }
	d.Counters = [][2]string{{"Pageviews", n(k.Pageviews)}, {"Transactions", n(k.Transactions)}, {"Connections", n(k.Connections)},
		{"SYN losses", n(k.SYNLosses)}, {"SYN/ACK losses", n(k.SYNACKLosses)}, {"Time lost to SYN loss", fmtMS(k.SYNLossGap + k.SYNACKLossGap)},
		{"Connections with retransmissions", n(k.ConnsWithRetrans)}, {"Retransmitted bytes", n(k.ConnRetransBytes)},
		{"Server errors (5xx)", n(k.ServerErrors)}, {"Incomplete transactions", n(k.IncompleteTx)}}
	if o.Pipeline != nil {
		d.Counters = append(d.Counters, [2]string{"Capture drops", n(o.Pipeline.CaptureDrops)}, [2]string{"Evictions", n(o.Pipeline.Evictions)},
			[2]string{"Store back-log", n(o.Pipeline.StoreQueued)})
	}
	d.Top = []reportTop{{"Slowest URLs", o.Top["url"]}, {"Slowest servers", o.Top["server"]}, {"Slowest clients", o.Top["client"]}}
	d.Hist = histSVG(o.Histograms, color)
	d.Series = seriesSVG(o, color)
	if cmp != nil {
		d.Compare, d.CompareA, d.CompareB = reportCompareRows(cmp), compareSideText(cmp.A), compareSideText(cmp.B)
		d.CompareSummary = fmt.Sprintf("Mann-Whitney U at alpha %g; %.0f%% bootstrap intervals of B − A from %d resamples; at most %d records per class and side.",
			cmp.Alpha, 100*cmp.Confidence, cmp.Resamples, cmp.MaxPerClass)
	}
	var buf bytes.Buffer
	if err := reportTmpl.Execute(&buf, d); err != nil {
		return nil, fmt.Errorf("report template: %w", err)
	}
	return buf.Bytes(), nil
}

var reportTmpl = template.Must(template.New("report.html").Funcs(reportFuncs).ParseFS(templateFS, "templates/report.html"))

const svgW, svgH, padL, padR, padT, padB = 760.0, 240.0, 56.0, 12.0, 10.0, 34.0

// histSVG draws each class's share of records per log-spaced bucket as a
// step line, with decade grid lines (1 ms ... 100 s).
func histSVG(hs []query.ClassHistogram, color map[string]string) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img" aria-label="response time distribution">`, svgW, svgH, svgW, svgH)
	// The first bucket starts at 0; draw it one step left of 1 ms.
	first := float64(histEdges[1]) / 1.12
	lo, hi := math.Log10(first), math.Log10(float64(histEdges[len(histEdges)-1])*1.12)
	x := func(ns int64) float64 {
		return padL + (math.Log10(max(float64(ns), first))-lo)/(hi-lo)*(svgW-padL-padR)
	}
	maxShare := 0.0
	for _, h := range hs {
		for _, c := range h.Counts {
			if h.Total > 0 {
				maxShare = max(maxShare, float64(c)/float64(h.Total))
			}
		}
	}
	if maxShare == 0 {
		maxShare = 1
	}
	y := func(v float64) float64 { return svgH - padB - v/maxShare*(svgH-padT-padB) }
	for dec, label := range []string{"1 ms", "10 ms", "100 ms", "1 s", "10 s", "100 s"} {
		ns := int64(math.Pow(10, float64(dec))) * int64(time.Millisecond)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#d1d5db"/>`, x(ns), x(ns), padT, svgH-padB)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" font-size="11" text-anchor="middle" fill="#374151">%s</text>`, x(ns), svgH-padB+16, label)
	}
	for _, ns := range []int64{int64(3 * time.Second)} {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#fca5a5" stroke-dasharray="3 3"/>`, x(ns), x(ns), padT, svgH-padB)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" font-size="10" text-anchor="middle" fill="#b91c1c">3 s</text>`, x(ns), padT+10)
	}
	fmt.Fprintf(&b, `<text x="12" y="%.0f" font-size="11" fill="#374151" transform="rotate(-90 12 %.0f)">share of records</text>`, svgH/2, svgH/2)
	for _, h := range hs {
		if h.Total == 0 {
			continue
		}
		var pts []string
		for i, c := range h.Counts {
			x0 := x(h.Edges[i])
			x1 := x(h.Edges[len(h.Edges)-1] * 2)
			if i+1 < len(h.Edges) {
				x1 = x(h.Edges[i+1])
			}
			x1 = min(x1, svgW-padR)
			v := y(float64(c) / float64(h.Total))
			pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x0, v, x1, v))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke-width="1.6" stroke="%s" points="%s"/>`, color[h.Class], strings.Join(pts, " "))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// seriesSVG draws p50 (thin) and p90 (thick) per class over time.
func seriesSVG(o *Overview, color map[string]string) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img" aria-label="percentiles over time">`, svgW, svgH, svgW, svgH)
	from, to := float64(o.Span[0]), float64(o.Span[1])
	var top int64 = 1
	for _, p := range o.Series {
		if len(p.Values) > 1 {
			top = max(top, p.Values[1])
		}
	}
	x := func(t int64) float64 { return padL + (float64(t)-from)/math.Max(to-from, 1)*(svgW-padL-padR) }
	y := func(v int64) float64 { return svgH - padB - float64(v)/float64(top)*(svgH-padT-padB) }
	for i := 0; i <= 4; i++ {
		v := top * int64(i) / 4
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#e5e7eb"/>`, padL, svgW-padR, y(v), y(v))
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" font-size="10" text-anchor="end" fill="#374151">%s</text>`, padL-4, y(v)+3, template.HTMLEscapeString(fmtMS(v)))
	}
	for i := 0; i <= 4; i++ {
		t := o.Span[0] + (o.Span[1]-o.Span[0])*int64(i)/4
		anchor := map[int]string{0: "start", 4: "end"}[i]
		if anchor == "" {
			anchor = "middle"
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" font-size="10" text-anchor="%s" fill="#374151">%s</text>`, x(t), svgH-padB+16,
			anchor, time.Unix(0, t).UTC().Format("01-02 15:04:05"))
	}
	byClass := map[string][]query.SeriesPoint{}
	var order []string
	for _, p := range o.Series {
		if _, ok := byClass[p.Class]; !ok {
			order = append(order, p.Class)
		}
		byClass[p.Class] = append(byClass[p.Class], p)
	}
	for _, cl := range order {
		for qi, width := range []string{"1", "2.2"} {
			var pts []string
			for _, p := range byClass[cl] {
				if len(p.Values) > qi {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.T+o.SeriesStep/2), y(p.Values[qi])))
				}
			}
			col := color[cl]
			if col == "" {
				col = "#4b5563"
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke-width="%s" stroke="%s" points="%s"/>`, width, col, strings.Join(pts, " "))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func (s *Server) exportReportHTML(c *gin.Context) {
	p, err := overviewParamsFrom(c)
	if err != nil {
		bad(c, err)
		return
	}
	cmp, cmpMissing, err := s.reportCompare(c)
	if err != nil {
		bad(c, err)
		return
	}
	doc, err := s.buildReport(c.Request.Context(), p, cmp, cmpMissing)
	if err != nil {
		bad(c, err)
		return
	}
	// The report's own policy: its one inline stylesheet, nothing else.
	c.Header("Content-Security-Policy", "default-src 'none'; style-src "+reportStyleHash+"; img-src data:; base-uri 'none'; frame-ancestors 'none'; form-action 'none'")
	if c.Query("inline") == "" {
		attachment(c, "rtmon-report-"+time.Now().UTC().Format("20060102-150405")+".html", "text/html; charset=utf-8")
	}
	c.Data(http.StatusOK, "text/html; charset=utf-8", doc)
}

func (s *Server) exportReportPDF(c *gin.Context) {
	p, err := overviewParamsFrom(c)
	if err != nil {
		bad(c, err)
		return
	}
	if c.Request.Method == http.MethodHead {
		// Printing costs a browser start; HEAD only learns that it exists.
		c.Header("Content-Type", "application/pdf")
		c.Status(http.StatusOK)
		return
	}
	cmp, cmpMissing, err := s.reportCompare(c)
	if err != nil {
		bad(c, err)
		return
	}
	doc, err := s.buildReport(c.Request.Context(), p, cmp, cmpMissing)
	if err != nil {
		bad(c, err)
		return
	}
	// One Chromium at a time: printing is heavy and the UI is for a few people.
	select {
	case pdfSlot <- struct{}{}:
		defer func() { <-pdfSlot }()
	case <-c.Request.Context().Done():
		return
	}
	pdf, err := PrintPDF(c.Request.Context(), s.chromium(), doc)
	if err != nil {
		fail(c, err)
		return
	}
	attachment(c, "rtmon-report-"+time.Now().UTC().Format("20060102-150405")+".pdf", "application/pdf")
	c.Data(http.StatusOK, "application/pdf", pdf)
}

var pdfSlot = make(chan struct{}, 1)

func (s *Server) chromium() string {
	if s.cfg.Chromium != "" {
		return s.cfg.Chromium
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	return "/usr/bin/chromium"
}

// PrintPDF prints an HTML document with headless Chromium, in a fresh
// profile that is removed afterwards, with networking features off.
func PrintPDF(ctx context.Context, chromium string, html []byte) ([]byte, error) {
	dir, err := os.MkdirTemp("", "rtmon-pdf-")
	if err != nil {
		return nil, fmt.Errorf("pdf: %w", err)
	}
	defer os.RemoveAll(dir)
	in := filepath.Join(dir, "report.html")
	out := filepath.Join(dir, "report.pdf")
	if err := os.WriteFile(in, html, 0o600); err != nil {
		return nil, fmt.Errorf("pdf: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--no-pdf-header-footer", "--user-data-dir="+filepath.Join(dir, "profile"), "--print-to-pdf="+out, "file://"+in)
	// Chromium forks helpers; kill the whole group if we give up on it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("pdf: %s: %w: %s", chromium, err, lastLines(stderr.String(), 5))
	}
	pdf, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("pdf: chromium wrote no PDF: %w: %s", err, lastLines(stderr.String(), 5))
	}
	if !bytes.HasPrefix(pdf, []byte("%PDF")) {
		return nil, errors.New("pdf: chromium's output is not a PDF")
	}
	return pdf, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// tstamp is a time as RFC 3339 in UTC, for people ("" for none).
func tstamp(ns int64) string {
	if ns == 0 {
		return ""
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}
