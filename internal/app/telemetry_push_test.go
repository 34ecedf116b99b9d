package app

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/sf2loki/sf2loki/internal/buildinfo"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/telemetry"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// TestMetricsPushReachesAnOTLPReceiver: with service.telemetry the metrics
// of /metrics reach an OTLP/HTTP receiver at the configured path, with
// basic auth from the token file, the extra header and the resource
// attributes; counters keep their OTLP names (no _total) while /metrics
// is unchanged.
func TestMetricsPushReachesAnOTLPReceiver(t *testing.T) {
	rcv := testenv.NewOTLPReceiver(t, "/otlp/v1/metrics", nil)
	cfg := testenv.PushConfig(t, rcv.URL(), "1s", "")
	log, out := capture()
	tel, cleanup, err := telemetry.New(t.Context(), TelemetrySettings(cfg), RedactLogger(log, cfg), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	tel.Observe(domain.Event{Kind: domain.EventAcquired, Holder: "r1", Epoch: 3})
	tel.Shard("", func() bool { return true }, func() string { return "" }).SetLeader(true, 3)

	q := rcv.WaitFor("sf2loki_lease_transitions", 10*time.Second)
	if got, want := q.Header.Get("Authorization"), "Basic "+base64.StdEncoding.EncodeToString([]byte("987654:glc_s3cr3t-otlp-token")); got != want {
		t.Errorf("Authorization %q, want %q", got, want)
	}
	if got := q.Header.Get("X-Team"); got != "secops" {
		t.Errorf("X-Team %q", got)
	}
	attrs := testenv.ResourceAttrs(q.Req)
	for k, v := range map[string]string{"service.name": "sf2loki", "service.version": buildinfo.Version(), "service.instance.id": HolderID(""),
		"deployment.environment": "test", "Team": "SecOps"} {
		if attrs[k] != v {
			t.Errorf("resource attribute %s = %q, want %q (all: %v)", k, attrs[k], v, attrs)
		}
	}
	sum := testenv.FindMetric(q.Req, "sf2loki_lease_transitions").GetSum()
	if sum == nil || !sum.GetIsMonotonic() || sum.GetAggregationTemporality() != metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
		t.Fatalf("sf2loki_lease_transitions is not a cumulative monotonic sum: %v", testenv.FindMetric(q.Req, "sf2loki_lease_transitions"))
	}
	acquired := false
	for _, dp := range sum.GetDataPoints() {
		for _, kv := range dp.GetAttributes() {
			if kv.GetKey() == "transition" && kv.GetValue().GetStringValue() == "acquired" && dp.GetAsInt() == 1 {
				acquired = true
			}
		}
	}
	if !acquired {
		t.Errorf("no transition=acquired point of 1: %v", sum.GetDataPoints())
	}
	if g := testenv.FindMetric(q.Req, "sf2loki_leader").GetGauge(); g == nil || len(g.GetDataPoints()) != 1 || g.GetDataPoints()[0].GetAsInt() != 1 {
		t.Errorf("sf2loki_leader: %v", testenv.FindMetric(q.Req, "sf2loki_leader"))
	}
	for _, rm := range q.Req.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				if !strings.HasPrefix(m.GetName(), "sf2loki_") || strings.HasSuffix(m.GetName(), "_total") {
					t.Errorf("pushed name %s: want sf2loki_*, without _total (OTLP names)", m.GetName())
				}
			}
		}
	}
	rec := httptest.NewRecorder()
	tel.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	metrics := rec.Body.String()
	if !strings.Contains(metrics, `sf2loki_lease_transitions_total{transition="acquired"} 1`) || !strings.Contains(metrics, "sf2loki_leader 1") ||
		strings.Contains(metrics, "target_info") || strings.Contains(metrics, "deployment") {
		t.Errorf("/metrics changed:\n%s", metrics)
	}
	if !strings.Contains(out.String(), "pushing metrics over OTLP/HTTP") || strings.Contains(out.String(), "s3cr3t") ||
		strings.Contains(out.String(), base64.StdEncoding.EncodeToString([]byte("987654:glc_s3cr3t-otlp-token"))) {
		t.Errorf("log:\n%s", out)
	}
}

// TestMetricsPushFlushesAtShutdown: the interval under way is pushed when
// the daemon stops, so the last minute's counts are not lost.
func TestMetricsPushFlushesAtShutdown(t *testing.T) {
	rcv := testenv.NewOTLPReceiver(t, "/v1/metrics", nil)
	cfg := testenv.PushConfig(t, rcv.URL(), "1h", "")
	tel, cleanup, err := telemetry.New(t.Context(), TelemetrySettings(cfg), quiet(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tel.CheckpointUnreadable("synthetic")
	if n := len(rcv.Requests()); n != 0 {
		t.Fatalf("%d pushes before the first hour", n)
	}
	start := time.Now()
	cleanup()
	if took := time.Since(start); took > telemetry.PushFlushTimeout {
		t.Errorf("the stop took %s", took)
	}
	got := rcv.Requests()
	if len(got) != 1 || testenv.FindMetric(got[0].Req, "sf2loki_checkpoint_unreadable") == nil {
		t.Fatalf("want one push with sf2loki_checkpoint_unreadable at the stop, got %d requests", len(got))
	}
}

// TestMetricsPushRetriesAsTheSpecSays: a 429 or 503 is tried again after
// its Retry-After; a 400 is not (it would fail the same way), and is
// logged at WARN without the token.
func TestMetricsPushRetriesAsTheSpecSays(t *testing.T) {
	for _, tc := range []struct {
		status   int
		requests int
		warn     bool
	}{
		{http.StatusServiceUnavailable, 2, false},
		{http.StatusTooManyRequests, 2, false},
		{http.StatusBadRequest, 1, true},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			rcv := testenv.NewOTLPReceiver(t, "/v1/metrics", func(n int) (int, http.Header) {
				if n == 1 {
					return tc.status, http.Header{"Retry-After": {"1"}}
				}
				return http.StatusOK, nil
			})
			cfg := testenv.PushConfig(t, rcv.URL(), "1h", "")
			log, out := capture()
			tel, cleanup, err := telemetry.New(t.Context(), TelemetrySettings(cfg), RedactLogger(log, cfg), telemetry.Options{})
			if err != nil {
				t.Fatal(err)
			}
			tel.CheckpointUnreadable("synthetic")
			cleanup() // pushes the interval under way
			got := rcv.Requests()
			if len(got) != tc.requests {
				t.Fatalf("%d requests, want %d", len(got), tc.requests)
			}
			if tc.requests == 2 {
				if gap := got[1].At.Sub(got[0].At); gap < 900*time.Millisecond {
					t.Errorf("tried again after %s, before Retry-After: 1", gap)
				}
			}
			warned := testenv.LogLines(out.String(), "level=WARN", "the metrics push over OTLP failed", "400")
			if tc.warn != (len(warned) == 1) || strings.Contains(out.String(), "s3cr3t") {
				t.Errorf("WARN lines %q, want one: %v\n%s", warned, tc.warn, out)
			}
		})
	}
}

