// Package buildinfo holds what the build stamps into the binary: the
// version and the commit (set with -ldflags "-X ...=..." by make build, the
// image and the release), and the User-Agent every client of the daemon
// sends, and the process's default identity (Instance). The adapters read it here, so that a request to Salesforce, Loki,
// an object store or the Kubernetes API names sf2loki and its version
// without the composition layer threading it through every configuration.
//
// Imports: the standard library only, so that every layer may use it.
package buildinfo

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"
)

// Set with -ldflags "-X github.com/sf2loki/sf2loki/internal/buildinfo.version=...".
var (
	version = "dev"
	commit  = ""
)

// Version is the version the build was stamped with ("dev" without one).
func Version() string { return version }

// Commit is the commit the build was stamped with, else the Go build's VCS
// stamp, else "unknown".
func Commit() string {
	if commit != "" {
		return commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// Product is the product token of the User-Agent.
const Product = "sf2loki"

// UserAgent is "sf2loki/<version>", the User-Agent of every request the
// daemon and its commands send. A version holding a character a product
// token may not carry (RFC 9110, 5.6.2) has it replaced with "-".
func UserAgent() string {
	return Product + "/" + token(version)
}

// token maps s onto RFC 9110's tchar set.
func token(s string) string {
	if s == "" {
		return "unknown"
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		case strings.ContainsRune("!#$%&'*+-.^_`|~", r):
			return r
		}
		return '-'
	}, s)
}

// Instance is the process's default identity, hostname-pid: the lease
// holder when none is configured, and the pushed metrics'
// service.instance.id (two replicas on one host must not share it).
func Instance() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "sf2loki"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}
