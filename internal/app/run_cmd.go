package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
)

// ExitInvalidConfig is the exit code for a configuration that does not
// load or validate.
const ExitInvalidConfig = 2

// ExitError carries a process exit code.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// loadConfig loads and validates, printing warnings; an invalid
// configuration is an ExitError with code 2.
func loadConfig(cmd *cobra.Command, path string) (*config.Config, error) {
	cfg, warnings, err := config.Load(path)
	if err != nil {
		code := 1
		if errors.Is(err, domain.ErrInvalidConfig) {
			code = ExitInvalidConfig
		}
		return nil, &ExitError{Code: code, Err: err}
	}
	for _, w := range warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
	}
	return cfg, nil
}

func newRunCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd, path)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			go func() {
				<-ctx.Done()
				stop()
				// A second signal forces the exit.
				force := make(chan os.Signal, 1)
				signal.Notify(force, syscall.SIGTERM, os.Interrupt)
				<-force
				fmt.Fprintln(os.Stderr, "sf2loki: second signal, exiting without a graceful stop")
				os.Exit(1)
			}()
			d, cleanup, err := Build(ctx, cfg, Overrides{})
			if err != nil {
				return err
			}
			defer cleanup()
			return d.Run(ctx)
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "", "YAML configuration file (environment SF2LOKI_* overrides it)")
	return cmd
}

func newCheckCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Validate the configuration and build the daemon without touching the network",
		Long: "check loads the configuration, validates it and builds the whole object graph (stores, lease keeper,\n" +
			"committer) without making a request. Exit 0 when valid, 2 with every problem when not.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd, path)
			if err != nil {
				return err
			}
			_, cleanup, err := Build(context.WithoutCancel(cmd.Context()), cfg, Overrides{Logger: NewLogger(cmd.ErrOrStderr(), "error", "text")})
			if err != nil {
				return &ExitError{Code: ExitInvalidConfig, Err: err}
			}
			cleanup()
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "configuration is valid: coordinate.type %s, state.store %s\n", cfg.Coordinate.Type, cfg.State.Store)
			return err
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "", "YAML configuration file")
	return cmd
}
