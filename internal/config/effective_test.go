package config_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sf2loki/sf2loki/internal/config"
)

// The document of a configuration: declaration order, defaults, durations
// in their shortest form, secrets that are set redacted, and it loads
// again as the same configuration.
func TestDocument(t *testing.T) {
	t.Setenv("SF2LOKI_SINK__LOKI__AUTH_TOKEN", "env-token-value")
	src := write(t, `
coordinate:
  type: file_lease
  file_lease: {ttl: 90m, renew_interval: 1500ms}
state: {commit_interval: 0}
telemetry: {headers: {authorization: Bearer header-token}}
sink:
  loki:
    url: http://user:url-password@loki:3100/loki/api/v1/push
    labels: {job: sf2loki, environment: "60.0"}
orgs:
  - name: prod
    salesforce: {auth_mode: client_credentials, login_url: "https://acme.my.salesforce.com", client_id: ck, client_secret: sf-secret-value}
    sources:
      transform_salt_file: /run/secrets/salt
      pubsub:
        topics: [/event/LoginEventStream, "*"]
        sample: {"/event/ApiEventStream": 0.25, "*": 1}
        transforms: [{action: hash, fields: [USER_ID, "*_IP"]}]
`)
	cfg, _, err := config.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	doc := marshal(t, cfg.Document())
	for _, want := range []string{
		"coordinate:\n  type: file_lease\n  file_lease:\n    path: /var/lib/sf2loki/leader.lease\n    ttl: 1h30m\n    renew_interval: 1.5s\n",
		"  commit_interval: 0s\n", "  token_ttl: 2h\n", "  poll_interval: 1h\n", "    lookback: 24h\n", "reorder_window: 30m\n",
		"    auth_token: <redacted>\n", "    auth_token_file: \"\"\n",
		"url: http://user:<redacted>@loki:3100/loki/api/v1/push\n",
		"  headers:\n    authorization: <redacted>\n",
		"    environment: \"60.0\"\n",
		"client_secret: <redacted>\n", "transform_salt: \"\"\n", "transform_salt_file: /run/secrets/salt\n",
		"topics: [/event/LoginEventStream, '*']\n",
		"/event/ApiEventStream: 0.25\n",
		"- action: hash\n",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("the document lacks %q:\n%s", want, doc)
		}
	}
	for _, secret := range []string{"env-token-value", "url-password", "header-token", "sf-secret-value"} {
		if strings.Contains(doc, secret) {
			t.Errorf("the document shows %q:\n%s", secret, doc)
		}
	}
	var keys, sections []string
	top := cfg.Document().Content[0].Content
	for i := 0; i < len(top); i += 2 {
		keys = append(keys, top[i].Value)
	}
	for _, f := range config.Schema() {
		if f.Depth == 0 {
			sections = append(sections, f.Path)
		}
	}
	if !slices.Equal(keys, sections) {
		t.Errorf("top-level keys %v, want %v (declaration order)", keys, sections)
	}

	// Without its secrets, the document loads as the same configuration
	// (nil and empty lists and maps aside).
	t.Setenv("SF2LOKI_SINK__LOKI__AUTH_TOKEN", "")
	cfg.Sink.Loki.AuthToken = ""
	cfg.Sink.Loki.URL = "http://loki:3100/loki/api/v1/push"
	cfg.Telemetry.Headers = nil
	cfg.Orgs[0].Salesforce.ClientSecret = ""
	cfg.Orgs[0].Salesforce.ClientSecretFile = "/run/secrets/sf"
	out := marshal(t, cfg.Document())
	again, _, err := config.Load(write(t, out))
	if err != nil {
		t.Fatalf("the document does not load: %v\n%s", err, out)
	}
	if got := marshal(t, again.Document()); got != out {
		t.Fatalf("the document loads as another configuration:\n%s\nwant\n%s", got, out)
	}
}

func marshal(t *testing.T, doc *yaml.Node) string {
	t.Helper()
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", time.Hour: "1h", 90 * time.Minute: "1h30m", 2 * time.Minute: "2m", 150 * time.Second: "2m30s",
		time.Hour + time.Second: "1h0m1s", 500 * time.Millisecond: "500ms", 1500 * time.Millisecond: "1.5s", 24 * time.Hour: "24h",
	} {
		if got := config.FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%s) = %q, want %q", d, got, want)
		}
		if back, err := time.ParseDuration(config.FormatDuration(d)); err != nil || back != d {
			t.Errorf("%q parses as %s, %v", config.FormatDuration(d), back, err)
		}
	}
}

// A value holding the text "${X}" (written "$${X}") is printed so that it
// loads again as that text, whether X is set or not; a transform's
// replacement, which the loader never interpolates, is printed as it is.
func TestDocumentKeepsEscapedPlaceholders(t *testing.T) {
	t.Setenv("TOKEN", "from-the-env")
	src := write(t, `
sink:
  loki:
    url: http://loki:3100/loki/api/v1/push
    labels: {job: '$${TOKEN}', environment: 'a$$$${TOKEN}b'}
salesforce: {auth_mode: client_credentials, login_url: "https://acme.my.salesforce.com", client_id: ck, client_secret: s}
sources:
  pubsub:
    topics: [/event/LoginEventStream]
    transforms: [{action: regex_replace, fields: [Username], pattern: '(?P<local>[^@]+)@.*', replacement: '${local}@x'}]
`)
	cfg, _, err := config.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Sink.Loki.Labels["job"]; got != "${TOKEN}" {
		t.Fatalf("loaded job label %q", got)
	}
	again, _, err := config.Load(write(t, marshal(t, cfg.Document())))
	if err != nil {
		t.Fatal(err)
	}
	if j, tm := again.Sink.Loki.Labels["job"], again.Sink.Loki.Labels["environment"]; j != "${TOKEN}" || tm != cfg.Sink.Loki.Labels["environment"] {
		t.Fatalf("reloaded labels job %q environment %q, want %q and %q", j, tm, "${TOKEN}", cfg.Sink.Loki.Labels["environment"])
	}
	if r := again.Sources.PubSub.Transforms[0].Replacement; r != "${local}@x" {
		t.Fatalf("reloaded replacement %q", r)
	}
}
