package app

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// Every key tagged secret is redacted from logs and errors, with the
// content of its *_file, including keys redactSecrets does not name.
func TestRedactSecretsCoversEveryTaggedKey(t *testing.T) {
	testenv.OnlyEnv(t, nil)
	dir := t.TempDir()
	salt := filepath.Join(dir, "salt")
	if err := os.WriteFile(salt, []byte("salt-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "c.yaml")
	yaml := "orgs:\n  - name: a\n    sources: {transform_salt_file: " + salt + "}\n  - name: b\n    sources: {transform_salt: inline-salt}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	got := RedactSecrets(cfg)
	for _, s := range []string{"salt-from-file", "inline-salt"} {
		if !slices.Contains(got, s) {
			t.Errorf("%q is not redacted", s)
		}
	}
}

// A token in service.telemetry.headers is masked bare too (an error body
// may echo it without its "Bearer " prefix).
func TestPushHeaderTokenIsRedactedBare(t *testing.T) {
	cfg := config.Defaults()
	cfg.Service.Telemetry.Auth = "none"
	cfg.Service.Telemetry.Endpoint = "https://otlp.example.com/v1/metrics"
	cfg.Service.Telemetry.Headers = map[string]string{"Authorization": "Bearer tok-9f8e7d6c5b4a"}
	if !slices.Contains(RedactSecrets(cfg), "tok-9f8e7d6c5b4a") {
		t.Fatalf("the bare token is not a secret: %v", RedactSecrets(cfg))
	}
}
