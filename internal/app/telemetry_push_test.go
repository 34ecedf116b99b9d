package app

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/telemetry"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// otlpReceiver is a strict OTLP/HTTP metrics receiver, as the OTLP
// specification's OTLP/HTTP section describes one: it takes only a POST of
// an application/x-protobuf ExportMetricsServiceRequest (gzip or not) to its
// path, and answers 200 with an ExportMetricsServiceResponse, or what
// answer says, with a google.rpc.Status body for a 4xx or 5xx. Anything
// else fails the test.
type otlpReceiver struct {
	*httptest.Server
	t    *testing.T
	path string
	// answer gives the status and headers of the n-th request (from 1);
	// nil: 200.
	answer func(n int) (int, http.Header)
	// echoAuth puts the request's Authorization header in an error's
	// message, as some proxies do.
	echoAuth bool

	mu   sync.Mutex
	got  []otlpRequest
	seen chan struct{}
}

type otlpRequest struct {
	at     time.Time
	header http.Header
	req    *colmetricpb.ExportMetricsServiceRequest
}

func newOTLPReceiver(t *testing.T, path string, answer func(n int) (int, http.Header)) *otlpReceiver {
	r := &otlpReceiver{t: t, path: path, answer: answer, seen: make(chan struct{}, 1000)}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *otlpReceiver) URL() string { return r.Server.URL + r.path }

func (r *otlpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	refuse := func(status int, format string, args ...any) {
		r.t.Errorf("OTLP receiver: "+format, args...)
		writeStatus(w, status, fmt.Sprintf(format, args...))
	}
	switch {
	case req.Method != http.MethodPost:
		refuse(http.StatusMethodNotAllowed, "%s, want POST", req.Method)
		return
	case req.URL.Path != r.path:
		refuse(http.StatusNotFound, "path %s, want %s", req.URL.Path, r.path)
		return
	case req.Header.Get("Content-Type") != "application/x-protobuf":
		refuse(http.StatusUnsupportedMediaType, "Content-Type %q, want application/x-protobuf", req.Header.Get("Content-Type"))
		return
	}
	var body io.Reader = req.Body
	switch enc := req.Header.Get("Content-Encoding"); enc {
	case "":
	case "gzip":
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			refuse(http.StatusBadRequest, "gzip: %v", err)
			return
		}
		body = zr
	default:
		refuse(http.StatusUnsupportedMediaType, "Content-Encoding %q", enc)
		return
	}
	b, err := io.ReadAll(body)
	if err != nil {
		refuse(http.StatusBadRequest, "reading the body: %v", err)
		return
	}
	m := &colmetricpb.ExportMetricsServiceRequest{}
	if err := proto.Unmarshal(b, m); err != nil {
		refuse(http.StatusBadRequest, "the body is not an ExportMetricsServiceRequest: %v", err)
		return
	}
	r.mu.Lock()
	r.got = append(r.got, otlpRequest{at: time.Now(), header: req.Header.Clone(), req: m})
	n := len(r.got)
	r.mu.Unlock()
	r.seen <- struct{}{}
	status, header := http.StatusOK, http.Header(nil)
	if r.answer != nil {
		status, header = r.answer(n)
	}
	for k, v := range header {
		w.Header()[k] = v
	}
	if status != http.StatusOK {
		msg := http.StatusText(status)
		if r.echoAuth {
			msg += ": refused " + req.Header.Get("Authorization")
		}
		writeStatus(w, status, msg)
		return
	}
	resp, _ := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

// writeStatus answers status with a google.rpc.Status (code 1, message 2)
// as the body, as OTLP/HTTP requires of a 4xx or 5xx.
func writeStatus(w http.ResponseWriter, status int, msg string) {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 3) // INVALID_ARGUMENT; the HTTP status is what counts
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, msg)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (r *otlpReceiver) requests() []otlpRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]otlpRequest(nil), r.got...)
}

