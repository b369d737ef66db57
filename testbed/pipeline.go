package testbed

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// Pipeline loads a page over one connection with HTTP/1.1 pipelining: it
// writes the container request, reads the container, then writes every
// object request back to back before reading the responses in order,
// timing each response's first and last byte with its own clock.
func (tb *Testbed) Pipeline(ctx context.Context, local netip.Addr, base, path string, page Page) (PageTruth, error) {
	pt := PageTruth{Source: BrowserPipeline, Client: local.String(), URL: path, NavURL: path, NavIssued: time.Now().UnixNano()}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	host := base[len("http://"):]
	connStart := time.Now().UnixNano()
	c, err := Dialer(tb, local).DialContext(ctx, "tcp4", net.JoinHostPort(host, "80"))
	if err != nil {
		return pt, fmt.Errorf("pipeline dial: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	connEnd := time.Now().UnixNano()
	port := c.LocalAddr().(*net.TCPAddr).Port
	fr := &firstByteReader{r: c}
	br := bufio.NewReaderSize(fr, 64<<10)
	roundTrip := func(paths []string) ([]ObjectTruth, error) {
		var buf []byte
		for _, p := range paths {
			buf = fmt.Appendf(buf, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: rtmon-testbed-pipeline/1\r\nReferer: %s\r\n\r\n", p, host, base+path)
		}
		reqStart := time.Now().UnixNano()
		if _, err := c.Write(buf); err != nil {
			return nil, fmt.Errorf("pipeline write: %w", err)
		}
		var out []ObjectTruth
		for _, p := range paths {
			o := ObjectTruth{URL: p, Method: "GET", Role: RoleObject, Reused: true, LocalPort: port, RequestStart: reqStart}
			// The first byte of a response is the first byte read after the
			// previous response ended (or the one already buffered).
			fr.mark(br.Buffered() > 0)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				return out, fmt.Errorf("pipeline response %s: %w", p, err)
			}
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			o.ResponseEnd = time.Now().UnixNano()
			o.ResponseFirst = fr.first()
			o.Status, o.Bytes = resp.StatusCode, n
			if err != nil || resp.StatusCode != http.StatusOK {
				return out, fmt.Errorf("pipeline %s: status %d, %v", p, resp.StatusCode, err)
			}
			out = append(out, o)
		}
		return out, nil
	}
	cont, err := roundTrip([]string{path})
	if err != nil {
		return pt, err
	}
	pt.Container = cont[0]
	pt.Container.Role = RoleContainer
	pt.Container.Reused, pt.Container.ConnectStart, pt.Container.ConnectEnd = false, connStart, connEnd
	var paths []string
	for _, o := range page.Objects {
		paths = append(paths, o.Path)
	}
	if pt.Objects, err = roundTrip(paths); err != nil {
		return pt, err
	}
	pt.Start = connStart
	pt.End = pt.Container.ResponseEnd
	for _, o := range pt.Objects {
		pt.End = max(pt.End, o.ResponseEnd)
	}
	pt.TotalNS = pt.End - pt.Start
	return pt, nil
}

// firstByteReader notes when the first read after mark returned data.
type firstByteReader struct {
	r       io.Reader
	waiting bool
	at      int64
}

func (f *firstByteReader) mark(buffered bool) {
	f.waiting = !buffered
	if buffered {
		f.at = time.Now().UnixNano()
	}
}

func (f *firstByteReader) first() int64 { return f.at }

func (f *firstByteReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if n > 0 && f.waiting {
		f.at = time.Now().UnixNano()
		f.waiting = false
	}
	return n, err
}
