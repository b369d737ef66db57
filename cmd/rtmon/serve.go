package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/web"
)

func newServeCommand() *cobra.Command {
	var storeURL, listen, token, basic string
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
			if token == "" {
				token = os.Getenv("RTMON_TOKEN")
			}
			if basic == "" {
				basic = os.Getenv("RTMON_BASIC_AUTH")
			}
			ctx := cmd.Context()
			st, err := store.Open(ctx, storeURL, store.Options{})
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			defer st.Close()
			srv, err := web.NewServer(web.Config{Store: st, Listen: listen, Token: token, BasicAuth: basic})
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
	f.StringVar(&listen, "listen", web.DefaultListen, "address to listen on (non-loopback needs --token or --basic-auth)")
	f.StringVar(&token, "token", "", "bearer token required from clients (default $RTMON_TOKEN)")
	f.StringVar(&basic, "basic-auth", "", "user:password required from clients (default $RTMON_BASIC_AUTH)")
	_ = cmd.MarkFlagRequired("store")
	return cmd
}