// waitFor waits for a request holding a metric named name.
func (r *otlpReceiver) waitFor(name string, within time.Duration) otlpRequest {
	r.t.Helper()
	deadline := time.After(within)
	for {
		for _, q := range r.requests() {
			if findMetric(q.req, name) != nil {
				return q
			}
		}
		select {
		case <-r.seen:
		case <-deadline:
			r.t.Fatalf("no push with %s arrived within %s (%d requests)", name, within, len(r.requests()))
		}
	}
}

func findMetric(req *colmetricpb.ExportMetricsServiceRequest, name string) *metricpb.Metric {
	for _, rm := range req.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				if m.GetName() == name {
					return m
				}
			}
		}
	}
	return nil
}

func resourceAttrs(req *colmetricpb.ExportMetricsServiceRequest) map[string]string {
	out := map[string]string{}
	for _, rm := range req.GetResourceMetrics() {
		for _, kv := range rm.GetResource().GetAttributes() {
			out[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
	}
	return out
}

// pushConfig loads a configuration pushing to endpoint with basic auth
// from a token file, a header, resource attributes and extra YAML.
func pushConfig(t *testing.T, endpoint, interval, extra string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	token := filepath.Join(dir, "otlp-token")
	if err := os.WriteFile(token, []byte("  glc_s3cr3t-otlp-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sf2loki.yaml")
	yaml := fmt.Sprintf(`
service:
  telemetry:
    enabled: true
    endpoint: %s
    basic_auth_user: "987654"
    basic_auth_token_file: %s
    headers: {X-Team: secops}
    export_interval: %s
    resource_attributes: {deployment.environment: test, Team: SecOps}
%s`, endpoint, token, interval, extra)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestMetricsPushReachesAnOTLPReceiver: with service.telemetry the metrics
// of /metrics reach an OTLP/HTTP receiver at the configured path, with
// basic auth from the token file, the extra header and the resource
// attributes; counters keep their OTLP names (no _total) while /metrics
// is unchanged.
func TestMetricsPushReachesAnOTLPReceiver(t *testing.T) {
	rcv := newOTLPReceiver(t, "/otlp/v1/metrics", nil)
	cfg := pushConfig(t, rcv.URL(), "1s", "")
	log, out := capture()
	tel, cleanup, err := telemetry.New(t.Context(), cfg, redactLogger(log, cfg), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	tel.Observe(domain.Event{Kind: domain.EventAcquired, Holder: "r1", Epoch: 3})
	tel.Shard("", func() bool { return true }, func() string { return "" }).SetLeader(true, 3)

	q := rcv.waitFor("sf2loki_lease_transitions", 10*time.Second)
	if got, want := q.header.Get("Authorization"), "Basic "+base64.StdEncoding.EncodeToString([]byte("987654:glc_s3cr3t-otlp-token")); got != want {
		t.Errorf("Authorization %q, want %q", got, want)
	}
	if got := q.header.Get("X-Team"); got != "secops" {
		t.Errorf("X-Team %q", got)
	}
	attrs := resourceAttrs(q.req)
	for k, v := range map[string]string{"service.name": "sf2loki", "service.version": CurrentBuild().Version, "service.instance.id": HolderID(""),
		"deployment.environment": "test", "Team": "SecOps"} {
		if attrs[k] != v {
			t.Errorf("resource attribute %s = %q, want %q (all: %v)", k, attrs[k], v, attrs)
		}
	}
	sum := findMetric(q.req, "sf2loki_lease_transitions").GetSum()
	if sum == nil || !sum.GetIsMonotonic() || sum.GetAggregationTemporality() != metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
		t.Fatalf("sf2loki_lease_transitions is not a cumulative monotonic sum: %v", findMetric(q.req, "sf2loki_lease_transitions"))
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
	if g := findMetric(q.req, "sf2loki_leader").GetGauge(); g == nil || len(g.GetDataPoints()) != 1 || g.GetDataPoints()[0].GetAsInt() != 1 {
		t.Errorf("sf2loki_leader: %v", findMetric(q.req, "sf2loki_leader"))
	}
	for _, rm := range q.req.GetResourceMetrics() {
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
	rcv := newOTLPReceiver(t, "/v1/metrics", nil)
	cfg := pushConfig(t, rcv.URL(), "1h", "")
	tel, cleanup, err := telemetry.New(t.Context(), cfg, quiet(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tel.CheckpointUnreadable("synthetic")
	if n := len(rcv.requests()); n != 0 {
		t.Fatalf("%d pushes before the first hour", n)
	}
	start := time.Now()
	cleanup()
	if took := time.Since(start); took > telemetry.PushFlushTimeout {
		t.Errorf("the stop took %s", took)
	}
	got := rcv.requests()
	if len(got) != 1 || findMetric(got[0].req, "sf2loki_checkpoint_unreadable") == nil {
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
			rcv := newOTLPReceiver(t, "/v1/metrics", func(n int) (int, http.Header) {
				if n == 1 {
					return tc.status, http.Header{"Retry-After": {"1"}}
				}
				return http.StatusOK, nil
			})
			cfg := pushConfig(t, rcv.URL(), "1h", "")
			log, out := capture()
			tel, cleanup, err := telemetry.New(t.Context(), cfg, redactLogger(log, cfg), telemetry.Options{})
			if err != nil {
				t.Fatal(err)
			}
			tel.CheckpointUnreadable("synthetic")
			cleanup() // pushes the interval under way
			got := rcv.requests()
			if len(got) != tc.requests {
				t.Fatalf("%d requests, want %d", len(got), tc.requests)
			}
			if tc.requests == 2 {
				if gap := got[1].at.Sub(got[0].at); gap < 900*time.Millisecond {
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
	loaded := pushConfig(t, "http://"+ln.Addr().String()+"/v1/metrics", "1s", "")
	cfg := testConfig(config.CoordinateS3Lease)
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

// TestDoctorTelemetryCheck: doctor posts an empty export with the push's
// headers and reports the receiver's answer, naming the Grafana Cloud trap
// when the credentials are sink.loki's; the basic-auth header a refusal
// echoes is redacted.
func TestDoctorTelemetryCheck(t *testing.T) {
	if c := checkTelemetry(t.Context(), config.Defaults()); c.Status != Skip || c.Name != "telemetry" {
		t.Fatalf("disabled: %+v", c)
	}
	rcv := newOTLPReceiver(t, "/v1/metrics", nil)
	cfg := pushConfig(t, rcv.URL(), "1m", "")
	if c := checkTelemetry(t.Context(), cfg); c.Status != Pass || !strings.Contains(c.Detail, "accepted an empty OTLP metrics export (200)") {
		t.Fatalf("pass: %+v", c)
	}
	got := rcv.requests()
	if len(got) != 1 || len(got[0].req.GetResourceMetrics()) != 0 ||
		got[0].header.Get("Authorization") != "Basic "+base64.StdEncoding.EncodeToString([]byte("987654:glc_s3cr3t-otlp-token")) || got[0].header.Get("X-Team") != "secops" {
		t.Fatalf("requests %+v", got)
	}

	refusing := newOTLPReceiver(t, "/otlp/v1/metrics", func(int) (int, http.Header) { return http.StatusUnauthorized, nil })
	refusing.echoAuth = true
	dir := t.TempDir()
	path := filepath.Join(dir, "sf2loki.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(`
sink: {loki: {tenant_id: "123456", auth_token: s3cr3t-loki-token}}
service: {telemetry: {enabled: true, endpoint: %s, basic_auth_user: "42"}}
`, refusing.URL())), 0o600); err != nil {
		t.Fatal(err)
	}
	fallback, _, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	c := checkTelemetry(t.Context(), fallback)
	if c.Status != Fail || !strings.Contains(c.Detail, "answered 401") || !strings.Contains(c.Detail, "the user or token is sink.loki's") ||
		!strings.Contains(c.Detail, "OTLP instance id") {
		t.Fatalf("401: %+v", c)
	}
	// The whole doctor run shows the row, without a secret.
	r := Doctor(t.Context(), path)
	var row *Check
	for i := range r.Checks {
		if r.Checks[i].Name == "telemetry" {
			row = &r.Checks[i]
		}
	}
	creds := base64.StdEncoding.EncodeToString([]byte("42:s3cr3t-loki-token"))
	if row == nil || row.Status != Fail || !strings.Contains(row.Detail, "refused Basic [REDACTED]") ||
		strings.Contains(fmt.Sprint(r), "s3cr3t") || strings.Contains(fmt.Sprint(r), creds) {
		t.Fatalf("doctor: %+v", r)
	}
}

// TestMetricsPushWarnsOfTheLokiFallbackAtStart: basic auth borrowing
// sink.loki's credentials is logged at WARN when the daemon starts, naming
// the keys and the Grafana Cloud trap, without the token; the push then
// uses them.
func TestMetricsPushWarnsOfTheLokiFallbackAtStart(t *testing.T) {
	rcv := newOTLPReceiver(t, "/v1/metrics", nil)
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
	tel, cleanup, err := telemetry.New(t.Context(), cfg, redactLogger(log, cfg), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	warned := testenv.LogLines(out.String(), "level=WARN", "sink.loki.tenant_id (Loki's tenant, taken as the user) and sink.loki.auth_token", "instance id is not the Loki user")
	if len(warned) != 1 || strings.Contains(out.String(), "s3cr3t") {
		t.Errorf("want one WARN of the fallback:\n%s", out)
	}
	tel.CheckpointUnreadable("synthetic")
	cleanup()
	got := rcv.requests()
	if len(got) != 1 || got[0].header.Get("Authorization") != "Basic "+base64.StdEncoding.EncodeToString([]byte("123456:s3cr3t-loki-token")) {
		t.Fatalf("requests %+v", got)
	}
}

// TestADryRunDoesNotPush: a dry run (sink.stdout) leads alone and ships
// nothing, so it pushes no metrics that dashboards would count.
func TestADryRunDoesNotPush(t *testing.T) {
	rcv := newOTLPReceiver(t, "/v1/metrics", nil)
	cfg := pushConfig(t, rcv.URL(), "1s", "sink: {stdout: {enabled: true}}")
	tel, cleanup, err := telemetry.New(t.Context(), cfg, quiet(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tel.CheckpointUnreadable("synthetic")
	time.Sleep(1500 * time.Millisecond)
	cleanup()
	if n := len(rcv.requests()); n != 0 {
		t.Fatalf("a dry run pushed %d times", n)
	}
}

// check makes no request: with service.telemetry on, building and stopping
// the daemon's graph pushes nothing (it would carry the credentials).
func TestCheckDoesNotPushMetrics(t *testing.T) {
	rcv := newOTLPReceiver(t, "/v1/metrics", nil)
	dir := t.TempDir()
	path := filepath.Join(dir, "sf2loki.yaml")
	cfg := "state: {file: {path: " + filepath.Join(dir, "state.json") + "}}\n" +
		"sources: {synthetic: {rate: 1}}\nsink: {loki: {url: http://127.0.0.1:1/loki/api/v1/push, tenant_id: t, auth_token: s3cret-loki}}\n" +
		"service: {telemetry: {enabled: true, endpoint: " + rcv.URL() + ", export_interval: 1s}}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	root := NewRootCommand()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs([]string{"check", "--config", path})
	if err := root.Execute(); err != nil {
		t.Fatalf("check: %v\n%s", err, errb.String())
	}
	if n := len(rcv.requests()); n != 0 {
		t.Fatalf("check pushed %d metrics requests", n)
	}
}
