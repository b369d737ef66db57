package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rtmon/rtmon/synth"
)

type generateOptions struct {
	out      string
	size     string
	duration time.Duration
	clients  int
	servers  int
	seed     int64
	synLoss  float64
	ackLoss  float64
	dataLoss float64
	pcapng   bool
	gzip     bool // compress the output
}

func newGenerateCommand() *cobra.Command {
	var o generateOptions
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Write a synthetic capture of browsers loading pages (for demos, tests and benchmarks)",
		Long: `generate writes a pcap of simulated browsers loading pages (an HTML container,
then embedded objects over parallel keep-alive connections) from clients with
160/220/300 ms round trips, with optional SYN, SYN/ACK and data loss. It is
deterministic for a seed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGenerate(cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.out, "out", "o", "", "output file (required)")
	f.StringVar(&o.size, "size", "", "stop starting pageviews at about this file size, e.g. 1GB, 200MB")
	f.DurationVar(&o.duration, "duration", 0, "capture span (default 60s unless --size is given)")
	f.IntVar(&o.clients, "clients", 10, "distinct client addresses")
	f.IntVar(&o.servers, "servers", 1, "distinct server addresses")
	f.Int64Var(&o.seed, "seed", 1, "random seed")
	f.Float64Var(&o.synLoss, "syn-loss", 0, "fraction of SYNs the server drops")
	f.Float64Var(&o.ackLoss, "synack-loss", 0, "fraction of SYN/ACKs lost on the way to the client")
	f.Float64Var(&o.dataLoss, "data-loss", 0, "fraction of response segments lost after the capture point")
	f.BoolVar(&o.pcapng, "pcapng", false, "write pcapng instead of pcap")
	f.BoolVar(&o.gzip, "gzip", false, "gzip the output")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

// parseSize reads sizes like 1GB, 512MB, 1.5G or a plain byte count.
func parseSize(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	u := strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(s), "B"), "b"))
	mult := 1.0
	switch {
	case strings.HasSuffix(u, "K"):
		mult, u = 1e3, strings.TrimSuffix(u, "K")
	case strings.HasSuffix(u, "M"):
		mult, u = 1e6, strings.TrimSuffix(u, "M")
	case strings.HasSuffix(u, "G"):
		mult, u = 1e9, strings.TrimSuffix(u, "G")
	}
	var v float64
	if _, err := fmt.Sscanf(u, "%g", &v); err != nil || v < 0 {
		return 0, fmt.Errorf("size %q: want a number with an optional K, M or G suffix", s)
	}
	return int64(v * mult), nil
}

func (o generateOptions) workload() (synth.Workload, error) {
	size, err := parseSize(o.size)
	if err != nil {
		return synth.Workload{}, fmt.Errorf("--size: %w", err)
	}
	return synth.Workload{
		Seed: o.seed, Clients: o.clients, Servers: o.servers, Duration: o.duration, TargetBytes: size,
		SYNLossRate: o.synLoss, SYNACKLossRate: o.ackLoss, DataLossRate: o.dataLoss,
	}, nil
}

func runGenerate(stdout io.Writer, o generateOptions) error {
	wl, err := o.workload()
	if err != nil {
		return err
	}
	opts := synth.Options{Nanosecond: true, Gzip: o.gzip}
	if o.pcapng {
		opts.Format = synth.PCAPNG
	}
	sum, err := synth.GenerateFile(o.out, opts, wl)
	if err != nil {
		return fmt.Errorf("generate %s: %w", o.out, err)
	}
	fmt.Fprintf(stdout, "wrote %s: %d packets, %.1f MB, %d pageviews, %d transactions, %d connections in %s\n",
		o.out, sum.Packets, float64(sum.Bytes)/1e6, sum.Pageviews, sum.Transactions, sum.Connections, sum.Elapsed.Round(time.Millisecond))
	return nil
}
