package config_test

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/config"
)

// notSecret are the keys whose name looks like a secret's but whose value
// is not one, each with the reason. A new key whose name looks like a
// secret's must be tagged secret:"true" or added here.
var notSecret = map[string]string{
	"key":       "an object's name in a bucket",
	"token_ttl": "a duration",
	"key_file":  "a path: the file holds the Loki client certificate's private key, read at start",
}

// secretName matches the names of keys that may hold a secret.
var secretName = regexp.MustCompile(`secret|token|key|passw|salt|credential|private`)

// TestSecretKeysAreTagged: every key whose name marks it as a secret
// carries the secret tag (which the effective configuration, logs and
// errors redact), or is the *_file beside one (a path, shown as is), or is
// listed in notSecret.
func TestSecretKeysAreTagged(t *testing.T) {
	byPath := map[string]config.Field{}
	for _, f := range config.Schema() {
		byPath[f.Path] = f
	}
	for _, f := range config.Schema() {
		name := f.Path[strings.LastIndex(f.Path, ".")+1:]
		switch {
		case f.Section:
		case f.Secret:
			if f.Type != "string" && f.Type != "map of string" {
				t.Errorf("%s is tagged secret but is a %s: only text and maps of text can be redacted", f.Path, f.Type)
			}
		case !secretName.MatchString(name):
		case strings.HasSuffix(name, "_file") && byPath[strings.TrimSuffix(f.Path, "_file")].Secret:
		case notSecret[name] != "":
		default:
			t.Errorf("%s looks like a secret: tag it secret:\"true\" (or list it in notSecret with the reason)", f.Path)
		}
	}
	for _, p := range []string{"salesforce.client_secret", "salesforce.private_key", "sink.loki.auth_token",
		"sources.transform_salt", "orgs[].salesforce.client_secret", "orgs[].sources.transform_salt", "telemetry.headers"} {
		if !byPath[p].Secret {
			t.Errorf("%s is not tagged secret", p)
		}
	}
}

func TestSecretsListsEveryOrgsSecretWithItsFile(t *testing.T) {
	cfg, _, err := config.Load(write(t, orgsSink+`
telemetry: {headers: {authorization: Bearer header-token}}
orgs:
  - name: prod
    salesforce: {client_secret: prod-secret}
  - name: uat
    salesforce: {client_secret_file: /run/secrets/uat}
    sources: {transform_salt: uat-salt}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]config.Secret{}
	for _, s := range cfg.Secrets() {
		if s.Value != "" || s.File != "" {
			got[s.Path] = s
		}
	}
	want := map[string]config.Secret{
		"telemetry.headers.authorization":  {Path: "telemetry.headers.authorization", Value: "Bearer header-token"},
		"orgs[0].salesforce.client_secret": {Path: "orgs[0].salesforce.client_secret", Value: "prod-secret"},
		"orgs[1].salesforce.client_secret": {Path: "orgs[1].salesforce.client_secret", File: "/run/secrets/uat"},
		"orgs[1].sources.transform_salt":   {Path: "orgs[1].sources.transform_salt", Value: "uat-salt"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("secrets\n got %v\nwant %v", got, want)
	}
}
