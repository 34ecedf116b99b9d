package integration

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
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
	stored := func() map[string]int {
		ids := map[string]int{}
		for _, r := range logs.Query(t, `{source="eventlog_objects",event_type="LoginEvent",job="soql"} | fields _msg`) {
			var rec map[string]any
			if err := json.Unmarshal([]byte(r["_msg"]), &rec); err != nil {
				t.Fatalf("line %q: %v", r["_msg"], err)
			}
			ids[fmt.Sprint(rec["Id"])]++
		}
		return ids
	}
	waitFor := func(n int) map[string]int {
		deadline := time.Now().Add(30 * time.Second)
		for {
			ids := stored()
			if len(ids) >= n || time.Now().After(deadline) {
				return ids
			}
			time.Sleep(200 * time.Millisecond)
		}
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
