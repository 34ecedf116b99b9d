package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// effective runs config effective with args and returns its stdout.
func effective(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"config", "effective"}, args...))
	err := root.Execute()
	return out.String(), err
}

// effectiveConfig writes a configuration whose values come from the file,
// the defaults, SF2LOKI_* overrides, ${NAME} placeholders and a *_file,
// with a secret from each of the last three.
func effectiveConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "loki-token")
	if err := os.WriteFile(tokenFile, []byte("token-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.OnlyEnv(t, map[string]string{
		"SF2LOKI_SINK__LOKI__TENANT_ID":       "tenant-from-env",
		"SF2LOKI_COORDINATE__FILE_LEASE__TTL": "90m",
		"SF2LOKI_SOURCES__TRANSFORM_SALT":     "salt-from-env",
		"LOKI_HOST":                           "loki.example.com",
		"SF_SECRET":                           "secret-from-placeholder",
	})
	path := filepath.Join(dir, "sf2loki.yaml")
	cfg := `coordinate:
  type: file_lease
  file_lease: {path: ` + dir + `/leader.lease, renew_interval: 1500ms}
state: {file: {path: ` + dir + `/state.json}, commit_interval: 0}
salesforce:
  auth_mode: client_credentials
  login_url: https://acme.my.salesforce.com
  client_id: ck
  client_secret: ${SF_SECRET}
sink:
  loki:
    url: https://${LOKI_HOST}/loki/api/v1/push
    auth_token_file: ` + tokenFile + `
    # A secret from a *_file is redacted wherever it appears.
    labels: {environment: token-from-file}
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConfigEffective(t *testing.T) {
	path := effectiveConfig(t)
	out, err := effective(t, "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  file_lease:\n    path: " + filepath.Dir(path) + "/leader.lease\n    ttl: 1h30m\n    renew_interval: 1.5s\n", // env, file
		"  commit_interval: 0s\n", "  token_ttl: 2h\n", "    poll_interval: 1h\n", "    max_wait: 1s\n", // defaults
		"    tenant_id: tenant-from-env\n",                                                       // SF2LOKI_*
		"    url: https://loki.example.com/loki/api/v1/push\n",                                   // ${LOKI_HOST}
		"  client_secret: <redacted>\n",                                                          // ${SF_SECRET}
		"  transform_salt: <redacted>\n",                                                         // SF2LOKI_SOURCES__TRANSFORM_SALT
		"    auth_token: \"\"\n", "    auth_token_file: " + filepath.Dir(path) + "/loki-token\n", // the file's path is shown
		"      environment: <redacted>\n", // the file's content is not
		"  private_key: \"\"\n",           // unset secrets print as unset
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config effective lacks %q:\n%s", want, out)
		}
	}
	for _, secret := range []string{"salt-from-env", "secret-from-placeholder", "token-from-file"} {
		if strings.Contains(out, secret) {
			t.Errorf("config effective shows the secret %q:\n%s", secret, out)
		}
	}
}

func TestConfigEffectiveJSON(t *testing.T) {
	out, err := effective(t, "--config", effectiveConfig(t), "--json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Coordinate struct {
			FileLease struct {
				TTL           string `json:"ttl"`
				RenewInterval string `json:"renew_interval"`
			} `json:"file_lease"`
		}
		Salesforce map[string]any
		Sources    map[string]any
		Sink       struct {
			Loki map[string]any
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	l := doc.Sink.Loki
	if doc.Coordinate.FileLease.TTL != "1h30m" || doc.Coordinate.FileLease.RenewInterval != "1.5s" ||
		doc.Salesforce["client_secret"] != config.Redacted || doc.Sources["transform_salt"] != config.Redacted ||
		l["tenant_id"] != "tenant-from-env" || l["max_in_flight"] != 16.0 || l["timeout"] != "30s" ||
		!slices.Equal(l["structured_metadata_fields"].([]any), []any{}) {
		t.Fatalf("config effective --json:\n%s", out)
	}
	// Keys in declaration order, as in the YAML.
	if i, j := strings.Index(out, `"coordinate"`), strings.Index(out, `"sink"`); i < 0 || j < i {
		t.Errorf("keys out of order:\n%s", out)
	}
	for _, secret := range []string{"salt-from-env", "secret-from-placeholder", "token-from-file"} {
		if strings.Contains(out, secret) {
			t.Errorf("config effective --json shows the secret %q", secret)
		}
	}
}

// An invalid configuration prints nothing and exits 2 with every problem.
func TestConfigEffectiveRefusesAnInvalidConfiguration(t *testing.T) {
	testenv.OnlyEnv(t, nil)
	path := filepath.Join(t.TempDir(), "sf2loki.yaml")
	if err := os.WriteFile(path, []byte("coordinate: {type: etcd}\nsink: {loki: {max_in_flight: 100}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := effective(t, "--config", path)
	var exit *app.ExitError
	if !errors.As(err, &exit) || exit.Code != app.ExitInvalidConfig || out != "" ||
		!strings.Contains(err.Error(), "coordinate.type") || !strings.Contains(err.Error(), "sink.loki.max_in_flight") {
		t.Fatalf("invalid configuration: %v (stdout %q)", err, out)
	}
}
