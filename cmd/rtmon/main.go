// Command rtmon measures the web response time clients perceive, from packets
// captured at the server side.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "rtmon:", err)
		var exit exitError
		if errors.As(err, &exit) {
			os.Exit(int(exit))
		}
		os.Exit(1)
	}
}

// exitError carries a specific exit status (2: the input was only partly read).
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func newRootCommand() *cobra.Command {
	var logLevel string
	root := &cobra.Command{
		Use:           "rtmon",
		Short:         "Passive monitor of client-perceived web response time",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
			return nil
		},
	}
	root.PersistentFlags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	root.AddCommand(newAnalyzeCommand(), newGenerateCommand(), newDemoCommand(), newLiveCommand(), newBenchCommand(), newWhatifCommand(), newServeCommand(), newRulesCommand(), newAnnotateCommand(), newCompareCommand(), newStitchCommand())
	return root
}
