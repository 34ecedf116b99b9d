package app

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/telemetry"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// exposition scrapes the telemetry's /metrics.
func exposition(t *testing.T, tel *telemetry.Recorder) string {
	t.Helper()
	rec := httptest.NewRecorder()
	tel.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// The limit gauges show each shard's limits where the shard is led, with
// its shard label, and nothing for a shard this replica does not lead.
func TestOrgLimitGaugesFollowLeadership(t *testing.T) {
	tel, cleanup, err := telemetry.New(t.Context(), TelemetrySettings(config.Defaults()), quiet(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	a := tel.Shard("a", func() bool { return true }, func() string { return "" })
	b := tel.Shard("b", func() bool { return true }, func() string { return "" })
	a.SetLeader(true, 3)
	b.SetLeader(false, 0)
	tel.SetSalesforceLimits("a", map[string]salesforce.Limit{"DailyApiRequests": {Max: 15000, Remaining: 14998}, "DataStorageMB": {Max: 5, Remaining: 4}})
	tel.SetSalesforceLimits("b", map[string]salesforce.Limit{"DailyApiRequests": {Max: 100, Remaining: 1}})
	out := exposition(t, tel)
	for _, want := range []string{
		`sf2loki_salesforce_limit_max{limit="DailyApiRequests",shard="a"} 15000`,
		`sf2loki_salesforce_limit_remaining{limit="DailyApiRequests",shard="a"} 14998`,
		`sf2loki_salesforce_limit_remaining{limit="DataStorageMB",shard="a"} 4`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in\n%s", want, out)
		}
	}
	if strings.Contains(out, `shard="b"} 1`) || strings.Contains(out, `limit_max{limit="DailyApiRequests",shard="b"}`) {
		t.Errorf("a shard led elsewhere shows limits:\n%s", out)
	}
	tel.SetSalesforceLimits("a", nil)
	if out := exposition(t, tel); strings.Contains(out, "sf2loki_salesforce_limit_max{") {
		t.Errorf("limits shown after the poller stopped:\n%s", out)
	}
}

// The single-org form has no shard label.
func TestOrgLimitGaugesWithoutOrgs(t *testing.T) {
	tel, cleanup, err := telemetry.New(t.Context(), TelemetrySettings(config.Defaults()), quiet(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	tel.Shard("", func() bool { return true }, func() string { return "" }).SetLeader(true, 1)
	tel.SetSalesforceLimits("", map[string]salesforce.Limit{"DailyApiRequests": {Max: 15000, Remaining: 14998}})
	if out := exposition(t, tel); !strings.Contains(out, `sf2loki_salesforce_limit_remaining{limit="DailyApiRequests"} 14998`) {
		t.Fatalf("no unlabelled limit in\n%s", out)
	}
}

// The poller reads the org's limits every poll_interval into the gauges,
// warns once while they cannot be read, and clears them when it stops.
func TestOrgLimitsPoller(t *testing.T) {
	lim := fakesf.DefaultLimits()
	lim.SetForbidden(true)
	srv := httptest.NewServer(&fakesf.ApexOrg{Limits: lim})
	defer srv.Close()
	auth, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x"})
	if err != nil {
		t.Fatal(err)
	}
	tel, cleanup, err := telemetry.New(t.Context(), TelemetrySettings(config.Defaults()), quiet(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	cfg := config.Defaults()
	cfg.ShardName = "prod"
	cfg.Salesforce.Limits.PollInterval = 10 * time.Millisecond
	var logs bytes.Buffer
	poll := OrgLimitsPoller(cfg, auth, clock.New(), slog.New(slog.NewTextHandler(&logs, nil)), tel)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); poll(ctx) }()
	waitUntil := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 5s", what)
			}
		}
	}
	waitUntil("three failed reads", func() bool { return lim.Requests() >= 3 })
	if n := strings.Count(logs.String(), "cannot read the org's limits"); n != 1 || tel.SalesforceLimits("prod") != nil {
		t.Fatalf("%d WARN lines for the failing reads, want 1:\n%s", n, logs.String())
	}
	lim.SetForbidden(false)
	waitUntil("limits", func() bool {
		return tel.SalesforceLimits("prod")["DailyApiRequests"] == salesforce.Limit{Max: 15000, Remaining: 14998}
	})
	if !strings.Contains(logs.String(), "the org's limits are read again") {
		t.Fatalf("the recovery is not logged:\n%s", logs.String())
	}
	cancel()
	<-done
	if l := tel.SalesforceLimits("prod"); l != nil {
		t.Fatalf("limits kept after the poller stopped: %v", l)
	}
	if !strings.Contains(exposition(t, tel), "sf2loki_salesforce_limits_poll_errors_total") {
		t.Fatal("no failed read counted")
	}
	cfg.Salesforce.Limits.Enabled = false
	if OrgLimitsPoller(cfg, auth, clock.New(), quiet(), tel) != nil {
		t.Fatal("a poller although salesforce.limits.enabled is false")
	}
	cfg.Salesforce.Limits.Enabled = true
	if OrgLimitsPoller(cfg, nil, clock.New(), quiet(), tel) != nil {
		t.Fatal("a poller without a Salesforce source")
	}
}
