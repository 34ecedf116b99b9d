package integration

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// TestSalesforceOrgEndToEnd runs one daemon against one strict org, as a
// new user would configure it: JWT bearer on a My Domain-style login_url,
// EventLogFile with interval auto (API published Hourly and Daily, Login
// Daily only), and polling of LoginEvent (a big object), LoginHistory and
// SetupAuditTrail, into VictoriaLogs. The org revokes the first token (a
// re-auth), answers REQUEST_LIMIT_EXCEEDED once (the throttle gate), and
// later refuses every grant for a while (a revoked app). Every row arrives
// exactly once, every duplicate would be byte-identical, and each event is
// said in the log.
func TestSalesforceOrgEndToEnd(t *testing.T) {
	testenv.Long(t, "a whole org end to end")
	logs := testenv.StartLogs(t)
	key, keyPEM := testenv.RSAKey(t)
	org := &fakesf.Org{Grants: &fakesf.Grants{Key: &key.PublicKey, ClientID: "ck", Username: "integration@example.com"}, Revoke: 1, Throttle: 1}
	now := time.Now().UTC()
	base := now.Add(-20 * time.Minute).Truncate(time.Second)
	for i := range 50 {
		org.AddTo("LoginEvent", "EventDate", fmt.Sprintf("3LE%05d", i), base.Add(time.Duration(i)*time.Second))
		org.AddTo("LoginHistory", "LoginTime", fmt.Sprintf("0Ya%05d", i), base.Add(time.Duration(i)*time.Second+123*time.Millisecond))
	}
	for i := range 30 {
		org.AddTo("SetupAuditTrail", "CreatedDate", fmt.Sprintf("0Ym%05d", i), base.Add(time.Duration(i)*time.Minute/2))
	}
	// A Shield org publishes API both Hourly and Daily (yesterday's Daily
	// file beside yesterday's Hourly ones); Login only Daily.
	elf := &fakesf.ELFOrg{}
	yesterday, hour := now.Truncate(24*time.Hour).Add(-24*time.Hour), now.Truncate(time.Hour)
	dailyMade := yesterday.Add(25 * time.Hour) // the Daily files are made after the day ends
	if dailyMade.After(now.Add(-30 * time.Minute)) {
		dailyMade = now.Add(-30 * time.Minute)
	}
	// Its Hourly files began long ago (this one is older than the lookback),
	// so yesterday, whose first Hourly file is of 10:00, is not the day
	// they began (which would be read from its Daily file).
	elf.AddFile(fakesf.ELFFile{ID: "0ATh-old", EventType: "API", Interval: "Hourly", LogDate: yesterday.Add(-5 * 24 * time.Hour),
		CreatedDate: yesterday.Add(-5*24*time.Hour + time.Hour), Sequence: 1, Body: elfBody("h-old", 1)})
	elf.AddFile(fakesf.ELFFile{ID: "0ATh0", EventType: "API", Interval: "Hourly", LogDate: yesterday.Add(10 * time.Hour),
		CreatedDate: yesterday.Add(11 * time.Hour), Sequence: 1, Body: elfBody("h0", 100)})
	elf.AddFile(fakesf.ELFFile{ID: "0ATh1", EventType: "API", Interval: "Hourly", LogDate: hour.Add(-2 * time.Hour),
		CreatedDate: now.Add(-70 * time.Minute), Sequence: 1, Body: elfBody("h1", 100)})
	elf.AddFile(fakesf.ELFFile{ID: "0ATh2", EventType: "API", Interval: "Hourly", LogDate: hour.Add(-time.Hour),
		CreatedDate: now.Add(-10 * time.Minute), Sequence: 1, Body: elfBody("h2", 100)})
	elf.AddFile(fakesf.ELFFile{ID: "0ATd1", EventType: "API", Interval: "Daily", LogDate: yesterday,
		CreatedDate: dailyMade, Body: elfBody("d-api", 100)})
	elf.AddFile(fakesf.ELFFile{ID: "0ATd2", EventType: "Login", Interval: "Daily", LogDate: yesterday,
		CreatedDate: dailyMade, Body: strings.ReplaceAll(elfBody("d-login", 100), "API,", "Login,")})
	// One org: EventLogFile requests to its part, the rest (tokens, the
	// polled objects) to the other.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/sobjects/EventLogFile/") || strings.Contains(r.URL.Query().Get("q"), "FROM EventLogFile") {
			elf.ServeHTTP(w, r)
			return
		}
		org.ServeHTTP(w, r)
	}))
	defer srv.Close()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`state: {file: {path: %s/state.json}}
salesforce: {auth_mode: jwt_bearer, login_url: %q, client_id: ck, username: integration@example.com, private_key_file: %s}
sources:
  allow_overlap: true # every login source at once: this org tests each one's fidelity
  eventlog_objects:
    objects:
      - {name: LoginEvent, poll_interval: 10s}
      - {name: LoginHistory, timestamp_field: LoginTime, poll_interval: 10s}
      - {name: SetupAuditTrail, timestamp_field: CreatedDate, poll_interval: 10s}
  eventlogfile: {event_types: [API, Login], poll_interval: 1m, settle_window: 0s, lookback: 72h}
sink: {loki: {url: %s, labels: {job: org}}}
`, dir, srv.URL, keyFile, logs.PushURL)
	want := map[string]struct {
		stream string
		n      int
		key    string
	}{
		"LoginEvent":      {`{source="eventlog_objects",event_type="LoginEvent",job="org"}`, 50, "Id"},
		"LoginHistory":    {`{source="eventlog_objects",event_type="LoginHistory",job="org"}`, 50, "Id"},
		"SetupAuditTrail": {`{source="eventlog_objects",event_type="SetupAuditTrail",job="org"}`, 30, "Id"},
		"API":             {`{source="eventlogfile",event_type="API",job="org"}`, 300, "REQUEST_ID"},
		"Login":           {`{source="eventlogfile",event_type="Login",job="org"}`, 100, "REQUEST_ID"},
	}
	check := func(d *daemon) {
		t.Helper()
		for name, w := range want {
			deadline := time.Now().Add(150 * time.Second)
			var ids map[string]int
			for {
				ids = waitStored(t, logs, w.stream, w.n, func(rec map[string]any) string { return fmt.Sprint(rec[w.key]) })
				if len(ids) >= w.n || time.Now().After(deadline) {
					break
				}
			}
			if len(ids) != w.n {
				t.Fatalf("%s: %d distinct rows stored, want %d; log:\n%s", name, len(ids), w.n, tail(d.out.String(), 40))
			}
			for id, n := range ids {
				if n != 1 {
					t.Errorf("%s %s stored %d times", name, id, n)
				}
				if strings.HasPrefix(id, "d-api") {
					t.Errorf("API row %s from the Daily file stored: API is published Hourly, so its Daily file must be skipped", id)
				}
			}
			duplicatesIdentical(t, logs, w.stream, func(rec map[string]any) string { return fmt.Sprint(rec[w.key]) })
		}
	}
	d := start(t, "org", cfg)
	check(d)
	if iv := elfIntervals(t, d); iv["API"] != "Hourly" || iv["Login"] != "Daily" {
		t.Errorf("eventlogfile_intervals %v, want API Hourly and Login Daily", iv)
	}
	d.signal(t, syscall.SIGTERM)
	d.waitExit(t, 30*time.Second)
	out := d.out.String()
	for _, line := range []string{"salesforce answered 401", "salesforce API limit reached (REQUEST_LIMIT_EXCEEDED)"} {
		if !strings.Contains(out, line) {
			t.Errorf("the log lacks %q", line)
		}
		t.Logf("log: %s", lineWith(out, line))
	}

	// A revoked app: the restarted daemon is refused, says so once, is not
	// ready, and ingests as soon as the grant works again.
	org.SetRefuse("the app was revoked")
	d2 := start(t, "org2", cfg)
	d2.waitReadyPrefix(t, 503, "leader: salesforce auth failing", 30*time.Second)
	code, body := d2.readyz()
	t.Logf("/readyz while refused: %d %s", code, body)
	if v := d2.metric(t, "sf2loki_salesforce_auth_failing"); v != 1 {
		t.Errorf("sf2loki_salesforce_auth_failing = %v", v)
	}
	org.SetRefuse("")
	org.AddTo("LoginHistory", "LoginTime", "0Ya90000", now.Add(time.Second))
	want["LoginHistory"] = struct {
		stream string
		n      int
		key    string
	}{want["LoginHistory"].stream, 51, "Id"}
	d2.waitReady(t, 200, "leader", 60*time.Second)
	check(d2)
	d2.signal(t, syscall.SIGTERM)
	d2.waitExit(t, 30*time.Second)
	out2 := d2.out.String()
	if n := strings.Count(out2, "salesforce refuses the credentials"); n != 1 || !strings.Contains(out2, "salesforce accepts the credentials again") {
		t.Errorf("%d refusal ERROR lines, want 1 and a recovery line:\n%s", n, tail(out2, 30))
	}
	t.Logf("log: %s", lineWith(out2, "salesforce refuses the credentials"))
	t.Logf("log: %s", lineWith(out2, "salesforce accepts the credentials again"))
}

// lineWith returns the first log line containing s.
func lineWith(out, s string) string {
	for l := range strings.Lines(out) {
		if strings.Contains(l, s) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
