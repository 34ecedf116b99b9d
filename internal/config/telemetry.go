package config

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// ServiceTelemetry configures the OTLP/HTTP metrics push
// (service.telemetry), beside the Prometheus /metrics endpoint.
type ServiceTelemetry struct {
	Enabled            bool              `yaml:"enabled" mapstructure:"enabled" default:"false" doc:"Push the metrics of /metrics over OTLP/HTTP (protobuf) to endpoint every export_interval, as well as serving them on /metrics. A failing endpoint never stops the daemon: each failed push is logged (WARN, at most one a minute) and the next interval tries again."`
	Endpoint           string            `yaml:"endpoint" mapstructure:"endpoint" default:"" format:"url" doc:"The full OTLP/HTTP metrics URL, used as it is (nothing is appended), e.g. https://otlp-gateway-prod-eu-west-2.grafana.net/otlp/v1/metrics or http://otel-collector:4318/v1/metrics. Required when enabled."`
	Auth               string            `yaml:"auth" mapstructure:"auth" default:"basic" enum:"basic,none" doc:"basic: an Authorization: Basic header from basic_auth_user and basic_auth_token; a blank one is taken from sink.loki (basic_auth_user or tenant_id, auth_token or auth_token_file) with a warning, since on Grafana Cloud the OTLP instance id differs from the Loki user. none: no Authorization header (headers may carry one)."`
	BasicAuthUser      string            `yaml:"basic_auth_user" mapstructure:"basic_auth_user" default:"" doc:"The basic-auth user: on Grafana Cloud the OTLP instance id (Connections, OpenTelemetry), not the Loki user. Blank: sink.loki's basic_auth_user, else its tenant_id (the user the Loki token is sent with), with a warning."`
	BasicAuthToken     string            `yaml:"basic_auth_token" mapstructure:"basic_auth_token" default:"" secret:"true" doc:"The basic-auth password (secret): on Grafana Cloud an access policy token with metrics:write. Prefer basic_auth_token_file. Blank (and no file): sink.loki's auth_token."`
	BasicAuthTokenFile string            `yaml:"basic_auth_token_file" mapstructure:"basic_auth_token_file" default:"" doc:"A file holding basic_auth_token; read at start, trimmed. A blank file is a missing token."`
	Headers            map[string]string `yaml:"headers" mapstructure:"headers" default:"" secret:"true" doc:"Extra HTTP headers sent with every push. Every value is a secret: masked wherever it appears in logs and errors. Refused: Content-Type and Content-Encoding (the exporter sets them), and Authorization with auth basic."`
	ExportInterval     time.Duration     `yaml:"export_interval" mapstructure:"export_interval" default:"60s" min:"1s" max:"1h" doc:"How often the metrics are pushed. The last interval is pushed at a graceful stop (bounded by a few seconds)."`
	ResourceAttributes map[string]string `yaml:"resource_attributes" mapstructure:"resource_attributes" default:"" doc:"Resource attributes added to service.name=sf2loki, service.version=<the build's version> and service.instance.id=<the host name> (a key here replaces those), e.g. deployment.environment: prod. Prometheus-compatible backends turn them into target_info labels; service.name becomes job and service.instance.id instance."`
}

// MetricsPath is the path of the OTLP/HTTP metrics endpoint.
const MetricsPath = "/v1/metrics"

// TelemetryAuth is what the metrics push authenticates with under auth
// basic: the user, the token (or the file holding it), and the keys each
// came from.
type TelemetryAuth struct {
	User, UserFrom              string
	Token, TokenFile, TokenFrom string
}

