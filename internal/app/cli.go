package app

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
)

// Exit codes of every command: 0 done, 1 a failure at run time (a
// backend, Salesforce or Loki refused or could not be reached; doctor
// found a FAIL), 2 the command line or the configuration is wrong (an
// unknown command or flag, a missing or extra argument, an invalid or
// missing configuration): running it again unchanged cannot succeed.
const (
	ExitFailure = 1
	ExitUsage   = 2
)

// ExitInvalidConfig is the exit code for a configuration that does not
// load or validate: the usage error's.
const ExitInvalidConfig = ExitUsage

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
	root.AddCommand(newVersionCommand(), newConfigCommand(), newRunCommand(), newCheckCommand(), newDoctorCommand(), newStateCommand(), newHealthCommand(),
		newBackfillCommand())
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
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%w; run '%s --help' for the usage", err, c.CommandPath())}
}

// NoConfigError is a command that needs a configuration run with none: no
// --config and no SF2LOKI_* variable. The defaults alone enable no source
// and keep state in /var/lib/sf2loki, which is never what was meant.
type NoConfigError struct{}

func (*NoConfigError) Error() string {
	return "no configuration: neither --config nor any SF2LOKI_* configuration variable is given, and the defaults alone " +
		"enable no source (and keep state in /var/lib/sf2loki). Pass --config FILE with your configuration " +
		"(sf2loki config example > sf2loki.yaml writes one to edit), or set its keys as SF2LOKI_* variables " +
		"(SF2LOKI_SALESFORCE__CLIENT_ID=…; sf2loki config reference lists every key)"
}

// Unwrap returns domain.ErrInvalidConfig.
func (*NoConfigError) Unwrap() error { return domain.ErrInvalidConfig }

// requireConfiguration returns a *NoConfigError when there is no
// configuration file and the environment sets no key.
func requireConfiguration(path string) error {
	if path != "" || len(environmentConfiguration(os.Environ())) > 0 {
		return nil
	}
	return &NoConfigError{}
}

// environmentConfiguration lists the names of the SF2LOKI_* variables the
// configuration reads, as config.Load tells them: names with __ and names
// of a top-level key. Others, such as SF2LOKI_SERVICE_HOST that Kubernetes
// sets for a Service named sf2loki, configure nothing.
func environmentConfiguration(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		rest, ok := strings.CutPrefix(name, config.EnvPrefix)
		if !ok || rest == "" {
			continue
		}
		if strings.Contains(rest, "__") || slices.Contains(topLevelKeys(), strings.ToLower(rest)) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// topLevelKeys are the configuration's top-level keys.
func topLevelKeys() []string {
	t := reflect.TypeFor[config.Config]()
	keys := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		if k, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); k != "" && k != "-" {
			keys = append(keys, k)
		}
	}
	return keys
}

// environmentSource says where a configuration loaded without a file came
// from, for check.
func environmentSource() string {
	env := environmentConfiguration(os.Environ())
	return fmt.Sprintf("no configuration file: the defaults and %s: %s", plural(int64(len(env)), "SF2LOKI_* variable"), strings.Join(env, ", "))
}
