package integration

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// TestSOQLSourceEndToEnd runs the daemon with sources.eventlog_objects
// against an in-process Salesforce org and a real VictoriaLogs: every row
// arrives once; after a restart the source resumes from the committed
// checkpoint and only the new rows arrive.
func TestSOQLSourceEndToEnd(t *testing.T) {
	logs := testenv.StartLogs(t)
	org := &fakesf.Org{}
	base := time.Now().Add(-30 * time.Minute).UTC().Truncate(time.Second)
	for i := range 300 {
		org.Add(fmt.Sprintf("0LE%05d", i), base.Add(time.Duration(i)*time.Second))
	}
	srv := httptest.NewServer(org)
	defer srv.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`state: {file: {path: %s/state.json}}
salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: s3cret}
sources: {eventlog_objects: {objects: [{name: LoginEvent, poll_interval: 10s}]}}
sink: {loki: {url: %s, labels: {job: soql}}}
`, dir, srv.URL, logs.PushURL)
	waitFor := func(n int) map[string]int {
		return waitStored(t, logs, `{source="eventlog_objects",event_type="LoginEvent",job="soql"}`, n, func(rec map[string]any) string {
			return fmt.Sprint(rec["Id"])
		})
	}
	d := start(t, "soql", cfg)
	if ids := waitFor(300); len(ids) != 300 {
		t.Fatalf("%d distinct rows stored, want 300", len(ids))
	}
	d.signal(t, syscall.SIGTERM)
	d.waitExit(t, 30*time.Second)

	org.Add("0LE90000", base.Add(400*time.Second))
	org.Add("0LE90001", base.Add(401*time.Second))
	d2 := start(t, "soql2", cfg)
	ids := waitFor(302)
	d2.signal(t, syscall.SIGTERM)
	d2.waitExit(t, 30*time.Second)
	dups := 0
	for id, n := range ids {
		if n != 1 {
			dups++
			t.Errorf("%s stored %d times", id, n)
		}
	}
	if len(ids) != 302 {
		t.Fatalf("%d distinct rows after the restart, want 302", len(ids))
	}
	t.Logf("302 rows stored once each across a restart (queries: %d)", len(org.Snapshot()))
}

// TestEventLogFileSourceEndToEnd runs the daemon with sources.eventlogfile
// against an in-process org and a real VictoriaLogs: every CSV row of every
// file arrives once (quoted newlines intact); after a restart only a new
// file is read.
func TestEventLogFileSourceEndToEnd(t *testing.T) {
	logs := testenv.StartLogs(t)
	org := &fakesf.ELFOrg{}
	body := func(prefix string, n int) string {
		var b strings.Builder
		b.WriteString("EVENT_TYPE,TIMESTAMP_DERIVED,REQUEST_ID,QUERY\n")
		for i := range n {
			fmt.Fprintf(&b, "API,%s,%s-%d,\"SELECT Id\nFROM Account\"\n", time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), prefix, i)
		}
		return b.String()
	}
	now := time.Now().UTC()
	org.Add("0AT1", "API", now.Add(-3*time.Hour), body("a", 500))
	org.Add("0AT2", "API", now.Add(-2*time.Hour), body("b", 3))
	srv := httptest.NewServer(org)
	defer srv.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`state: {file: {path: %s/state.json}}
salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: s3cret}
sources: {eventlogfile: {event_types: [API], poll_interval: 1m, settle_window: 0s}}
sink: {loki: {url: %s, labels: {job: elf}}}
`, dir, srv.URL, logs.PushURL)
	stored := func(n int) map[string]int {
		return waitStored(t, logs, `{source="eventlogfile",event_type="API",job="elf"}`, n, func(row map[string]any) string {
			if row["QUERY"] != "SELECT Id\nFROM Account" {
				t.Fatalf("row %v: the quoted newline was not kept", row)
			}
			return fmt.Sprint(row["REQUEST_ID"])
		})
	}
	d := start(t, "elf", cfg)
	if ids := stored(503); len(ids) != 503 {
		t.Fatalf("%d distinct rows stored, want 503", len(ids))
	}
	d.signal(t, syscall.SIGTERM)
	d.waitExit(t, 30*time.Second)
	org.Add("0AT3", "API", now.Add(-time.Hour), body("c", 2))
	d2 := start(t, "elf2", cfg)
	ids := stored(505)
	d2.signal(t, syscall.SIGTERM)
	d2.waitExit(t, 30*time.Second)
	for id, n := range ids {
		if n != 1 {
			t.Errorf("%s stored %d times", id, n)
		}
	}
	if len(ids) != 505 || !slices.Equal(org.DownloadsSoFar(), []string{"0AT1", "0AT2", "0AT3"}) {
		t.Fatalf("%d rows, downloads %v: want 505 rows and each file downloaded once", len(ids), org.DownloadsSoFar())
	}
}

// waitStored reads the JSON lines of stream back from VictoriaLogs until n
// distinct keys are stored (or 30s pass) and counts each key.
func waitStored(t *testing.T, logs *testenv.LogsServer, stream string, n int, key func(map[string]any) string) map[string]int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ids := map[string]int{}
		for _, r := range logs.Query(t, stream+" | fields _msg") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(r["_msg"]), &rec); err != nil {
				t.Fatalf("line %q: %v", r["_msg"], err)
			}
			ids[key(rec)]++
		}
		if len(ids) >= n || time.Now().After(deadline) {
			return ids
		}
		time.Sleep(200 * time.Millisecond)
	}
}
