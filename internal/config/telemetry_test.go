package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/config"
)

// TestServiceTelemetryDefaults: the push is off, basic auth, every minute.
func TestServiceTelemetryDefaults(t *testing.T) {
	cfg, _, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Service.Telemetry
	if got.Enabled || got.Auth != "basic" || got.ExportInterval != time.Minute || got.Endpoint != "" {
		t.Fatalf("defaults: %+v", got)
	}
}

// TestServiceTelemetryValidation: an enabled push needs a metrics URL and
// credentials; what cannot work is refused with what to do, and no
// problem quotes the token or a header's value.
func TestServiceTelemetryValidation(t *testing.T) {
	const on = "service: {telemetry: {enabled: true, auth: none, "
	for name, tc := range map[string]struct{ yaml, want string }{
		"no endpoint":   {on + "}}", "service.telemetry.endpoint: required when service.telemetry.enabled is true"},
		"no scheme":     {on + "endpoint: otlp.example.com/v1/metrics}}", `service.telemetry.endpoint: "otlp.example.com/v1/metrics" has no scheme`},
		"not http":      {on + "endpoint: 'grpc://collector:4317/v1/metrics'}}", `the scheme must be http or https, not "grpc"`},
		"no path":       {on + "endpoint: 'http://collector:4318'}}", "service.telemetry.endpoint: http://collector:4318 has no path: the metrics are posted to the URL as it is; append /v1/metrics (http://collector:4318/v1/metrics)"},
		"traces path":   {on + "endpoint: 'http://collector:4318/v1/traces'}}", "is an OTLP traces endpoint; the metrics push needs the metrics one: end the path in /v1/metrics"},
		"bad interval":  {on + "endpoint: 'http://c:4318/v1/metrics', export_interval: 0s}}", "service.telemetry.export_interval: must be > 0"},
		"auth enum":     {`service: {telemetry: {enabled: true, auth: bearer, endpoint: 'http://c:4318/v1/metrics'}}`, `service.telemetry.auth: "bearer" is not one of [basic none]`},
		"user but none": {on + "endpoint: 'http://c:4318/v1/metrics', basic_auth_user: '123'}}", "service.telemetry.basic_auth_user: set, but service.telemetry.auth is none"},
		"no credentials": {`service: {telemetry: {enabled: true, endpoint: 'https://otlp.example.com/otlp/v1/metrics'}}`,
			"service.telemetry.auth: basic needs a user and a token, and neither service.telemetry nor sink.loki has a user or a token"},
		"user, no token": {`service: {telemetry: {enabled: true, basic_auth_user: '123', endpoint: 'https://otlp.example.com/otlp/v1/metrics'}}`,
			"nor sink.loki has a token: set service.telemetry.basic_auth_user and basic_auth_token_file"},
		"authorization with basic": {`service: {telemetry: {enabled: true, basic_auth_user: u, basic_auth_token: s3cr3t-token, headers: {Authorization: Bearer s3cr3t-header}, endpoint: 'http://c:4318/v1/metrics'}}`,
			"service.telemetry.headers.authorization: set by sf2loki from the basic-auth user and token with auth basic"},
		"content type": {on + "endpoint: 'http://c:4318/v1/metrics', headers: {Content-Type: application/json}}}", "service.telemetry.headers.content-type: set by the OTLP exporter"},
		"nested attribute": {on + "endpoint: 'http://c:4318/v1/metrics', resource_attributes: {deployment: {environment: prod}}}}",
			"service.telemetry.resource_attributes.deployment: must be a string, not a mapping"},
	} {
		t.Run(name, func(t *testing.T) {
			msg := problems(t, tc.yaml)
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("want %q in:\n%s", tc.want, msg)
			}
			if strings.Contains(msg, "s3cr3t") {
				t.Fatalf("a secret is quoted:\n%s", msg)
			}
		})
	}
	// Keys of a push that is off are not judged.
	if _, _, err := config.Load(write(t, `service: {telemetry: {endpoint: 'http://collector:4318'}}`)); err != nil {
		t.Fatalf("disabled: %v", err)
	}
}

// TestServiceTelemetryLoads: a full configuration keeps the case and the
// dots of its resource attributes, and its own credentials warn of
// nothing.
func TestServiceTelemetryLoads(t *testing.T) {
	cfg, warnings, err := config.Load(write(t, `
service:
  telemetry:
    enabled: true
    endpoint: https://otlp-gateway-prod-eu-west-2.grafana.net/otlp/v1/metrics
    basic_auth_user: "987654"
    basic_auth_token_file: /run/secrets/otlp-token
    headers: {X-Team: secops}
    export_interval: 15s
    resource_attributes: {deployment.environment: prod, Team.Name: SecOps, replicas: 2}
`))
	if err != nil || len(warnings) != 0 {
		t.Fatalf("%v %q", err, warnings)
	}
	got := cfg.Service.Telemetry
	want := map[string]string{"deployment.environment": "prod", "Team.Name": "SecOps", "replicas": "2"}
	if len(got.ResourceAttributes) != len(want) {
		t.Fatalf("resource attributes %v", got.ResourceAttributes)
	}
	for k, v := range want {
		if got.ResourceAttributes[k] != v {
			t.Fatalf("resource attributes %v, want %v", got.ResourceAttributes, want)
		}
	}
	if got.ExportInterval != 15*time.Second || got.Headers["x-team"] != "secops" {
		t.Fatalf("%+v", got)
	}
	a := cfg.TelemetryBasicAuth()
	if a.User != "987654" || a.TokenFile != "/run/secrets/otlp-token" || a.TokenFrom != "service.telemetry.basic_auth_token_file" || a.FallbackWarning() != "" {
		t.Fatalf("auth %+v", a)
	}
}

