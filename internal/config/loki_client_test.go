package config_test

import (
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/config"
)

// TestLokiClientValidation: half a client certificate, tls on an http url
// and the headers sf2loki owns are refused at load, without quoting a
// header's value; insecure_skip_verify warns.
func TestLokiClientValidation(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"cert without key":      {`sink: {loki: {tls: {cert_file: /c.pem}}}`, "sink.loki.tls.key_file: required with sink.loki.tls.cert_file"},
		"key without cert":      {`sink: {loki: {tls: {key_file: /k.pem}}}`, "sink.loki.tls.cert_file: required with sink.loki.tls.key_file"},
		"tls on http":           {`sink: {loki: {url: 'http://u:pw@loki:3100/push', tls: {server_name: loki}}}`, "sink.loki.tls: set, but sink.loki.url http://u:xxxxx@loki:3100/push is http://"},
		"content encoding":      {`sink: {loki: {headers: {Content-Encoding: br}}}`, "sink.loki.headers.content-encoding: set by sf2loki from sink.loki.encoding"},
		"host":                  {`sink: {loki: {headers: {host: loki.internal}}}`, "sink.loki.headers.host: set by the HTTP client"},
		"authorization + token": {`sink: {loki: {auth_token_file: /t, headers: {Authorization: Bearer s3cr3t-value}}}`, "sink.loki.headers.authorization: set by sf2loki from sink.loki.auth_token"},
		"tenant twice":          {`sink: {loki: {tenant_id: a, headers: {X-Scope-OrgID: b}}}`, "sink.loki.headers.x-scope-orgid: the tenant is sink.loki.tenant_id"},
		"bad name":              {`sink: {loki: {headers: {"x key": v}}}`, `sink.loki.headers.x key: "x key" is not a header name`},
	} {
		t.Run(name, func(t *testing.T) {
			msg := problems(t, tc.yaml)
			if !strings.Contains(msg, tc.want) || strings.Contains(msg, "s3cr3t") {
				t.Fatalf("want %q in:\n%s", tc.want, msg)
			}
		})
	}
	for _, yaml := range []string{
		`sink: {loki: {headers: {Authorization: Bearer x, X-Scope-OrgID: t, X-Api-Key: k}}}`,
		`sink: {loki: {url: 'https://loki/push', tls: {cert_file: /c, key_file: /k, ca_file: /ca, server_name: loki}}}`,
	} {
		if _, _, err := config.Load(write(t, yaml)); err != nil {
			t.Fatalf("%s: %v", yaml, err)
		}
	}
	_, warnings, err := config.Load(write(t, `sink: {loki: {tls: {insecure_skip_verify: true}}}`))
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "anyone on the network path can read and forge") {
		t.Fatalf("insecure_skip_verify: %v %q", err, warnings)
	}
}
