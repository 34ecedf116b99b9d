package telemetry

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/sf2loki/sf2loki/internal/adapters/lograte"
	"github.com/sf2loki/sf2loki/internal/buildinfo"
)

// Bounds of the OTLP metrics push: one request (retries of a 429 or 503
// included) and the final push at a graceful stop (PushFlushTimeout). Neither holds the
// daemon: the pushes run on the reader's own goroutine.
const (
	pushRequestTimeout = 10 * time.Second
	pushExportTimeout  = 30 * time.Second
	PushFlushTimeout   = 5 * time.Second
)

// pushWarnEvery is the least time between two WARN lines of failed pushes.
const pushWarnEvery = time.Minute

// metricsPush is the OTLP/HTTP push of service.telemetry: a periodic
// reader beside the Prometheus one, and the resource it describes.
type metricsPush struct {
	reader   *sdkmetric.PeriodicReader
	resource *resource.Resource
}

// newMetricsPush builds the push when service.telemetry.enabled, except in
// a dry run (nil otherwise). It opens no connection: a dead endpoint costs a WARN per
// failed interval, never the start.
func newMetricsPush(s Settings, log *slog.Logger) (*metricsPush, error) {
	t := s.Push
	if !t.Enabled {
		return nil, nil
	}
	if s.DryRun {
		// A dry run leads alone (noop) and ships nothing: its gauges would
		// count a second leader on the dashboards.
		log.Info("dry run: the metrics push over OTLP (service.telemetry) is off; /metrics serves them")
		return nil, nil
	}
	headers, err := PushHeaders(t)
	if err != nil {
		return nil, err
	}
	if w := t.BasicAuth.FallbackWarning; w != "" && t.Basic {
		log.Warn(w)
	}
	timeout := min(t.Interval, pushExportTimeout)
	// A 429, 502, 503 or 504 is tried again after its Retry-After (at
	// least a growing backoff from 1s) within the export's bound; any other
	// refusal (400, 401, 413) waits for the next interval.
	exp, err := otlpmetrichttp.New(context.Background(), otlpmetrichttp.WithEndpointURL(t.Endpoint),
		otlpmetrichttp.WithHeaders(headers), otlpmetrichttp.WithTimeout(pushRequestTimeout),
		otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: true, InitialInterval: time.Second, MaxInterval: 10 * time.Second, MaxElapsedTime: timeout}))
	if err != nil {
		return nil, fmt.Errorf("service.telemetry.endpoint %s: %w", ShownURL(t.Endpoint), err)
	}
	reader := sdkmetric.NewPeriodicReader(&pushExporter{Exporter: exp, log: log, endpoint: ShownURL(t.Endpoint),
		warn: lograte.Limiter{Every: pushWarnEvery}},
		sdkmetric.WithInterval(t.Interval), sdkmetric.WithTimeout(timeout))
	log.Info("pushing metrics over OTLP/HTTP", "endpoint", ShownURL(t.Endpoint), "interval", t.Interval.String(), "auth", authName(t.Basic))
	return &metricsPush{reader: reader, resource: pushResource(t)}, nil
}

// pushResource is service.name (telemetry.service_name, sf2loki by
// default), service.version, service.instance.id (the host name) and
// service.telemetry.resource_attributes, which replace those.
func pushResource(t Push) *resource.Resource {
	attrs := map[string]string{
		"service.name":    cmp.Or(t.ServiceName, "sf2loki"),
		"service.version": buildinfo.Version(),
	}
	// The process, not the host: two replicas on one host (the README's
	// pair, make demo) must not write the same series.
	attrs["service.instance.id"] = buildinfo.Instance()
	maps.Copy(attrs, t.ResourceAttributes)
	kv := make([]attribute.KeyValue, 0, len(attrs))
	for k, v := range attrs {
		kv = append(kv, attribute.String(k, v))
	}
	return resource.NewSchemaless(kv...)
}

// PushHeaders are the headers of every push: service.telemetry.headers
// and, with auth basic, Authorization: Basic from the user and token
// (service.telemetry's own keys, else sink.loki's), the token read from
// its file when that is how it is given.
func PushHeaders(t Push) (map[string]string, error) {
	headers := withUserAgent(t.Headers)
	if !t.Basic {
		return headers, nil
	}
	a := t.BasicAuth
	token := strings.TrimSpace(a.Token)
	if token == "" && a.TokenFile != "" {
		b, err := os.ReadFile(a.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (the daemon's user must be able to read it)", a.TokenFrom, err)
		}
		token = strings.TrimSpace(string(b))
		if token == "" {
			return nil, fmt.Errorf("%s %s is empty: a blank token is a missing token", a.TokenFrom, a.TokenFile)
		}
	}
	if a.User == "" || token == "" {
		return nil, fmt.Errorf("service.telemetry.auth is basic but no user or token was found; set service.telemetry.basic_auth_user and basic_auth_token_file, or auth: none")
	}
	headers["Authorization"] = "Basic " + BasicCredentials(a.User, token)
	return headers, nil
}

// authName is the push's auth as the configuration names it.
func authName(basic bool) string {
	if basic {
		return "basic"
	}
	return "none"
}

// withUserAgent is a copy of headers with User-Agent: sf2loki/<version>,
// unless they set one.
func withUserAgent(headers map[string]string) map[string]string {
	out := maps.Clone(headers)
	if out == nil {
		out = map[string]string{}
	}
	for k := range out {
		if http.CanonicalHeaderKey(k) == "User-Agent" {
			return out
		}
	}
	out["User-Agent"] = buildinfo.UserAgent()
	return out
}

// BasicCredentials is the base64 of user:token, as an Authorization: Basic
// header carries it (the redaction of secrets in logs masks it too).
func BasicCredentials(user, token string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + token))
}

// ShownURL is u without a password.
func ShownURL(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Redacted()
	}
	return u
}

// pushExporter logs a failed push (WARN, at most one per pushWarnEvery,
// counting the ones held back) and says when pushes succeed again. It
// reports no error to the reader: the SDK's global handler would print
// each one again, unlimited, on stderr.
type pushExporter struct {
	sdkmetric.Exporter
	log      *slog.Logger
	endpoint string
	warn     lograte.Limiter
	failing  atomic.Bool
}

func (e *pushExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	if err := e.Exporter.Export(ctx, rm); err != nil {
		e.failing.Store(true)
		e.warn.Log(e.log, slog.LevelWarn, time.Now(), "push",
			"the metrics push over OTLP failed; the next interval tries again (/metrics is not affected)",
			"endpoint", e.endpoint, "error", err.Error())
		return nil
	}
	if e.failing.CompareAndSwap(true, false) {
		e.log.Info("the metrics push over OTLP succeeds again", "endpoint", e.endpoint)
	}
	return nil
}
