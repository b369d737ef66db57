package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/rtmon/rtmon/bench"
)

// defaultHTTPSSize is --size with --https: recording real TLS sessions and
// decrypting make the HTTPS bench slower per byte than the cleartext one.
const defaultHTTPSSize = "200MB"

// rtmonKeyLog is the decrypting rtmon's tool name; the HTTPS ratios divide
// by its times, as it and tshark do the same work.
const rtmonKeyLog = "rtmon --keylog"

// benchGenerateHTTPS writes the HTTPS capture, its key log and then its
// sidecar, in a child process like benchGenerate.
func benchGenerateHTTPS(o benchOptions) error {
	p, err := o.params()
	if err != nil {
		return err
	}
	path := o.capturePath(p)
	tmp := path + ".partial"
	defer os.Remove(tmp) // no-ops after the renames
	defer os.Remove(bench.KeyLogPath(tmp))
	fmt.Fprintf(os.Stderr, "generating %s: recording %d TLS sessions...\n", path, p.Sessions)
	sum, err := bench.GenerateHTTPSFile(tmp, p)
	if err != nil {
		return fmt.Errorf("generating %s: %w", path, err)
	}
	if err := os.Rename(bench.KeyLogPath(tmp), bench.KeyLogPath(path)); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	fmt.Fprintf(os.Stderr, "generated %s and %s: %d packets, %.1f MB, %d TLS sessions replayed as %d connections, %d transactions in %s\n",
		path, bench.KeyLogPath(path), sum.Packets, float64(sum.Bytes)/1e6, sum.Sessions, sum.Connections, sum.Transactions,
		sum.Elapsed.Round(time.Millisecond))
	return bench.WriteSidecar(path, bench.Sidecar{Params: p, Packets: sum.Packets, Bytes: sum.Bytes})
}

// runHTTPSTools times rtmon keyless and decrypting on every input and
// tshark decrypting with the same key log; tcpdump and tcptrace see only
// TCP, so they add nothing to the cleartext bench's figures.
func (r *benchRunner) runHTTPSTools(inputs []*benchInput, full, tsharkIn *benchInput) error {
	keyLog := bench.KeyLogPath(full.path)
	for _, in := range inputs {
		if err := r.run("rtmon", in, []string{r.self, "analyze", "--progress=false", in.path}, rtmonNote); err != nil {
			return err
		}
		if err := r.run(rtmonKeyLog, in, []string{r.self, "analyze", "--progress=false", "--keylog", keyLog, in.path}, rtmonNote); err != nil {
			return err
		}
	}
	for _, tool := range r.o.tools {
		if tool != "tshark" {
			r.notes = append(r.notes, fmt.Sprintf("%s: not run with --https (TCP only, nothing TLS-specific)", tool))
			continue
		}
		if _, err := exec.LookPath(tool); err != nil {
			r.notes = append(r.notes, "tshark not installed: skipped")
			continue
		}
		err := r.run("tshark", tsharkIn, []string{"tshark", "-r", tsharkIn.path, "-n", "-o", "tls.keylog_file:" + keyLog,
			"-Y", "http.response", "-T", "fields", "-e", "http.time"},
			func(m bench.Measurement) string { return fmt.Sprintf("%d http.response lines", m.Lines) })
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *benchRunner) reportHTTPS() error {
	bench.FillRatios(r.rows, rtmonKeyLog)
	return r.writeReport("rtmon --keylog's", summarizeHTTPS)
}

// summarizeHTTPS gives rtmon's HTTPS rates and its speed against tshark,
// both decrypting.
func summarizeHTTPS(w io.Writer, rows []bench.Row) {
	for _, r := range rows {
		switch {
		case strings.HasPrefix(r.Tool, "rtmon") && strings.HasPrefix(r.Input, "full"):
			mode := "keyless"
			if r.Tool == rtmonKeyLog {
				mode = "decrypting"
			}
			fmt.Fprintf(w, "rtmon HTTPS %s on %s: %.2f M packets/s, %.0f MB/s\n", mode, r.Input, r.PacketsPerSec()/1e6, r.MBPerSec())
		case r.Tool == "tshark" && r.Ratio > 0:
			fmt.Fprintf(w, "rtmon vs tshark, both decrypting, on %s: %.1fx faster\n", r.Input, r.Ratio)
		}
	}
}
