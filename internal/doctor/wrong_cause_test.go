package doctor

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/telemetry"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// invalidDNS dials as Go's dialer fails for a name that does not exist:
// any *.invalid host (RFC 6761: it never resolves) without asking a DNS
// server; every other address is dialled.
func invalidDNS(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, _ := net.SplitHostPort(addr)
	if strings.HasSuffix(host, ".invalid") {
		return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}}
	}
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

// unresolvableOrg is a token endpoint that mints tokens for an instance
// whose name does not resolve, and the token source using it.
func unresolvableOrg(t *testing.T) *salesforce.Auth {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/services/oauth2/token" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"tok","instance_url":"https://nonexistent.invalid","token_type":"Bearer",` +
			`"id":"https://login.salesforce.com/id/00D000000000001EAA/005000000000001AAA"}`))
	}))
	t.Cleanup(srv.Close)
	auth, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x",
		HTTPClient: &http.Client{Transport: &http.Transport{DialContext: invalidDNS}}})
	if err != nil {
		t.Fatal(err)
	}
	return auth
}

// An instance that cannot be resolved is reported by the limits poller as
// what it is, with where to look, not as a missing permission.
func TestLimitsPollerNamesADNSFailure(t *testing.T) {
	auth := unresolvableOrg(t)
	tel, cleanup, err := telemetry.New(t.Context(), app.TelemetrySettings(config.Defaults()), quiet(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	cfg := config.Defaults()
	cfg.Salesforce.Limits.PollInterval = time.Hour
	var logs testenv.Buffer
	poll := app.OrgLimitsPoller(cfg, auth, clock.New(), slog.New(slog.NewTextHandler(&logs, nil)), tel)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); poll(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "level=WARN"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no WARN within 10s:\n%s", logs.String())
		}
	}
	cancel()
	<-done
	out := logs.String()
	for _, want := range []string{"cannot reach Salesforce to read the org's limits", "nonexistent.invalid does not resolve (DNS", "instance URL", "proxy"} {
		if !strings.Contains(out, want) {
			t.Errorf("the WARN does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "View Setup and Configuration") {
		t.Errorf("a DNS failure reported as a missing permission:\n%s", out)
	}
	// doctor's limits row says the same.
	cfg.Salesforce.AuthMode = sfrules.ClientCredentials
	rows := checkLimits(t.Context(), cfg, auth)
	if len(rows) != 1 || rows[0].Status != Warn || !strings.Contains(rows[0].Detail, "nonexistent.invalid does not resolve") ||
		strings.Contains(rows[0].Detail, "View Setup") {
		t.Fatalf("doctor's limits row: %+v", rows)
	}
}

// A 403 from the limits resource (INSUFFICIENT_ACCESS) still names the
// permission, and is not read as a network failure.
func TestLimitsProblemNamesThePermissionOn403(t *testing.T) {
	lim := fakesf.DefaultLimits()
	lim.SetForbidden(true)
	srv := httptest.NewServer(&fakesf.ApexOrg{Limits: lim})
	defer srv.Close()
	auth, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = salesforce.Limits(t.Context(), auth, "60.0")
	if got := app.LimitsProblem(err); !strings.Contains(got, "View Setup and Configuration") || strings.Contains(got, "reach") {
		t.Fatalf("a 403 (%v) reads: %q", err, got)
	}
}

// doctor's state row for an S3 store without any AWS credentials says so
// and what to set, not which permission to grant.
func TestDoctorSaysNoAWSCredentials(t *testing.T) {
	dir := t.TempDir()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
		"AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"} {
		t.Setenv(k, "")
	}
	t.Setenv("HOME", dir)
	t.Setenv("AWS_CONFIG_FILE", dir+"/config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", dir+"/credentials")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("a request reached S3 without credentials")
		w.WriteHeader(http.StatusForbidden)
	}))
	defer srv.Close()
	cfg := config.Defaults()
	cfg.State.Store = config.StoreS3
	cfg.State.S3 = config.S3Object{Bucket: "b", Key: "sf2loki/state.json", Region: "eu-west-1", EndpointURL: srv.URL}
	var cl clients
	defer cl.close()
	rows := checkState(t.Context(), cfg, &cl)
	if len(rows) != 1 || rows[0].Status != Fail {
		t.Fatalf("rows: %+v", rows)
	}
	d := rows[0].Detail
	if !strings.Contains(d, "no credentials found") || !strings.Contains(d, "AWS_ACCESS_KEY_ID") || strings.Contains(d, "grant") {
		t.Fatalf("the state row does not name the missing credentials (or asks for a permission): %s", d)
	}
}
