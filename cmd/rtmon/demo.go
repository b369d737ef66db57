package main

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// demoCapture is a small synthetic capture bundled in the binary, so the demo
// needs nothing but rtmon itself. Regenerate it with `go generate ./cmd/rtmon`.
//
//go:generate go run . generate --out demo.pcap.gz --gzip --clients 12 --duration 20s --syn-loss 0.05 --synack-loss 0.02 --data-loss 0.01 --seed 7
//go:embed demo.pcap.gz
var demoCapture []byte

func newDemoCommand() *cobra.Command {
	var keep string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Analyze the bundled demo capture and print the summary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := keep
			if dir == "" {
				tmp, err := os.MkdirTemp("", "rtmon-demo-")
				if err != nil {
					return fmt.Errorf("demo: %w", err)
				}
				defer os.RemoveAll(tmp)
				dir = tmp
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("demo: %w", err)
			}
			path := filepath.Join(dir, "demo.pcap.gz")
			if err := os.WriteFile(path, demoCapture, 0o644); err != nil {
				return fmt.Errorf("demo: write capture: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rtmon demo: analyzing the bundled capture (%d KB: 12 simulated browsers, 160/220/300 ms RTT, some SYN and data loss)\n\n", len(demoCapture)/1024)
			o := analyzeOptions{format: "jsonl", maxConns: 1 << 20, idle: defaultIdle, reader: "pcapgo"}
			if keep != "" {
				o.out = keep
			}
			return runAnalyze(cmd.Context(), cmd.OutOrStdout(), []string{path}, o)
		},
	}
	cmd.Flags().StringVar(&keep, "out", "", "keep the capture and write records to this directory")
	return cmd
}
