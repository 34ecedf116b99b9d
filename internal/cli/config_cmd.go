package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sf2loki/sf2loki/internal/config"
)

func newConfigCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Print the configuration example, reference or JSON Schema, or the effective configuration; migrate an older one"}
	cmd.AddCommand(&cobra.Command{
		Use:   "example",
		Short: "Print an annotated YAML configuration with every key and its default",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), config.Example())
			return err
		},
	}, &cobra.Command{
		Use:   "reference",
		Short: "Print the Markdown reference of every configuration key",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), config.Reference())
			return err
		},
	}, newConfigSchemaCommand(), newConfigEffectiveCommand(), newConfigMigrateCommand())
	return cmd
}