// TestADeadOTLPEndpointHoldsNothing: an endpoint that accepts connections
// and never answers neither delays the start nor the leader's work nor the
// stop; /metrics goes on, and the failures are logged at WARN, rate-limited.
func TestADeadOTLPEndpointHoldsNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range held {
			_ = c.Close()
		}
		mu.Unlock()
	})
	loaded := testenv.PushConfig(t, "http://"+ln.Addr().String()+"/v1/metrics", "1s", "")
	cfg := testenv.Config(config.CoordinateS3Lease)
	cfg.Service.Telemetry = loaded.Service.Telemetry
	log, out := capture()
	lease, state := porttest.NewMemoryCAS("lease"), porttest.NewMemoryCAS("state")
	work := &counter{every: 20 * time.Millisecond}
	start := time.Now()
	d, cleanup, err := Build(t.Context(), cfg, Overrides{LeaseStore: lease, StateStore: state, Workload: work, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Build took %s", took)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	eventually(t, "the leader's commits", func() bool { return storedDoc(t, state)["pos"] >= "000003" })
	eventually(t, "a WARN of the failed push", func() bool {
		return len(testenv.LogLines(out.String(), "level=WARN", "the metrics push over OTLP failed")) > 0
	})
	time.Sleep(2500 * time.Millisecond) // two more intervals fail
	if code, body := get(t, d.Handler(), "/metrics"); code != 200 || !strings.Contains(body, "sf2loki_leader 1") {
		t.Errorf("/metrics %d:\n%s", code, body)
	}
	if n := len(testenv.LogLines(out.String(), "the metrics push over OTLP failed")); n != 1 {
		t.Errorf("%d WARN lines of failed pushes within a minute, want 1", n)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the stop")
	}
	start = time.Now()
	cleanup()
	if took := time.Since(start); took > telemetry.PushFlushTimeout+6*time.Second {
		t.Errorf("the cleanup took %s with a dead OTLP endpoint", took)
	}
	if strings.Contains(out.String(), "s3cr3t") {
		t.Errorf("the token is logged:\n%s", out)
	}
}

// TestMetricsPushWarnsOfTheLokiFallbackAtStart: basic auth borrowing
// sink.loki's credentials is logged at WARN when the daemon starts, naming
// the keys and the Grafana Cloud trap, without the token; the push then
// uses them.
func TestMetricsPushWarnsOfTheLokiFallbackAtStart(t *testing.T) {
	rcv := testenv.NewOTLPReceiver(t, "/v1/metrics", nil)
	path := filepath.Join(t.TempDir(), "sf2loki.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(`
sink: {loki: {tenant_id: "123456", auth_token: s3cr3t-loki-token}}
service: {telemetry: {enabled: true, endpoint: %s, export_interval: 1h}}
`, rcv.URL())), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	log, out := capture()
	tel, cleanup, err := telemetry.New(t.Context(), TelemetrySettings(cfg), RedactLogger(log, cfg), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	warned := testenv.LogLines(out.String(), "level=WARN", "sink.loki.tenant_id (Loki's tenant, taken as the user) and sink.loki.auth_token", "instance id is not the Loki user")
	if len(warned) != 1 || strings.Contains(out.String(), "s3cr3t") {
		t.Errorf("want one WARN of the fallback:\n%s", out)
	}
	tel.CheckpointUnreadable("synthetic")
	cleanup()
	got := rcv.Requests()
	if len(got) != 1 || got[0].Header.Get("Authorization") != "Basic "+base64.StdEncoding.EncodeToString([]byte("123456:s3cr3t-loki-token")) {
		t.Fatalf("requests %+v", got)
	}
}

// TestADryRunDoesNotPush: a dry run (sink.stdout) leads alone and ships
// nothing, so it pushes no metrics that dashboards would count.
func TestADryRunDoesNotPush(t *testing.T) {
	rcv := testenv.NewOTLPReceiver(t, "/v1/metrics", nil)
	cfg := testenv.PushConfig(t, rcv.URL(), "1s", "sink: {stdout: {enabled: true}}")
	tel, cleanup, err := telemetry.New(t.Context(), TelemetrySettings(cfg), quiet(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tel.CheckpointUnreadable("synthetic")
	time.Sleep(1500 * time.Millisecond)
	cleanup()
	if n := len(rcv.Requests()); n != 0 {
		t.Fatalf("a dry run pushed %d times", n)
	}
}
