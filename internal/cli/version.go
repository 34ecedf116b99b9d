package cli

import (
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/sf2loki/sf2loki/internal/buildinfo"
)

// BuildInfo describes the running binary.
type BuildInfo struct {
	Version   string
	Commit    string
	GoVersion string
}

// CurrentBuild returns the version, the commit (from -ldflags, else from the
// Go build's VCS stamp, else "unknown") and the Go version.
// The build stamps them into internal/buildinfo.
func CurrentBuild() BuildInfo {
	return BuildInfo{Version: buildinfo.Version(), Commit: buildinfo.Commit(), GoVersion: runtime.Version()}
}

func (b BuildInfo) write(w io.Writer) error {
	_, err := fmt.Fprintf(w, "sf2loki %s\ncommit: %s\ngo: %s\n", b.Version, b.Commit, b.GoVersion)
	return err
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return CurrentBuild().write(cmd.OutOrStdout())
		},
	}
}
