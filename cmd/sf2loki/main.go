// Command sf2loki is the sf2loki daemon and its operator tools. It parses
// the command line, builds the application (internal/app) and runs it;
// nothing else lives here.
//
// The binary carries Mozilla's root certificates (x509roots/fallback) and
// uses them only where the system has none, so the release image can be
// built FROM scratch and still verify Salesforce's, Loki's and the object
// stores' certificates; a system bundle (SSL_CERT_FILE, /etc/ssl) wins
// wherever there is one.
package main

import (
	"errors"
	"fmt"
	"os"

	_ "golang.org/x/crypto/x509roots/fallback"

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
