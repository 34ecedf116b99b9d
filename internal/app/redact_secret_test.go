package app

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sf2loki/sf2loki/internal/config"
)

// Every key tagged secret is redacted from logs and errors, with the
// content of its *_file, including keys redactSecrets does not name.
func TestRedactSecretsCoversEveryTaggedKey(t *testing.T) {
	onlyEnv(t, nil)
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
	got := redactSecrets(cfg)
	for _, s := range []string{"salt-from-file", "inline-salt"} {
		if !slices.Contains(got, s) {
			t.Errorf("%q is not redacted", s)
		}
	}
}
