// Command sf2loki is the sf2loki daemon and its operator tools. It runs the
// command line (internal/cli) and exits with its code; nothing else lives
// here.
//
// The binary carries Mozilla's root certificates (x509roots/fallback) and
// uses them only where the system has none, so the release image can be
// built FROM scratch and still verify Salesforce's, Loki's and the object
// stores' certificates; a system bundle (SSL_CERT_FILE, /etc/ssl) wins
// wherever there is one.
//
// Imports: internal/cli, the top of the command line; all the rest is below it.
package main

import (
	"os"

	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/sf2loki/sf2loki/internal/cli"
)

func main() {
	os.Exit(cli.Execute())
}