// TestServiceTelemetryFallsBackToLokiWithAWarning: basic auth without its
// own user or token takes sink.loki's, as the older implementation did,
// and warns of the Grafana Cloud trap without quoting the token.
func TestServiceTelemetryFallsBackToLokiWithAWarning(t *testing.T) {
	for name, tc := range map[string]struct {
		yaml, user, from string
	}{
		"tenant and token": {`sink: {loki: {tenant_id: "123456", auth_token: s3cr3t-loki}}`, "123456", "sink.loki.tenant_id (Loki's tenant, taken as the user) and sink.loki.auth_token"},
		"loki user wins":   {`sink: {loki: {tenant_id: t1, basic_auth_user: "777", auth_token_file: /run/loki}}`, "777", "sink.loki.basic_auth_user and sink.loki.auth_token_file"},
		"own user only":    {`{sink: {loki: {tenant_id: t1, auth_token: s3cr3t-loki}}, service: {telemetry: {basic_auth_user: "42"}}}`, "42", "uses sink.loki.auth_token. On Grafana Cloud"},
	} {
		t.Run(name, func(t *testing.T) {
			path := write(t, tc.yaml)
			t.Setenv("SF2LOKI_SERVICE__TELEMETRY__ENABLED", "true")
			t.Setenv("SF2LOKI_SERVICE__TELEMETRY__ENDPOINT", "https://otlp.example.com/otlp/v1/metrics")
			cfg, warnings, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) != 1 || !strings.Contains(warnings[0], tc.from) ||
				!strings.Contains(warnings[0], "On Grafana Cloud the OTLP endpoint's instance id is not the Loki user") ||
				strings.Contains(warnings[0], "s3cr3t") {
				t.Fatalf("warnings %q", warnings)
			}
			if a := cfg.TelemetryBasicAuth(); a.User != tc.user {
				t.Fatalf("user %q, want %q", a.User, tc.user)
			}
		})
	}
}

// TestServiceTelemetryCustomPathWarns: a receiver may serve OTLP on a path
// of its own (the spec allows it), so a path not ending in /v1/metrics
// loads, with a warning that names the likely mistake.
func TestServiceTelemetryCustomPathWarns(t *testing.T) {
	_, warnings, err := config.Load(write(t, `service: {telemetry: {enabled: true, auth: none, endpoint: 'https://gw.example.com/otlp'}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "https://gw.example.com/otlp does not end in /v1/metrics") ||
		!strings.Contains(warnings[0], "append /v1/metrics") {
		t.Fatalf("warnings %q", warnings)
	}
}

// TestServiceTelemetryTokenIsSecret: the token and the headers are tagged
// secret, listed with the token's file, and redacted in the effective
// configuration.
func TestServiceTelemetryTokenIsSecret(t *testing.T) {
	cfg, _, err := config.Load(write(t, `service: {telemetry: {basic_auth_token: s3cr3t-otlp-token, basic_auth_token_file: /run/x, headers: {X-Key: s3cr3t-header}}}`))
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, s := range cfg.Secrets() {
		found[s.Path] = s.Value + "|" + s.File
	}
	if found["service.telemetry.basic_auth_token"] != "s3cr3t-otlp-token|/run/x" || found["service.telemetry.headers.x-key"] != "s3cr3t-header|" {
		t.Fatalf("secrets %v", found)
	}
	doc := marshal(t, cfg.Document())
	if strings.Contains(doc, "s3cr3t") || !strings.Contains(doc, "    basic_auth_token: <redacted>\n") || !strings.Contains(doc, "    basic_auth_token_file: /run/x\n") {
		t.Fatalf("the effective configuration:\n%s", doc)
	}
}

// Loki's token never goes in clear text to another host: the fallback over
// plain http is refused unless the endpoint is this machine.
func TestServiceTelemetryFallbackRefusesPlainHTTPToAnotherHost(t *testing.T) {
	t.Setenv("SF2LOKI_SERVICE__TELEMETRY__ENABLED", "true")
	t.Setenv("SF2LOKI_SERVICE__TELEMETRY__ENDPOINT", "http://otel-collector:4318/v1/metrics")
	y := `sink: {loki: {tenant_id: "123456", auth_token: s3cr3t-loki}}`
	got := problems(t, y)
	if !strings.Contains(got, "service.telemetry.endpoint: http://otel-collector:4318/v1/metrics is plain http to another host, and the push would send sink.loki.auth_token (Loki's token) there in clear text") ||
		strings.Contains(got, "s3cr3t") {
		t.Errorf("problems:\n%s", got)
	}
	t.Setenv("SF2LOKI_SERVICE__TELEMETRY__ENDPOINT", "http://127.0.0.1:4318/v1/metrics")
	if _, _, err := config.Load(write(t, y)); err != nil {
		t.Errorf("a loopback collector: %v", err)
	}
}
