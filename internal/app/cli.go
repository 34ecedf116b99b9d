package app

import (
	"github.com/spf13/cobra"
)

// NewRootCommand returns the sf2loki command tree.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "sf2loki",
		Short: "Ship Salesforce Event Monitoring data into Grafana Loki, highly available",
		Long: "sf2loki ships Salesforce Event Monitoring data into Grafana Loki.\n" +
			"It runs as an active-passive pair: one replica leads and ingests, standbys take over when it dies,\n" +
			"and checkpoints are fenced so that a stale leader can never move them.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCommand(), newConfigCommand(), newRunCommand(), newCheckCommand(), newDoctorCommand(), newStateCommand(), newHealthCommand(),
		newBackfillCommand())
	return root
}
