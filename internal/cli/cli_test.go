package cli

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/buildinfo"
	"github.com/sf2loki/sf2loki/internal/doctor"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

func TestVersionCommand(t *testing.T) {
	root := NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"sf2loki " + buildinfo.Version(), "commit: ", "go: " + runtime.Version()} {
		if !strings.Contains(got, want) {
			t.Errorf("version output %q lacks %q", got, want)
		}
	}
}

func TestVersionRejectsArguments(t *testing.T) {
	root := NewRootCommand()
	root.SetOut(&bytes.Buffer{})
	root.SetArgs([]string{"version", "extra"})
	if err := root.Execute(); err == nil {
		t.Fatal("version accepted a stray argument")
	}
}

func TestHealthCommand(t *testing.T) {
	run := func(url string) (string, error) {
		root := NewRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs([]string{"health", "--url", url, "--timeout", "2s"})
		err := root.Execute()
		return out.String(), err
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "standby\n")
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	}))
	defer srv.Close()
	if out, err := run(srv.URL + "/healthz"); err != nil || !strings.Contains(out, ": 200 ok") {
		t.Fatalf("healthy: %q, %v", out, err)
	}
	var exit *app.ExitError
	if _, err := run(srv.URL + "/readyz"); !errors.As(err, &exit) || exit.Code != 1 || !strings.Contains(err.Error(), "answered 503 standby") {
		t.Fatalf("503: %v", err)
	}
	srv.Close()
	if _, err := run(srv.URL + "/healthz"); !errors.As(err, &exit) || exit.Code != 1 || !strings.Contains(err.Error(), "is sf2loki running") {
		t.Fatalf("nothing listening: %v", err)
	}
}

// sf2loki --version (and -v) prints what sf2loki version prints.
func TestVersionFlagPrintsWhatTheVersionCommandPrints(t *testing.T) {
	want, err := runCommand(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--version", "-v"} {
		if got, err := runCommand(t, flag); err != nil || got != want {
			t.Errorf("sf2loki %s: %q, %v; want %q", flag, got, err, want)
		}
	}
}

// Every usage error, of every command, exits ExitUsage (2) and says where
// to read the usage; a group command (state, config) alone prints its help.
func TestUsageErrorsExit2Everywhere(t *testing.T) {
	testenv.OnlyEnv(t, nil)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `unknown command "bogus" for "sf2loki"; run 'sf2loki --help'`},
		{[]string{"chek"}, `(did you mean check?)`},
		{[]string{"--bogus"}, "unknown flag: --bogus; run 'sf2loki --help'"},
		{[]string{"check", "--bogus"}, "unknown flag: --bogus; run 'sf2loki check --help'"},
		{[]string{"check", "extra"}, `unknown command "extra" for "sf2loki check"`},
		{[]string{"run", "--dry-run=maybe"}, `invalid argument "maybe" for "--dry-run"`},
		{[]string{"doctor", "extra"}, `unknown command "extra" for "sf2loki doctor"`},
		{[]string{"state", "bogus"}, `unknown command "bogus" for "sf2loki state"`},
		{[]string{"state", "shwo"}, `(did you mean show?)`},
		{[]string{"state", "set", "only-a-key"}, "accepts 2 arg(s), received 1; run 'sf2loki state set --help'"},
		{[]string{"state", "show", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"config", "bogus"}, `unknown command "bogus" for "sf2loki config"`},
		{[]string{"config", "example", "extra"}, `unknown command "extra" for "sf2loki config example"`},
		{[]string{"version", "extra"}, `unknown command "extra" for "sf2loki version"`},
		{[]string{"health", "--timeout", "soon"}, `invalid argument "soon" for "--timeout"`},
		{[]string{"backfill", "--bogus"}, "unknown flag: --bogus; run 'sf2loki backfill --help'"},
		{[]string{"completion", "bogus"}, `unknown command "bogus" for "sf2loki completion"`},
	} {
		out, err := runCommand(t, tc.args...)
		var exit *app.ExitError
		if !errors.As(err, &exit) || exit.Code != app.ExitUsage || !strings.Contains(out, tc.want) {
			t.Errorf("sf2loki %s: %v, want exit %d saying %q:\n%s", strings.Join(tc.args, " "), err, app.ExitUsage, tc.want, out)
		}
	}
	for _, args := range [][]string{nil, {"state"}, {"config"}} {
		if out, err := runCommand(t, args...); err != nil || !strings.Contains(out, "Available Commands:") {
			t.Errorf("sf2loki %s: %v, want its help:\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// Without --config and without any SF2LOKI_* key, the commands that need a
// configuration refuse (exit 2) and say how to give one; the variables
// Kubernetes sets for a Service named sf2loki are no configuration.
func TestNoConfigurationIsRefused(t *testing.T) {
	testenv.OnlyEnv(t, map[string]string{"SF2LOKI_SERVICE_HOST": "10.0.0.1", "SF2LOKI_PORT": "tcp://10.0.0.1:8080"})
	for _, args := range [][]string{{"check"}, {"run"}, {"state", "show"}, {"state", "export"}, {"config", "effective"},
		{"backfill", "--since", "2026-11-01"}} {
		out, err := runCommand(t, args...)
		var exit *app.ExitError
		if !errors.As(err, &exit) || exit.Code != app.ExitInvalidConfig || !errors.As(err, new(*app.NoConfigError)) ||
			!strings.Contains(out, "no configuration: neither --config nor any SF2LOKI_* configuration variable is given") ||
			!strings.Contains(out, "Pass --config FILE") || strings.Contains(out, "configuration is valid") {
			t.Errorf("sf2loki %s: %v, want exit 2 naming --config:\n%s", strings.Join(args, " "), err, out)
		}
	}
	r := doctor.Doctor(t.Context(), "")
	if r.ExitCode != app.ExitInvalidConfig || r.Checks[0].Status != doctor.Fail || !strings.Contains(r.Checks[0].Detail, "no configuration") {
		t.Errorf("doctor without a configuration: %+v", r)
	}
}

// A configuration from the environment alone is one (the ECS task
// definition runs so): check passes and says where it came from, and
// warns when no source is enabled.
func TestEnvironmentOnlyConfigurationIsChecked(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	testenv.OnlyEnv(t, map[string]string{"SF2LOKI_STATE__FILE__PATH": state})
	out, err := runCommand(t, "check")
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	for _, want := range []string{
		"configuration is valid: coordinate.type noop, state.store file (no configuration file: the defaults and 1 SF2LOKI_* variable: SF2LOKI_STATE__FILE__PATH)",
		"warning: no source is enabled: the leader will hold the lease and ship nothing",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	testenv.OnlyEnv(t, map[string]string{"SF2LOKI_STATE__FILE__PATH": state, "SF2LOKI_SOURCES__SYNTHETIC__RATE": "1", "SF2LOKI_SINK__LOKI__URL": "http://127.0.0.1:3100/loki/api/v1/push"})
	if out, err := runCommand(t, "check"); err != nil || strings.Contains(out, "no source") {
		t.Errorf("check with a source: %v\n%s", err, out)
	}
}

// The health probe sends our User-Agent.
func TestHealthSendsTheUserAgent(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got <- r.UserAgent() }))
	defer srv.Close()
	if out, err := runCommand(t, "health", "--url", srv.URL+"/healthz"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if ua := <-got; ua != buildinfo.UserAgent() {
		t.Errorf("User-Agent %q, want %q", ua, buildinfo.UserAgent())
	}
}
