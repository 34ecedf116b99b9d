// Command sf2loki is the sf2loki daemon and its operator tools. It parses
// the command line, builds the application (internal/app) and runs it;
// nothing else lives here.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/sf2loki/sf2loki/internal/app"
)

func main() {
	if err := app.NewRootCommand().Execute(); err != nil {
		if !errors.Is(err, app.ErrReported) {
			fmt.Fprintln(os.Stderr, "sf2loki:", err)
		}
		code := 1
		var exit *app.ExitError
		if errors.As(err, &exit) {
			code = exit.Code
		}
		os.Exit(code)
	}
}
