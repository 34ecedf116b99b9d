package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/config"
)

func newConfigMigrateCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Rewrite a configuration in the older implementation's layout into sf2loki's, with a report",
		Long: "migrate reads a configuration file written for the older implementation and prints it in sf2loki's\n" +
			"layout on stdout, comments kept: renamed keys under their new names, enabled flags applied, event\n" +
			"types written as objects split into names, sample and types. The report on stderr lists every\n" +
			"key renamed, converted or dropped (with why) and the older defaults the file relies on that differ\n" +
			"here. ${VAR} references are kept as they are. Run sf2loki check on the result. Exit 2 when a key\n" +
			"cannot be carried over (the report says why).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return &app.ExitError{Code: app.ExitInvalidConfig, Err: errors.New("config migrate needs --config FILE, the older configuration")}
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return &app.ExitError{Code: app.ExitInvalidConfig, Err: fmt.Errorf("%s: cannot read: %w", path, err)}
			}
			m, err := config.Migrate(data)
			if err != nil {
				return &app.ExitError{Code: app.ExitInvalidConfig, Err: fmt.Errorf("%s: %w", path, err)}
			}
			writeMigrationReport(cmd.ErrOrStderr(), path, m)
			if len(m.Problems) > 0 {
				return &app.ExitError{Code: app.ExitInvalidConfig, Err: &config.Error{Source: path, Problems: m.Problems}}
			}
			_, err = cmd.OutOrStdout().Write(m.YAML)
			return err
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "", "the older configuration file")
	return cmd
}

// writeMigrationReport prints the notes grouped by kind.
func writeMigrationReport(w io.Writer, path string, m *config.Migration) {
	groups := []struct{ kind, title string }{
		{config.NoteRenamed, "renamed"},
		{config.NoteConverted, "converted"},
		{config.NoteDropped, "dropped"},
		{config.NoteDiffers, "defaults and behaviour that differ"},
	}
	fmt.Fprintf(w, "# migration report for %s: %d change(s), %d refused\n", path, len(m.Notes), len(m.Problems))
	for _, g := range groups {
		first := true
		for _, n := range m.Notes {
			if n.Kind != g.kind {
				continue
			}
			if first {
				fmt.Fprintf(w, "%s:\n", g.title)
				first = false
			}
			fmt.Fprintf(w, "  %s\n", n)
		}
	}
	if len(m.Problems) > 0 {
		fmt.Fprintln(w, "refused (fix these in the older file, then run migrate again):")
		for _, p := range m.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
}
