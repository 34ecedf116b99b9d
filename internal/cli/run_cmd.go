package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/telemetry"
)

func newRunCommand() *cobra.Command {
	var path string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := app.LoadConfig(cmd.ErrOrStderr(), path, append(app.DryRunOptions(dryRun), config.CheckFiles())...)
			if err != nil {
				return err
			}
			// The first SIGTERM or SIGINT stops gracefully, a second at once.
			ctx, stop := app.OnSignals(cmd.Context())
			defer stop()
			d, cleanup, err := app.Build(ctx, cfg, runOverrides(cmd, cfg))
			if err != nil {
				return app.RedactErr(cfg, err)
			}
			defer cleanup()
			d.WarnIdle = true
			return app.RedactErr(cfg, pathHint(cfg, path, d.Run(ctx)))
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "", "YAML configuration file (environment SF2LOKI_* overrides it)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "Print each entry as a JSON line on stdout instead of pushing it to Loki, and commit nothing (sink.stdout.enabled)")
	return cmd
}

// pathHint says what to do when run cannot use a file the configuration
// names (the state file's instance lock, the lease file): which key names
// it, and, without --config, that the defaults put it in /var/lib/sf2loki.
func pathHint(cfg *config.Config, configPath string, err error) error {
	var pe *fs.PathError
	if err == nil || !errors.As(err, &pe) {
		return err
	}
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) && !errors.Is(err, syscall.EROFS) && !errors.Is(err, syscall.ENOTDIR) {
		return err
	}
	var key, value string
	switch {
	case cfg.State.Store == config.StoreFile && cfg.State.File.Path != "" && strings.HasPrefix(pe.Path, cfg.State.File.Path):
		key, value = "state.file.path", cfg.State.File.Path
	case cfg.Coordinate.Type == config.CoordinateFileLease && cfg.Coordinate.FileLease.Path != "" &&
		strings.HasPrefix(pe.Path, cfg.Coordinate.FileLease.Path):
		key, value = "coordinate.file_lease.path", cfg.Coordinate.FileLease.Path
	default:
		return err
	}
	env := config.EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "__"))
	hint := fmt.Sprintf("%s is %s: its directory must exist and be writable by this user; set %s (or %s) to a file in such a directory",
		key, value, key, env)
	if configPath == "" {
		hint += ", or pass --config with a configuration file (sf2loki config example prints every key)"
	}
	return fmt.Errorf("%w; %s", err, hint)
}

func newCheckCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Validate the configuration and build the daemon without touching the network",
		Long: "check loads the configuration, validates it (every key's type, range and format) and builds the\n" +
			"object graph run builds (stores, lease keeper, committer, sources, sink, pipeline) without making a\n" +
			"request, taking a lock, creating a file or listening. It reads every file the configuration names\n" +
			"(the JWT private key, secret and token files, TLS files, a kubeconfig, a service-account key): a\n" +
			"missing, unreadable or empty file, or a key Salesforce cannot use, is a problem in the same list.\n" +
			"Relative paths are resolved against the configuration file's directory.\n" +
			"Exit 0 when valid, 2 with every problem when not.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := app.LoadConfig(cmd.ErrOrStderr(), path, config.CheckFiles())
			if err != nil {
				return err
			}
			// No push: check makes no request (service.telemetry would push the
			// metrics, with their credentials, when its meter provider stops).
			d, cleanup, err := app.Build(context.WithoutCancel(cmd.Context()), cfg, app.Overrides{Logger: app.RedactLogger(app.NewLogger(cmd.ErrOrStderr(), "error", "text"), cfg),
				Telemetry: telemetry.Options{NoPush: true}})
			if err != nil {
				return &app.ExitError{Code: app.ExitInvalidConfig, Err: app.RedactErr(cfg, err)}
			}
			cleanup()
			if w := app.NoSourceWarning(d); w != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			from := ""
			if path == "" {
				from = " (" + environmentSource() + ")"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "configuration is valid: coordinate.type %s, state.store %s%s\n", cfg.Coordinate.Type, cfg.State.Store, from)
			return err
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "", "YAML configuration file")
	return cmd
}

// runOverrides are run's: a dry run's entries go to the command's stdout,
// the logs to its stderr.
func runOverrides(cmd *cobra.Command, cfg *config.Config) app.Overrides {
	return app.Overrides{Stdout: cmd.OutOrStdout(),
		Logger: app.RedactLogger(app.NewLogger(cmd.ErrOrStderr(), cfg.Service.LogLevel, cfg.Service.LogFormat), cfg)}
}
