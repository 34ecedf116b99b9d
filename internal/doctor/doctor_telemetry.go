package doctor

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/telemetry"
)

// checkTelemetry posts an empty ExportMetricsServiceRequest to
// service.telemetry.endpoint with the push's headers: a receiver accepts it
// as a no-op, so it proves the URL and the credentials without sending a
// metric.
func checkTelemetry(ctx context.Context, cfg *config.Config) Check {
	t := cfg.Service.Telemetry
	if !t.Enabled {
		return Check{"telemetry", Skip, "service.telemetry.enabled is false"}
	}
	endpoint := telemetry.ShownURL(t.Endpoint)
	headers, err := telemetry.PushHeaders(app.TelemetrySettings(cfg).Push)
	if err != nil {
		return Check{"telemetry", Fail, err.Error()}
	}
	body, err := proto.Marshal(&colmetricpb.ExportMetricsServiceRequest{})
	if err != nil {
		return Check{"telemetry", Fail, err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.Endpoint, bytes.NewReader(body))
	if err != nil {
		return Check{"telemetry", Fail, fmt.Sprintf("service.telemetry.endpoint %s: %v", endpoint, err)}
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Check{"telemetry", Fail, fmt.Sprintf("POST %s failed: %v (check the host and that the receiver listens for OTLP/HTTP)", endpoint, err)}
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	text := strings.TrimSpace(string(answer))
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		hint := "check service.telemetry.basic_auth_user and basic_auth_token"
		if w := cfg.TelemetryBasicAuth().FallbackWarning(); w != "" && t.Auth == "basic" {
			hint = "the user or token is sink.loki's: on Grafana Cloud set service.telemetry.basic_auth_user to the OTLP instance id " +
				"(not the Loki user) and basic_auth_token_file to a token with metrics:write"
		}
		return Check{"telemetry", Fail, fmt.Sprintf("%s answered %d %q to an empty OTLP metrics export: %s", endpoint, resp.StatusCode, text, hint)}
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed:
		return Check{"telemetry", Fail, fmt.Sprintf("%s answered %d %q: not an OTLP/HTTP metrics endpoint; the URL should end in %s", endpoint, resp.StatusCode, text, config.MetricsPath)}
	case resp.StatusCode/100 != 2:
		return Check{"telemetry", Fail, fmt.Sprintf("%s answered %d %q to an empty OTLP metrics export", endpoint, resp.StatusCode, text)}
	}
	return Check{"telemetry", Pass, fmt.Sprintf("%s accepted an empty OTLP metrics export (%d)", endpoint, resp.StatusCode)}
}
