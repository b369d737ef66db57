package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/web"
)

func newServeCommand() *cobra.Command {
	var storeURL, rollups string
	var ui uiOptions
	cmd := &cobra.Command{
		Use:   "serve --store URL",
		Short: "Serve the web UI (dashboards, search, waterfalls, exports, /metrics) over a store",
		Long: `serve opens a store (memory:, duckdb:PATH or clickhouse://host:9000/db) and
serves the read-only web UI, the JSON API, CSV/JSON/HAR/HTML/PDF exports,
Prometheus /metrics and /healthz.

It listens on 127.0.0.1 by default. Listening on any other address needs a
token (--token or $RTMON_TOKEN; send it as "Authorization: Bearer TOKEN" or
open the UI once with ?token=TOKEN) or basic auth (--basic-auth user:pass or
$RTMON_BASIC_AUTH).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, err := store.Open(ctx, storeURL, store.Options{Rollups: rollups})
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			defer st.Close()
			srv, err := ui.server(st, nil)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rtmon UI on %s (Ctrl-C to stop)\n", srv.URL())
			if !web.HasBundle() {
				fmt.Fprintln(cmd.OutOrStdout(), "note: this binary has no UI bundle; pages say so. Run `make ui` and rebuild for the full UI.")
			}
			return srv.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&storeURL, "store", "", "store URL: memory:, duckdb:PATH or clickhouse://host:9000/db")
	f.StringVar(&ui.classes, "classes", "", "classes file (YAML) whose objectives (slo:) /metrics exports, with a histogram bucket at each threshold")
	f.StringVar(&rollups, "rollups", "on", "read the overview of 1M+ records from per-minute rollups: on, off; see analyze --rollups")
	addUIFlags(f, &ui)
	_ = f.MarkHidden("no-ui")
	_ = cmd.MarkFlagRequired("store")
	return cmd
}
