package doctor

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakepubsub"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

func TestDoctorApexLogAndTraceFlags(t *testing.T) {
	org := &fakesf.ApexOrg{Limits: fakesf.DefaultLimits()}
	srv := httptest.NewServer(org)
	defer srv.Close()
	loki := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer loki.Close()
	dir := t.TempDir()
	cfg := func(sources string) string {
		return testenv.WriteConfig(t, fmt.Sprintf(`state: {file: {path: %s/s.json}}
salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: x}
sources: %s
sink: {loki: {url: %s/loki/api/v1/push}}
`, dir, srv.URL, sources, loki.URL))
	}
	apex := cfg("{apexlog: {enabled: true}}")
	r := Doctor(t.Context(), apex)
	if c := check(r, "apexlog"); c.Status != Pass {
		t.Fatalf("apexlog: %+v", c)
	}
	if tf := rows(r, "traceflags"); len(tf) != 1 || tf[0].Status != Warn || tf[0].Detail != "no active TraceFlag: Salesforce writes no debug logs; set one in Setup → Debug Logs" {
		t.Fatalf("traceflags without one: %+v", tf)
	}
	org.AddTraceFlag("7tf000000000001AAA", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if c := check(Doctor(t.Context(), apex), "traceflags"); c.Status != Pass {
		t.Fatalf("traceflags with an active one: %+v", c)
	}
	org.SetThrottle(1) // the listing meets the org's API limit
	r = Doctor(t.Context(), apex)
	if c := check(r, "apexlog"); c.Status != Fail || !strings.Contains(c.Detail, "REQUEST_LIMIT_EXCEEDED") || r.ExitCode != 1 {
		t.Fatalf("apexlog when the listing fails: %+v", c)
	}
	if c := check(r, "traceflags"); c.Status != Skip {
		t.Fatalf("traceflags after a failed apexlog check: %+v", c)
	}
	if r := Doctor(t.Context(), cfg("{synthetic: {rate: 1}}")); len(rows(r, "apexlog")) != 0 || len(rows(r, "traceflags")) != 0 {
		t.Fatalf("apexlog rows without the source: %+v", r.Checks)
	}
}

func TestDoctorLimits(t *testing.T) {
	lim := fakesf.DefaultLimits()
	srv := httptest.NewServer(&fakesf.ApexOrg{Limits: lim})
	defer srv.Close()
	dir := t.TempDir()
	cfg := func(enabled bool) string {
		return testenv.WriteConfig(t, fmt.Sprintf(`state: {file: {path: %s/s.json}}
salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: x, limits: {enabled: %v}}
`, dir, srv.URL, enabled))
	}
	limits := func(enabled bool) Check {
		t.Helper()
		rs := rows(Doctor(t.Context(), cfg(enabled)), "limits")
		if len(rs) != 1 {
			t.Fatalf("limits rows %+v", rs)
		}
		return rs[0]
	}
	if c := limits(true); c.Status != Pass || c.Detail != "DailyApiRequests: 14998 of 15000 left (100.0%)" {
		t.Fatalf("plenty left: %+v", c)
	}
	lim.Set("DailyApiRequests", 15000, 2999)
	if c := limits(true); c.Status != Warn || !strings.Contains(c.Detail, "DailyApiRequests: 2999 of 15000 left (20.0%, under 20%)") {
		t.Fatalf("under 20%% left: %+v", c)
	}
	lim.Set("DailyApiRequests", 15000, 3000)
	if c := limits(false); c.Status != Pass {
		t.Fatalf("20%% left: %+v", c)
	}
	lim.SetForbidden(true)
	if c := limits(true); c.Status != Warn || !strings.Contains(c.Detail, "INSUFFICIENT_ACCESS") || !strings.Contains(c.Detail, "View Setup and Configuration") {
		t.Fatalf("forbidden, poller enabled: %+v", c)
	}
	if c := limits(false); c.Status != Skip {
		t.Fatalf("forbidden, poller disabled: %+v", c)
	}
	if r := Doctor(t.Context(), testenv.WriteConfig(t, fmt.Sprintf("state: {file: {path: %s/s.json}}\n", dir))); len(rows(r, "limits")) != 0 {
		t.Fatalf("a limits row without salesforce: %+v", r.Checks)
	}
}

// The apexlog key holds a position like eventlog_objects': state set and
// import refuse anything else, and the doctor warns about it.
func TestApexLogCheckpointIsChecked(t *testing.T) {
	if err := app.CheckCheckpoint("apexlog", `{"last_ts":"2026-03-01T00:00:00.000+0000","ids":["07L000000000001AAA"]}`); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"x", "", `{"ids":[]}`} {
		if err := app.CheckCheckpoint("apexlog", bad); err == nil || !strings.HasPrefix(err.Error(), "apexlog: ") {
			t.Errorf("apexlog = %q: %v", bad, err)
		}
	}
	if err := app.CheckCheckpoint("apexlog:x", `{"last_ts":"2026-03-01T00:00:00.000+0000","ids":[]}`); err == nil {
		t.Error("apexlog:x is not a key the source writes")
	}
}

