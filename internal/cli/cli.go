package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/backfill"
	"github.com/sf2loki/sf2loki/internal/doctor"
)

// Execute runs the command tree on the process's arguments and returns
// the exit code. An error is printed to stderr after "sf2loki:", unless the
// command already printed why it failed.
func Execute() int {
	err := NewRootCommand().Execute()
	if err != nil && !errors.Is(err, app.ErrReported) {
		fmt.Fprintln(os.Stderr, "sf2loki:", err)
	}
	return app.ExitCode(err)
}

// NewRootCommand returns the sf2loki command tree.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "sf2loki",
		Short: "Ship Salesforce Event Monitoring data into Grafana Loki, highly available",
		Long: "sf2loki ships Salesforce Event Monitoring data into Grafana Loki.\n" +
			"It runs as an active-passive pair: one replica leads and ingests, standbys take over when it dies,\n" +
			"and checkpoints are fenced so that a stale leader can never move them.\n\n" +
			"Exit codes: 0 done, 1 a failure at run time, 2 a usage error or an invalid or missing configuration.",
		Version:       CurrentBuild().Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// sf2loki --version prints what sf2loki version prints.
	root.SetVersionTemplate("{{versionText}}")
	root.AddCommand(newVersionCommand(), newConfigCommand(), newRunCommand(), newCheckCommand(), doctor.NewCommand(), newStateCommand(), newHealthCommand(),
		backfill.NewCommand())
	usageErrors(root)
	return root
}

func init() {
	cobra.AddTemplateFunc("versionText", func() string {
		var b strings.Builder
		_ = CurrentBuild().write(&b)
		return b.String()
	})
}

// usageErrors makes every usage error of the tree an ExitError with
// ExitUsage that says where the usage is: an unknown flag or a flag's bad
// value, an unknown command (with cobra's suggestions) and a wrong number
// of arguments. A command that only groups others (state, config) prints
// its help when called alone and refuses an unknown subcommand.
func usageErrors(root *cobra.Command) {
	// Cobra adds these when the tree runs; added now, they are walked
	// (and --version is a flag of the tree for whoever inspects it).
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	root.InitDefaultVersionFlag()
	root.SetFlagErrorFunc(usageError)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		switch {
		case c.HasSubCommands() && c.Run == nil && c.RunE == nil:
			c.Args = unknownCommand
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
		case c.Args != nil:
			check := c.Args
			c.Args = func(c *cobra.Command, args []string) error {
				if err := check(c, args); err != nil {
					return usageError(c, err)
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// unknownCommand refuses any argument to a command that only groups
// others: the first is a command it does not have.
func unknownCommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	err := fmt.Errorf("unknown command %q for %q", args[0], c.CommandPath())
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's own default
	}
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		err = fmt.Errorf("%w (did you mean %s?)", err, strings.Join(s, " or "))
	}
	return usageError(c, err)
}

// usageError is err with ExitUsage and where to read the usage.
func usageError(c *cobra.Command, err error) error {
	return &app.ExitError{Code: app.ExitUsage, Err: fmt.Errorf("%w; run '%s --help' for the usage", err, c.CommandPath())}
}

// environmentSource says where a configuration loaded without a file came
// from, for check.
func environmentSource() string {
	env := app.EnvironmentConfiguration(os.Environ())
	return fmt.Sprintf("no configuration file: the defaults and %s: %s", app.Plural(int64(len(env)), "SF2LOKI_* variable"), strings.Join(env, ", "))
}
