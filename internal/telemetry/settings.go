package telemetry

import "time"

// Settings is what the telemetry takes from the configuration. The
// composition fills it in (app.TelemetrySettings), so this package reads
// no configuration of its own.
type Settings struct {
	// ServiceName is the traces' service.name (telemetry.service_name).
	ServiceName string
	// TracesEndpoint receives the spans over OTLP/HTTP, with TracesHeaders
	// (telemetry.otlp_endpoint and headers); blank: no trace export.
	TracesEndpoint string
	TracesHeaders  map[string]string
	// Push is the OTLP/HTTP metrics push (service.telemetry).
	Push Push
	// DryRun is a run printing to stdout (sink.stdout.enabled): it leads
	// alone and ships nothing, so the push stays off.
	DryRun bool
}

// Push is the metrics push over OTLP/HTTP (service.telemetry).
type Push struct {
	Enabled  bool
	Endpoint string // the full metrics URL, used as it is
	Interval time.Duration
	Headers  map[string]string
	// Basic sends Authorization: Basic from BasicAuth (auth: basic).
	Basic     bool
	BasicAuth BasicAuth
	// ServiceName is service.name (telemetry.service_name; sf2loki when
	// blank), which ResourceAttributes may replace.
	ServiceName        string
	ResourceAttributes map[string]string
}

// BasicAuth is the push's basic-auth pair as the configuration resolved it:
// the user, the token or the file holding it, the key the token came from
// (named in errors), and the warning that they are borrowed from the Loki
// sink ("" when not).
type BasicAuth struct {
	User, Token, TokenFile, TokenFrom string
	FallbackWarning                   string
}