// TelemetryBasicAuth resolves service.telemetry's basic-auth pair: its own
// keys, else sink.loki's (the older implementation's fallback).
func (c *Config) TelemetryBasicAuth() TelemetryAuth {
	t, l := c.Service.Telemetry, c.Sink.Loki
	var a TelemetryAuth
	switch {
	case t.BasicAuthUser != "":
		a.User, a.UserFrom = t.BasicAuthUser, "service.telemetry.basic_auth_user"
	case l.BasicAuthUser != "":
		a.User, a.UserFrom = l.BasicAuthUser, "sink.loki.basic_auth_user"
	case l.TenantID != "":
		a.User, a.UserFrom = l.TenantID, "sink.loki.tenant_id"
	}
	switch {
	case strings.TrimSpace(t.BasicAuthToken) != "" || t.BasicAuthTokenFile != "":
		a.Token, a.TokenFile, a.TokenFrom = t.BasicAuthToken, t.BasicAuthTokenFile, "service.telemetry.basic_auth_token"
		if strings.TrimSpace(t.BasicAuthToken) == "" {
			a.TokenFrom += "_file"
		}
	case strings.TrimSpace(l.AuthToken) != "" || l.AuthTokenFile != "":
		a.Token, a.TokenFile, a.TokenFrom = l.AuthToken, l.AuthTokenFile, "sink.loki.auth_token"
		if strings.TrimSpace(l.AuthToken) == "" {
			a.TokenFrom += "_file"
		}
	}
	return a
}

// FallbackWarning is the warning that the metrics push borrows sink.loki's
// credentials ("" when it does not).
func (a TelemetryAuth) FallbackWarning() string {
	var from []string
	for _, k := range []string{a.UserFrom, a.TokenFrom} {
		if strings.HasPrefix(k, "sink.loki.") {
			from = append(from, k)
		}
	}
	if len(from) == 0 {
		return ""
	}
	what := strings.Join(from, " and ")
	if a.UserFrom == "sink.loki.tenant_id" {
		what = strings.Replace(what, "sink.loki.tenant_id", "sink.loki.tenant_id (Loki's tenant, taken as the user)", 1)
	}
	return fmt.Sprintf("service.telemetry.auth is basic without its own user or token: the metrics push uses %s. "+
		"On Grafana Cloud the OTLP endpoint's instance id is not the Loki user and the pushes would be refused (401); "+
		"set service.telemetry.basic_auth_user (the OTLP instance id) and service.telemetry.basic_auth_token_file (a token with metrics:write)",
		what)
}