// A Real-Time Event Monitoring stream whose streaming is off in Event
// Manager subscribes and delivers nothing: GetTopic passes, and the
// streaming row says what to switch on.
func TestDoctorEventManagerStreaming(t *testing.T) {
	ps := fakepubsub.Start(t)
	ps.AddTopic(fakepubsub.LoginTopic, fakepubsub.LoginEventStreamSchema)
	ps.AddTopic("/event/My_Event__e", fakepubsub.LoginEventStreamSchema)
	em := fakesf.NewEventManager("LoginEvent", "LoginEventStream")
	org := &fakesf.Org{EventManager: em}
	web := httptest.NewServer(org)
	defer web.Close()
	dir := t.TempDir()
	cfg := testenv.WriteConfig(t, fmt.Sprintf(`state: {file: {path: %s/s.json}}
salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: x, org_id: 00D000000000001}
sources: {pubsub: {topics: [/event/LoginEventStream, /event/My_Event__e], endpoint: %q, plaintext: true}}
sink: {loki: {url: %s/loki/api/v1/push}}
`, dir, web.URL, ps.Addr, web.URL))
	streaming := func() Check {
		t.Helper()
		r := Doctor(t.Context(), cfg)
		if c := check(r, "pubsub:/event/LoginEventStream"); c.Status != Pass {
			t.Fatalf("pubsub row: %+v", c)
		}
		if len(rows(r, "streaming:/event/My_Event__e")) != 0 {
			t.Fatalf("a platform event got a streaming row: %+v", r.Checks)
		}
		c := append(rows(r, "streaming"), rows(r, "streaming:/event/LoginEventStream")...)
		if len(c) != 1 {
			t.Fatalf("streaming rows: %+v", c)
		}
		return c[0]
	}
	if c := streaming(); c.Status != Pass || !strings.Contains(c.Detail, "streaming is on") {
		t.Fatalf("streaming on: %+v", c)
	}
	em.Set("LoginEventStream", false)
	if c := streaming(); c.Status != Warn ||
		c.Detail != "LoginEventStream: streaming is off in Setup > Event Manager, so the subscription delivers nothing; "+
			"turn on Enable Streaming for Login Event (LoginEventStream) in Setup > Event Manager, or remove the topic /event/LoginEventStream" {
		t.Fatalf("streaming off: %+v", c)
	}
	em.SetForbidden(true)
	if c := streaming(); c.Status != Skip || !strings.Contains(c.Detail, "Modify Metadata Through Metadata API Functions") ||
		!strings.Contains(c.Detail, "for LoginEventStream") {
		t.Fatalf("without the permission to read Event Manager: %+v", c)
	}
}
