package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Measurement is one child process run.
type Measurement struct {
	Wall      time.Duration
	User, Sys time.Duration
	MaxRSSKiB int64 // ru_maxrss, KiB on Linux
	FloorKiB  int64 // the helper's peak RSS: MaxRSSKiB is at least this
	Lines     int64 // stdout lines (tshark: one per HTTP response)
	Stdout    []byte
}

// Command describes a child to run and measure.
type Command struct {
	Argv []string
	Env  []string // added to the environment
	// Pin runs the child through `taskset -c CPUs`; empty means unpinned.
	// taskset execs the tool in place, so the rusage is the tool's own.
	Pin string
	// KeepStdout keeps stdout (capped) instead of only counting its lines.
	KeepStdout bool
	// Via is a helper command line (e.g. "rtmon bench --measure") that runs
	// "-- argv" and reports its rusage on fd 3; see Run.
	Via []string
	// GNUTime, the path of GNU time, takes precedence over Via: it forks the
	// tool from a ~1 MiB process, so its readings have the lowest floor.
	GNUTime string
}

// Run starts c, waits for it and returns its wall time and rusage.
//
// A child's ru_maxrss on Linux starts at the peak RSS of the address space it
// exec'ed from, and Go starts children with CLONE_VM, i.e. from this
// process's address space: measured directly, every tool would report at
// least this process's peak. With GNUTime or Via set, c runs under a small
// wrapper whose rusage report is used instead (see RunMeasured); FloorKiB
// then bounds the wrapper's contribution (for GNU time, measure it by
// running "true").
func Run(ctx context.Context, c Command) (Measurement, error) {
	argv := c.Argv
	if c.Pin != "" {
		argv = append([]string{"taskset", "-c", c.Pin}, argv...)
	}
	wrapped := c.GNUTime != "" || len(c.Via) > 0
	switch {
	case c.GNUTime != "":
		argv = append([]string{c.GNUTime, "-f", "%e %M %U %S", "-o", "/dev/fd/3", "--"}, argv...)
	case len(c.Via) > 0:
		argv = append(append(append([]string(nil), c.Via...), "--"), argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), c.Env...)
	var errBuf bytes.Buffer
	cmd.Stderr = &capWriter{buf: &errBuf, max: 8 << 10}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return Measurement{}, fmt.Errorf("%s: %w", argv[0], err)
	}
	var report *os.File
	if wrapped {
		r, w, err := os.Pipe()
		if err != nil {
			return Measurement{}, fmt.Errorf("rusage pipe: %w", err)
		}
		defer r.Close()
		cmd.ExtraFiles = []*os.File{w} // fd 3 in the helper
		report = r
		defer w.Close()
	}
	var m Measurement
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return m, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	if len(cmd.ExtraFiles) > 0 {
		cmd.ExtraFiles[0].Close() // the helper holds it now; EOF when it exits
	}
	var kept bytes.Buffer
	var sink io.Writer = io.Discard
	if c.KeepStdout {
		sink = &capWriter{buf: &kept, max: 1 << 20}
	}
	m.Lines, err = countLines(io.TeeReader(out, sink))
	var rep []byte
	if report != nil {
		rep, _ = io.ReadAll(report)
	}
	werr := cmd.Wait()
	m.Wall = time.Since(start)
	m.Stdout = kept.Bytes()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		m.MaxRSSKiB = ru.Maxrss
		m.User = time.Duration(ru.Utime.Nano())
		m.Sys = time.Duration(ru.Stime.Nano())
	}
	if err != nil {
		return m, fmt.Errorf("reading %s output: %w", argv[0], err)
	}
	if werr != nil {
		return m, fmt.Errorf("%v: %w: %s", argv, werr, bytes.TrimSpace(errBuf.Bytes()))
	}
	switch {
	case c.GNUTime != "":
		// Wall time stays the parent's: GNU time rounds to 10 ms.
		var wall, user, sys float64
		if _, err := fmt.Sscanf(string(rep), "%g %d %g %g", &wall, &m.MaxRSSKiB, &user, &sys); err != nil {
			return m, fmt.Errorf("%v: time report %q: %w", argv, rep, err)
		}
		m.User, m.Sys = time.Duration(user*1e9), time.Duration(sys*1e9)
	case report != nil:
		var r helperReport
		if err := json.Unmarshal(rep, &r); err != nil {
			return m, fmt.Errorf("%v: helper report %q: %w", argv, rep, err)
		}
		m.Wall, m.MaxRSSKiB, m.FloorKiB = r.Wall, r.MaxRSSKiB, r.FloorKiB
		m.User, m.Sys = r.User, r.Sys
	}
	return m, nil
}

type helperReport struct {
	Wall      time.Duration `json:"wall"`
	User      time.Duration `json:"user"`
	Sys       time.Duration `json:"sys"`
	MaxRSSKiB int64         `json:"max_rss_kib"`
	FloorKiB  int64         `json:"floor_kib"`
}

// RunMeasured is the helper's side: it runs argv with the helper's stdin,
// stdout and stderr, and writes the child's wall time and rusage as JSON to
// report (fd 3). The child's exit status is returned as an error.
func RunMeasured(argv []string, report io.Writer) error {
	if len(argv) == 0 {
		return fmt.Errorf("nothing to run")
	}
	floor := selfHWMKiB()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := time.Now()
	err := cmd.Run()
	r := helperReport{Wall: time.Since(start), FloorKiB: floor}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.MaxRSSKiB = ru.Maxrss
			r.User = time.Duration(ru.Utime.Nano())
			r.Sys = time.Duration(ru.Stime.Nano())
		}
	}
	if err != nil {
		return fmt.Errorf("%v: %w", argv, err)
	}
	b, _ := json.Marshal(r)
	if _, err := report.Write(b); err != nil {
		return fmt.Errorf("writing rusage report: %w", err)
	}
	return nil
}

// selfHWMKiB is this process's own peak RSS (VmHWM), which unlike ru_maxrss
// does not include the parent's.
func selfHWMKiB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

func countLines(r io.Reader) (int64, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var n int64
	buf := make([]byte, 1<<16)
	for {
		k, err := br.Read(buf)
		n += int64(bytes.Count(buf[:k], []byte{'\n'}))
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// capWriter keeps the first max bytes and drops the rest, so a chatty child
// cannot grow the parent (whose peak RSS later children inherit, see
// SelfMaxRSSKiB).
type capWriter struct {
	buf *bytes.Buffer
	max int
}

func (w *capWriter) Write(p []byte) (int, error) {
	if room := w.max - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// SelfMaxRSSKiB is this process's ru_maxrss (see Run for why it matters to
// children's readings).
func SelfMaxRSSKiB() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss
}
