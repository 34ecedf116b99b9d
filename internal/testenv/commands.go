package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WriteConfig writes yaml to sf2loki.yaml in a directory of the test's and
// returns its path.
func WriteConfig(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sf2loki.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// S3Env sets the AWS variables that reach the test S3 server (see S3AccessKey).
func S3Env(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", S3AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", S3SecretKey)
	t.Setenv("AWS_REGION", S3Region)
}

// OnlyEnv leaves exactly env among the SF2LOKI_ variables for the test.
func OnlyEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, value, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "SF2LOKI_") {
			t.Setenv(name, value) // restored after the test
			if err := os.Unsetenv(name); err != nil {
				t.Fatal(err)
			}
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}
