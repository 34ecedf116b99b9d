package testenv

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sf2loki/sf2loki/internal/config"
)

// OTLPReceiver is a strict OTLP/HTTP metrics receiver, as the OTLP
// specification's OTLP/HTTP section describes one: it takes only a POST of
// an application/x-protobuf ExportMetricsServiceRequest (gzip or not) to its
// path, and answers 200 with an ExportMetricsServiceResponse, or what
// answer says, with a google.rpc.Status body for a 4xx or 5xx. Anything
// else fails the test.
type OTLPReceiver struct {
	*httptest.Server
	t    *testing.T
	path string
	// answer gives the status and headers of the n-th request (from 1);
	// nil: 200.
	answer func(n int) (int, http.Header)
	// EchoAuth puts the request's Authorization header in an error's
	// message, as some proxies do.
	EchoAuth bool

	mu   sync.Mutex
	got  []OTLPRequest
	seen chan struct{}
}

// OTLPRequest is one request the receiver took: when, its headers, its body.
type OTLPRequest struct {
	At     time.Time
	Header http.Header
	Req    *colmetricpb.ExportMetricsServiceRequest
}

// NewOTLPReceiver starts a receiver for path, stopped when the test ends;
// answer may be nil.
func NewOTLPReceiver(t *testing.T, path string, answer func(n int) (int, http.Header)) *OTLPReceiver {
	r := &OTLPReceiver{t: t, path: path, answer: answer, seen: make(chan struct{}, 1000)}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

// URL is where to push to.
func (r *OTLPReceiver) URL() string { return r.Server.URL + r.path }

func (r *OTLPReceiver) serve(w http.ResponseWriter, req *http.Request) {
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
	r.got = append(r.got, OTLPRequest{At: time.Now(), Header: req.Header.Clone(), Req: m})
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
		if r.EchoAuth {
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

// Requests are the requests taken so far.
func (r *OTLPReceiver) Requests() []OTLPRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]OTLPRequest(nil), r.got...)
}

// WaitFor waits for a request holding a metric named name.
func (r *OTLPReceiver) WaitFor(name string, within time.Duration) OTLPRequest {
	r.t.Helper()
	deadline := time.After(within)
	for {
		for _, q := range r.Requests() {
			if FindMetric(q.Req, name) != nil {
				return q
			}
		}
		select {
		case <-r.seen:
		case <-deadline:
			r.t.Fatalf("no push with %s arrived within %s (%d requests)", name, within, len(r.Requests()))
		}
	}
}

// FindMetric is the metric named name in req, or nil.
func FindMetric(req *colmetricpb.ExportMetricsServiceRequest, name string) *metricpb.Metric {
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

// ResourceAttrs are the resource attributes of req.
func ResourceAttrs(req *colmetricpb.ExportMetricsServiceRequest) map[string]string {
	out := map[string]string{}
	for _, rm := range req.GetResourceMetrics() {
		for _, kv := range rm.GetResource().GetAttributes() {
			out[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
	}
	return out
}

// PushConfig loads a configuration pushing to endpoint with basic auth
// from a token file, a header, resource attributes and extra YAML.
func PushConfig(t *testing.T, endpoint, interval, extra string) *config.Config {
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
