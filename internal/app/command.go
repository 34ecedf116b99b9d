package app

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
)

// Exit codes of every command: 0 done, 1 a failure at run time (a
// backend, Salesforce or Loki refused or could not be reached; doctor
// found a FAIL), 2 the command line or the configuration is wrong (an
// unknown command or flag, a missing or extra argument, an invalid or
// missing configuration): running it again unchanged cannot succeed.
const (
	ExitFailure = 1
	ExitUsage   = 2
)

// ExitInvalidConfig is the exit code for a configuration that does not
// load or validate: the usage error's.
const ExitInvalidConfig = ExitUsage

// NoConfigError is a command that needs a configuration run with none: no
// --config and no SF2LOKI_* variable. The defaults alone enable no source
// and keep state in /var/lib/sf2loki, which is never what was meant.
type NoConfigError struct{}

func (*NoConfigError) Error() string {
	return "no configuration: neither --config nor any SF2LOKI_* configuration variable is given, and the defaults alone " +
		"enable no source (and keep state in /var/lib/sf2loki). Pass --config FILE with your configuration " +
		"(sf2loki config example > sf2loki.yaml writes one to edit), or set its keys as SF2LOKI_* variables " +
		"(SF2LOKI_SALESFORCE__CLIENT_ID=…; sf2loki config reference lists every key)"
}

// Unwrap returns domain.ErrInvalidConfig.
func (*NoConfigError) Unwrap() error { return domain.ErrInvalidConfig }

// RequireConfiguration returns a *NoConfigError when there is no
// configuration file and the environment sets no key.
func RequireConfiguration(path string) error {
	if path != "" || len(EnvironmentConfiguration(os.Environ())) > 0 {
		return nil
	}
	return &NoConfigError{}
}

// EnvironmentConfiguration lists the names of the SF2LOKI_* variables the
// configuration reads, as config.Load tells them: names with __ and names
// of a top-level key. Others, such as SF2LOKI_SERVICE_HOST that Kubernetes
// sets for a Service named sf2loki, configure nothing.
func EnvironmentConfiguration(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		rest, ok := strings.CutPrefix(name, config.EnvPrefix)
		if !ok || rest == "" {
			continue
		}
		if strings.Contains(rest, "__") || slices.Contains(topLevelKeys(), strings.ToLower(rest)) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// topLevelKeys are the configuration's top-level keys.
func topLevelKeys() []string {
	t := reflect.TypeFor[config.Config]()
	keys := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		if k, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); k != "" && k != "-" {
			keys = append(keys, k)
		}
	}
	return keys
}

// LoadConfig loads and validates, printing warnings; an invalid
// configuration, or none at all (no --config and no SF2LOKI_* key), is an
// ExitError with code 2.
func LoadConfig(stderr io.Writer, path string, opts ...config.Option) (*config.Config, error) {
	if err := RequireConfiguration(path); err != nil {
		return nil, &ExitError{Code: ExitInvalidConfig, Err: err}
	}
	cfg, warnings, err := config.Load(path, opts...)
	if err != nil {
		code := 1
		if errors.Is(err, domain.ErrInvalidConfig) {
			code = ExitInvalidConfig
		}
		return nil, &ExitError{Code: code, Err: err}
	}
	for _, w := range warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	return cfg, nil
}

// ShardOf is the configuration of org's shard: its checkpoint document and
// lease. With orgs configured --org is required; without, it must be blank.
func ShardOf(cfg *config.Config, org string) (*config.Config, error) {
	shards := cfg.Shards()
	names := make([]string, len(shards))
	for i, s := range shards {
		names[i] = s.ShardName
		if s.ShardName == org {
			return s, nil
		}
	}
	if org == "" {
		return nil, fmt.Errorf("the configuration has orgs %s, each with its own checkpoint document: pass --org", strings.Join(names, ", "))
	}
	if len(names) == 1 && names[0] == "" {
		return nil, fmt.Errorf("--org %s: the configuration has no orgs (one checkpoint document); drop --org", org)
	}
	return nil, fmt.Errorf("--org %s: no such org in the configuration (orgs: %s)", org, strings.Join(names, ", "))
}

// ErrReported marks an exit whose reason the command already printed.
var ErrReported = errors.New("reported above")

// Plural writes n things: 1 file, 2 files, 3 tries.
func Plural(n int64, one string) string {
	switch {
	case n == 1:
		return "1 " + one
	case strings.HasSuffix(one, "y"):
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(one, "y"))
	}
	return fmt.Sprintf("%d %ss", n, one)
}
