package testbed

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// CurlResult is one transfer as curl measured it (`-w %{json}`). curl's
// timers restart for every URL of an invocation: each Time* runs from the
// start of that transfer. On a reused connection TimeConnect is 0 and
// TimePretransfer is tiny, so TimeStarttransfer is request sent -> first
// response byte received.
type CurlResult struct {
	URL          string `json:"url"` // as given on the command line
	URLEffective string `json:"url_effective"`
	URLNum       int    `json:"urlnum"` // 0-based position in the invocation
	ExitCode     int    `json:"exitcode"`
	ErrorMsg     string `json:"errormsg"`
	HTTPCode     int    `json:"http_code"`
	HTTPVersion  string `json:"http_version"` // "1.1", "2"
	LocalIP      string `json:"local_ip"`
	LocalPort    int    `json:"local_port"`
	RemoteIP     string `json:"remote_ip"`
	RemotePort   int    `json:"remote_port"`
	NumConnects  int    `json:"num_connects"` // 1 on a fresh connection, 0 on reuse
	SizeDownload int64  `json:"size_download"`
	SizeHeader   int64  `json:"size_header"`
	SizeRequest  int64  `json:"size_request"`

	// Seconds, as curl prints them (microsecond resolution).
	TimeNamelookup    float64 `json:"time_namelookup"`
	TimeConnect       float64 `json:"time_connect"`
	TimeAppconnect    float64 `json:"time_appconnect"` // TLS handshake done (0 without TLS, or reused)
	TimePretransfer   float64 `json:"time_pretransfer"`
	TimeStarttransfer float64 `json:"time_starttransfer"`
	TimeTotal         float64 `json:"time_total"`
}

// Seconds converts one of curl's second values to a Duration.
func Seconds(s float64) time.Duration {
	return time.Duration(math.Round(s * 1e9))
}

// Connect, Appconnect, Pretransfer, Starttransfer and Total are the Time*
// fields as Durations.
func (r CurlResult) Connect() time.Duration       { return Seconds(r.TimeConnect) }
func (r CurlResult) Appconnect() time.Duration    { return Seconds(r.TimeAppconnect) }
func (r CurlResult) Pretransfer() time.Duration   { return Seconds(r.TimePretransfer) }
func (r CurlResult) Starttransfer() time.Duration { return Seconds(r.TimeStarttransfer) }
func (r CurlResult) Total() time.Duration         { return Seconds(r.TimeTotal) }

// CurlOptions configure one curl invocation.
type CurlOptions struct {
	// URLs are fetched in order by one curl process, so they share one
	// keep-alive connection when the server allows it.
	URLs []string
	// MaxTime bounds the whole invocation (curl --max-time). Default 10 s.
	MaxTime time.Duration
	// Args are extra curl arguments placed before the URLs.
	Args []string
	// NoRealtime runs curl with normal scheduling. By default curl runs
	// under SCHED_FIFO (chrt) so that its timestamps follow the network,
	// not the machine's load: with busy CPUs (CI runs packages in parallel)
	// curl is otherwise scheduled late by milliseconds, noticing a finished
	// handshake or a first byte long after the kernel had it. That delay is
	// the test machine's, invisible on the wire to any passive monitor.
	NoRealtime bool
	// CAFile verifies an HTTPS server (curl --cacert).
	CAFile string
	// Env is extra environment for curl ("SSLKEYLOGFILE=path": curl
	// writes its TLS secrets there).
	Env []string
}

// curlRTPriority is the SCHED_FIFO priority for curl: above normal tasks,
// well below kernel threads that use real-time priorities.
const curlRTPriority = "10"

// Curl runs Debian's curl in the client namespace over HTTP/1.1 (Args
// "--http2" overrides it: curl's last version flag wins), discarding
// bodies, and returns curl's own timings for each URL. A failed transfer is
// returned in its result (ExitCode, ErrorMsg) and as an error.
func (tb *Testbed) Curl(ctx context.Context, opts CurlOptions) ([]CurlResult, error) {
	if len(opts.URLs) == 0 {
		return nil, fmt.Errorf("curl: no URLs")
	}
	if opts.MaxTime == 0 {
		opts.MaxTime = 10 * time.Second
	}
	args := []string{"--http1.1", "-sS", "--max-time", strconv.FormatFloat(opts.MaxTime.Seconds(), 'f', 3, 64),
		"-w", "%{json}\\n"}
	if opts.CAFile != "" {
		args = append(args, "--cacert", opts.CAFile)
	}
	args = append(args, opts.Args...)
	for _, u := range opts.URLs {
		args = append(args, "-o", "/dev/null", u)
	}
	// The process bound is slightly above curl's own so curl reports first.
	ctx, cancel := context.WithTimeout(ctx, opts.MaxTime+5*time.Second)
	defer cancel()
	curlPath, err := toolPath("curl")
	if err != nil {
		return nil, err
	}
	name := "curl"
	if !opts.NoRealtime {
		name = "chrt"
		args = append([]string{"--fifo", curlRTPriority, curlPath}, args...)
	}
	if len(opts.Env) > 0 {
		// env(1) sets it: ip netns exec passes its own environment on.
		namePath, err := toolPath(name)
		if err != nil {
			return nil, err
		}
		args = append(append(slices.Clip(opts.Env), namePath), args...)
		name = "env"
	}
	out, runErr := tb.execLong(ctx, tb.Client.NS, name, args...)
	var res []CurlResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var r CurlResult
		if err := json.Unmarshal(line, &r); err != nil {
			return res, fmt.Errorf("curl -w json: %w: %q", err, line)
		}
		res = append(res, r)
	}
	if runErr != nil {
		return res, fmt.Errorf("curl: %w", runErr)
	}
	if len(res) != len(opts.URLs) {
		return res, fmt.Errorf("curl: %d results for %d URLs", len(res), len(opts.URLs))
	}
	for _, r := range res {
		if r.ExitCode != 0 {
			return res, fmt.Errorf("curl %s: exit %d: %s", r.URL, r.ExitCode, r.ErrorMsg)
		}
	}
	return res, nil
}