// checkServiceTelemetry checks service.telemetry when it is enabled and
// returns its warnings.
func (c *Config) checkServiceTelemetry(add func(path, format string, args ...any)) (warnings []string) {
	t := c.Service.Telemetry
	if !t.Enabled {
		return nil
	}
	const p = "service.telemetry."
	switch u, err := url.Parse(t.Endpoint); {
	case t.Endpoint == "":
		add(p+"endpoint", "required when service.telemetry.enabled is true: the full OTLP/HTTP metrics URL, "+
			"e.g. http://otel-collector:4318/v1/metrics or https://otlp-gateway-prod-eu-west-2.grafana.net/otlp/v1/metrics")
	case err != nil || checkURL(t.Endpoint) != "":
		// The url format check says it.
	case u.Path == "" || u.Path == "/":
		add(p+"endpoint", "%s has no path: the metrics are posted to the URL as it is; append %s (%s)",
			u.Redacted(), MetricsPath, strings.TrimSuffix(u.Redacted(), "/")+MetricsPath)
	case strings.HasSuffix(u.Path, "/v1/traces") || strings.HasSuffix(u.Path, "/v1/logs"):
		add(p+"endpoint", "%s is an OTLP %s endpoint; the metrics push needs the metrics one: end the path in %s",
			u.Redacted(), u.Path[strings.LastIndex(u.Path, "/")+1:], MetricsPath)
	case !strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), MetricsPath):
		warnings = append(warnings, fmt.Sprintf("service.telemetry.endpoint %s does not end in %s: the metrics are posted to it as it is. "+
			"That is right for a receiver on a custom path; if it is a base URL (such as Grafana Cloud's .../otlp), append %s",
			u.Redacted(), MetricsPath, MetricsPath))
	}
	switch t.Auth {
	case "basic":
		a := c.TelemetryBasicAuth()
		if a.User == "" || a.TokenFrom == "" {
			add(p+"auth", "basic needs a user and a token, and neither service.telemetry nor sink.loki has %s: "+
				"set service.telemetry.basic_auth_user and basic_auth_token_file (on Grafana Cloud the OTLP instance id and a token with metrics:write), "+
				"or auth: none", missing(a))
		} else if w := a.FallbackWarning(); w != "" {
			warnings = append(warnings, w)
			if u, err := url.Parse(t.Endpoint); err == nil && strings.HasPrefix(a.TokenFrom, "sink.loki.") && u.Scheme == "http" && !loopback(u.Hostname()) {
				add(p+"endpoint", "%s is plain http to another host, and the push would send %s (Loki's token) there in clear text: "+
					"use https, or set service.telemetry.basic_auth_token_file for this endpoint, or auth: none", u.Redacted(), a.TokenFrom)
			}
		}
	case "none":
		for _, k := range []struct{ key, v string }{{"basic_auth_user", t.BasicAuthUser}, {"basic_auth_token", t.BasicAuthToken},
			{"basic_auth_token_file", t.BasicAuthTokenFile}} {
			if k.v != "" {
				add(p+k.key, "set, but service.telemetry.auth is none: no Authorization header is sent; set auth: basic or remove it")
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(t.Headers)) {
		canon := http.CanonicalHeaderKey(k)
		switch {
		case canon == "Content-Type" || canon == "Content-Encoding":
			add(p+"headers."+k, "set by the OTLP exporter (application/x-protobuf); it may not be overridden")
		case canon == "Authorization" && t.Auth == "basic":
			add(p+"headers."+k, "set by sf2loki from the basic-auth user and token with auth basic; set auth: none to send your own")
		case strings.ContainsFunc(t.Headers[k], func(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f }):
			add(p+"headers."+k, "the value holds a control character (a line break?); a header value is one line")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(t.ResourceAttributes)) {
		if strings.TrimSpace(k) == "" {
			add(p+"resource_attributes", "an attribute has a blank name")
		}
	}
	return warnings
}

// missing names what basic auth lacks: a user, a token, or both.
func missing(a TelemetryAuth) string {
	var lack []string
	if a.User == "" {
		lack = append(lack, "a user")
	}
	if a.TokenFrom == "" {
		lack = append(lack, "a token")
	}
	return strings.Join(lack, " or ")
}

// takeResourceAttributes removes service.telemetry.resource_attributes from
// raw and returns it as written: the decoder would split a dotted attribute
// name (deployment.environment) into nested keys and lower its case, and
// both are meaningful to OpenTelemetry. An environment entry
// (SF2LOKI_SERVICE__TELEMETRY__RESOURCE_ATTRIBUTES__<NAME>) is in raw by
// then, its name in lower case.
func takeResourceAttributes(raw map[string]any) (map[string]string, []Problem) {
	const path = "service.telemetry.resource_attributes"
	svc, _ := raw["service"].(map[string]any)
	tel, _ := svc["telemetry"].(map[string]any)
	v, ok := tel["resource_attributes"]
	if !ok {
		return nil, nil
	}
	delete(tel, "resource_attributes")
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, []Problem{{Path: path, Message: fmt.Sprintf("must be a mapping of attribute name to text, not %s", shapeOf(v))}}
	}
	out := make(map[string]string, len(m))
	var problems []Problem
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch e := m[k].(type) {
		case map[string]any, []any:
			problems = append(problems, Problem{Path: path + "." + k, Message: fmt.Sprintf("must be text, not %s; write a dotted name on one key (deployment.environment: prod)", shapeOf(e))})
		case nil:
			out[k] = ""
		default:
			out[k] = fmt.Sprint(e)
		}
	}
	return out, problems
}
