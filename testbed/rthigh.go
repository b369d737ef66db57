package testbed

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rtmon/rtmon/web"
)

// RTHighDrive makes the low class's SYN drop conditional, as an RLM
// appliance applying "IF CLASS == low AND RT_HIGH > Above THEN DROP SYN"
// would: rtmon live runs beside the server on its interface, and a driver
// reads its live stream and switches the drop on while the lower median of
// the high class's pageviews completed in the last Window is above Above.
type RTHighDrive struct {
	Rtmon   string // the rtmon binary
	Classes string // the classes file rtmon live is given
	Above   time.Duration
	Window  time.Duration // 0: 30 s, as the what-if's windows
}

// rtHighPort is rtmon live's UI port, on the server namespace's loopback.
const rtHighPort = 18080

// RTHighStats is what the driver did in one run.
type RTHighStats struct {
	Switches int           // times the drop was switched on or off
	On       time.Duration // how long it was on (capture time)
	Events   int           // live events read
}

// rtHighDriver runs one RTHighDrive against one nft table.
type rtHighDriver struct {
	tb   *Testbed
	spec RTHighDrive
	// apply switches the drop (the nft set's element).
	apply  func(ctx context.Context, on bool) error
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	stats   RTHighStats
	on      bool
	onSince int64
	last    int64
	err     error
}

// startRTHighDriver starts rtmon live in the server's namespace and the
// driver reading it. The drop rule matches only while the set rthigh of
// table holds the server's address.
func startRTHighDriver(ctx context.Context, tb *Testbed, table *NFTable, spec RTHighDrive) (*rtHighDriver, error) {
	if spec.Window == 0 {
		spec.Window = 30 * time.Second
	}
	_, err := tb.Start(tb.Server.NS, spec.Rtmon, "live", "-i", tb.Server.Iface, "--filter", "tcp port 80",
		"--classes", spec.Classes, "--listen", "127.0.0.1:"+strconv.Itoa(rtHighPort), "--idle-timeout", "10m")
	if err != nil {
		return nil, fmt.Errorf("rtmon live: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	d := &rtHighDriver{tb: tb, spec: spec, cancel: cancel, done: make(chan struct{})}
	d.apply = func(ctx context.Context, on bool) error {
		verb := "delete"
		if on {
			verb = "add"
		}
		_, err := tb.Exec(ctx, tb.Server.NS, "nft", verb, "element", "inet", table.Name, "rthigh", "{ "+tb.Server.Addr.String()+" }")
		return err
	}
	body, err := d.connect(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	go func() {
		defer close(d.done)
		defer body.Close()
		d.read(ctx, bufio.NewReaderSize(body, 1<<20))
	}()
	return d, nil
}

// connect opens rtmon live's event stream, waiting for its UI to listen.
// The socket is made inside the server's namespace, where the loopback
// address is rtmon's.
func (d *rtHighDriver) connect(ctx context.Context) (io.ReadCloser, error) {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := inNS(d.tb.Server.NS, func() error {
			var err error
			c, err = (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	client := &http.Client{Transport: &http.Transport{DialContext: dial}}
	url := "http://127.0.0.1:" + strconv.Itoa(rtHighPort) + "/api/live"
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err == nil && resp.StatusCode == http.StatusOK {
			return resp.Body, nil
		}
		if err == nil {
			resp.Body.Close()
			err = errors.New(resp.Status)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("rtmon live's stream at %s: %w", url, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// completed is a high-class pageview as the window holds it.
type completed struct{ at, total int64 }

// read follows the live events until the stream ends or ctx is done.
func (d *rtHighDriver) read(ctx context.Context, r *bufio.Reader) {
	var window []completed
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if ctx.Err() == nil {
				d.fail(fmt.Errorf("rtmon live's stream: %w", err))
			}
			return
		}
		js, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: ")
		if !ok {
			continue
		}
		var ev web.LiveEvent
		if err := json.Unmarshal([]byte(js), &ev); err != nil {
			d.fail(fmt.Errorf("rtmon live event: %w", err))
			return
		}
		for _, c := range ev.Classes {
			if c.Class != ValidateHighClass {
				continue
			}
			for _, p := range c.Points {
				if p.Kind == "pageview" {
					window = append(window, completed{p.T + p.Total, p.Total})
				}
			}
		}
		window = slices.DeleteFunc(window, func(c completed) bool { return c.at < ev.Time-int64(d.spec.Window) })
		if err := d.decide(ctx, ev.Time, window); err != nil {
			d.fail(err)
			return
		}
	}
}

// decide switches the drop to what the window says at capture time now:
// on while its lower median is above the threshold, off with no evidence.
func (d *rtHighDriver) decide(ctx context.Context, now int64, window []completed) error {
	on := false
	if len(window) > 0 {
		v := make([]int64, len(window))
		for i, c := range window {
			v[i] = c.total
		}
		slices.Sort(v)
		on = v[(len(v)-1)/2] > int64(d.spec.Above)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats.Events++
	if now > 0 {
		d.last = now
	}
	if on == d.on {
		return nil
	}
	if err := d.apply(ctx, on); err != nil {
		return fmt.Errorf("switch the SYN drop %s: %w", map[bool]string{true: "on", false: "off"}[on], err)
	}
	if on {
		d.onSince = now
	} else if d.onSince > 0 {
		d.stats.On += time.Duration(now - d.onSince)
	}
	d.on = on
	d.stats.Switches++
	return nil
}

func (d *rtHighDriver) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == nil {
		d.err = err
	}
}

// stop ends the driver and reports what it did.
func (d *rtHighDriver) stop() (RTHighStats, error) {
	d.cancel()
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.on && d.onSince > 0 {
		d.stats.On += time.Duration(d.last - d.onSince)
	}
	return d.stats, d.err
}
