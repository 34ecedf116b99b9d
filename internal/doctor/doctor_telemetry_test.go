package doctor

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// TestDoctorTelemetryCheck: doctor posts an empty export with the push's
// headers and reports the receiver's answer, naming the Grafana Cloud trap
// when the credentials are sink.loki's; the basic-auth header a refusal
// echoes is redacted.
func TestDoctorTelemetryCheck(t *testing.T) {
	if c := checkTelemetry(t.Context(), config.Defaults()); c.Status != Skip || c.Name != "telemetry" {
		t.Fatalf("disabled: %+v", c)
	}
	rcv := testenv.NewOTLPReceiver(t, "/v1/metrics", nil)
	cfg := testenv.PushConfig(t, rcv.URL(), "1m", "")
	if c := checkTelemetry(t.Context(), cfg); c.Status != Pass || !strings.Contains(c.Detail, "accepted an empty OTLP metrics export (200)") {
		t.Fatalf("pass: %+v", c)
	}
	got := rcv.Requests()
	if len(got) != 1 || len(got[0].Req.GetResourceMetrics()) != 0 ||
		got[0].Header.Get("Authorization") != "Basic "+base64.StdEncoding.EncodeToString([]byte("987654:glc_s3cr3t-otlp-token")) || got[0].Header.Get("X-Team") != "secops" {
		t.Fatalf("requests %+v", got)
	}

	refusing := testenv.NewOTLPReceiver(t, "/otlp/v1/metrics", func(int) (int, http.Header) { return http.StatusUnauthorized, nil })
	refusing.EchoAuth = true
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
