package main

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/rtmon/rtmon/pipeline"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/web"
)

// demoCapture is a small synthetic capture bundled in the binary, so the demo
// needs nothing but rtmon itself. Regenerate it with `go generate ./cmd/rtmon`.
//
//go:generate go run . generate --out demo.pcap.gz --gzip --clients 12 --duration 20s --syn-loss 0.05 --synack-loss 0.02 --data-loss 0.01 --seed 7
//go:embed demo.pcap.gz
var demoCapture []byte

func newDemoCommand() *cobra.Command {
	var keep string
	var ui uiOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Analyze the bundled capture into the embedded store and serve the web UI",
		Long: `demo analyzes a small synthetic capture bundled in the binary (12 simulated
browsers on 160/220/300 ms links, with some SYN, SYN/ACK and data loss) into an
in-memory embedded store, prints the summary and serves the web UI over it
until Ctrl-C (--no-ui: summary only).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
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
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "rtmon demo: analyzing the bundled capture (%d KB) into the embedded store\n\n", len(demoCapture)/1024)
			st, err := store.Open(ctx, "memory:", store.Options{Sensor: "demo"})
			if err != nil {
				return fmt.Errorf("demo: %w", err)
			}
			defer st.Close()
			cfg := pipeline.DefaultConfig()
			cfg.Files, cfg.OutDir, cfg.Store = []string{path}, keep, st
			if err := runPipeline(ctx, out, cfg, false); err != nil {
				return err
			}
			if ui.disabled {
				return nil
			}
			srv, err := ui.server(st, nil)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "\nrtmon UI on %s (Ctrl-C to stop)\n", srv.URL())
			if !web.HasBundle() {
				fmt.Fprintln(out, "note: this binary has no UI bundle; run `make ui` and rebuild for the full UI.")
			}
			return srv.Run(ctx)
		},
	}
	cmd.Flags().StringVar(&keep, "out", "", "keep the capture and write records to this directory")
	addUIFlags(cmd.Flags(), &ui)
	return cmd
}
