package app

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sf2loki/sf2loki/internal/config"
)

// Every org's secrets are redacted, not only the first's.
func TestRedactSecretsCoversEveryOrg(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "sandbox-secret")
	if err := os.WriteFile(file, []byte("Sandbox+Secret/Value==\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "c.yaml")
	yaml := `state: {file: {path: ` + dir + `/state.json}}
orgs:
  - name: prod
    salesforce: {auth_mode: client_credentials, login_url: "https://prod.my.salesforce.com", client_id: a, client_secret: "Prod+Secret/Value=="}
  - name: sandbox
    salesforce: {auth_mode: client_credentials, environment: sandbox, login_url: "https://sb.sandbox.my.salesforce.com", client_id: b, client_secret_file: ` + file + `}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	got := RedactSecrets(cfg)
	for _, s := range []string{"Prod+Secret/Value==", "Sandbox+Secret/Value=="} {
		if !slices.Contains(got, s) {
			t.Errorf("%q is not redacted", s)
		}
	}
}
