package app

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Build information, set with -ldflags "-X ...=..." by make build.
var (
	version = "dev"
	commit  = ""
)

// BuildInfo describes the running binary.
type BuildInfo struct {
	Version   string
	Commit    string
	GoVersion string
}

// CurrentBuild returns the version, the commit (from -ldflags, else from the
// Go build's VCS stamp, else "unknown") and the Go version.
func CurrentBuild() BuildInfo {
	c := commit
	if c == "" {
		c = "unknown"
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && s.Value != "" {
					c = s.Value
				}
			}
		}
	}
	return BuildInfo{Version: version, Commit: c, GoVersion: runtime.Version()}
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
