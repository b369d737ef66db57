// Command testbed runs one of rtmon's testbed scenarios (network namespaces,
// an emulated link, nginx, Chromium and Go clients) and leaves the
// server-side capture and the clients' own timings in a directory:
//
//	go run ./cmd/testbed run --scenario baseline --out DIR [--hog]
//
// writes DIR/capture.pcap (the server side, rtmon's input),
// DIR/client.pcap (the client side), DIR/truth.json (every page load: what
// the client says belongs to it, its own timings, and the truth from the
// client's wire) and DIR/wire.json (every connection and transaction of the
// client capture). --hog runs the scenario beside a busy process pinned to
// one CPU. Needs root and the Debian packages listed in package testbed's
// documentation.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rtmon/rtmon/testbed"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "testbed:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || args[0] != "run" {
		return fmt.Errorf("usage: testbed run --scenario NAME --out DIR [--loads N] [--hog]\nscenarios: %s",
			strings.Join(testbed.ScenarioNames, ", "))
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	name := fs.String("scenario", "baseline", "scenario: "+strings.Join(testbed.ScenarioNames, ", "))
	out := fs.String("out", "", "output directory (capture.pcap, truth.json)")
	loads := fs.Int("loads", 0, "page loads per client session (0: the scenario's default)")
	hog := fs.Bool("hog", false, "run beside a CPU hog pinned to one CPU")
	timeout := fs.Duration("timeout", 5*time.Minute, "bound on the whole run")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("--out is required")
	}
	sc, err := testbed.NamedScenario(*name, *loads)
	if err != nil {
		return err
	}
	sc.CPUHog = *hog
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	// Teardown must run on Ctrl-C too: the signal cancels the run instead of
	// killing the process with namespaces still in place.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	work, err := os.MkdirTemp("", "rtmon-testbed-")
	if err != nil {
		return fmt.Errorf("work directory: %w", err)
	}
	defer os.RemoveAll(work)
	tb, err := testbed.Open(ctx, sc.Options(), work)
	if err != nil {
		return err
	}
	res, runErr := testbed.RunScenario(ctx, tb, sc)
	closeErr := tb.Close()
	if res.Capture != "" {
		if err := copyFile(res.Capture, filepath.Join(*out, "capture.pcap")); err != nil && runErr == nil {
			runErr = err
		}
		for src, dst := range map[string]string{
			res.ClientCapture: "client.pcap",
			filepath.Join(filepath.Dir(res.Capture), "truth.json"): "truth.json",
			filepath.Join(filepath.Dir(res.Capture), "wire.json"):  "wire.json",
		} {
			if err := copyFile(src, filepath.Join(*out, dst)); err != nil && runErr == nil {
				runErr = err
			}
		}
	}
	if runErr != nil {
		return runErr
	}
	if closeErr != nil {
		return fmt.Errorf("teardown: %w", closeErr)
	}
	valid := 0
	for _, p := range res.Truth {
		if p.Wire != nil && p.Wire.Valid {
			valid++
		}
	}
	fmt.Printf("%s: %d page loads (%d with wire truth), %d transactions on the client's wire (%d of no page), %d+%d packets captured (%d+%d dropped), bridge %+v, drops %d; wrote %s\n",
		sc.Name, len(res.Truth), valid, len(res.Wire.Txns()), len(res.Unattributed), res.Captured, res.ClientCaptured,
		res.Dropped, res.ClientDropped, res.Bridge, res.NFTDrops, *out)
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("copy to %s: %w", dst, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy to %s: %w", dst, err)
	}
	return out.Close()
}
