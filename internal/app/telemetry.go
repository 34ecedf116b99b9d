package app

import (
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/telemetry"
)

// TelemetrySettings maps the configuration onto what internal/telemetry
// takes: the traces' exporter (telemetry), the metrics push
// (service.telemetry, with the basic-auth pair resolved: its own keys,
// else sink.loki's) and whether this is a dry run.
func TelemetrySettings(cfg *config.Config) telemetry.Settings {
	t := cfg.Service.Telemetry
	a := cfg.TelemetryBasicAuth()
	return telemetry.Settings{
		ServiceName:    cfg.Telemetry.ServiceName,
		TracesEndpoint: cfg.Telemetry.OTLPEndpoint,
		TracesHeaders:  cfg.Telemetry.Headers,
		DryRun:         cfg.Sink.Stdout.Enabled,
		Push: telemetry.Push{
			Enabled:  t.Enabled,
			Endpoint: t.Endpoint,
			Interval: t.ExportInterval,
			Headers:  t.Headers,
			Basic:    t.Auth == "basic",
			BasicAuth: telemetry.BasicAuth{User: a.User, Token: a.Token, TokenFile: a.TokenFile, TokenFrom: a.TokenFrom,
				FallbackWarning: a.FallbackWarning()},
			ServiceName:        cfg.Telemetry.ServiceName,
			ResourceAttributes: t.ResourceAttributes,
		},
	}
}
