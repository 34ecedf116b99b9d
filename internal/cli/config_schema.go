package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sf2loki/sf2loki/internal/config"
)

func newConfigSchemaCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema (draft 2020-12) of the configuration file, for editors and CI",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), config.JSONSchema())
			return err
		},
	}
}
