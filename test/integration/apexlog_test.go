package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// TestApexLogSourceEndToEnd runs the daemon with sources.apexlog against an
// in-process org (Tooling API) and a real VictoriaLogs. The org holds six
// debug logs: one over max_body_bytes, one deleted between its listing and
// its download (404), and one whose download fails twice (503) before it
// succeeds. While that download fails nothing after its log is downloaded
// or committed; every log is then stored exactly once, in order: the
// bodies as lines, the oversized and deleted logs as their metadata with
// body_skipped. The leader also exports the org's limits.
func TestApexLogSourceEndToEnd(t *testing.T) {
	logs := testenv.StartLogs(t)
	org := &fakesf.ApexOrg{Limits: fakesf.DefaultLimits(), FailBody: map[string]int{"07L000000000003AAA": 2}}
	base := time.Now().Add(-20 * time.Minute).UTC().Truncate(time.Second)
	id := func(i int) string { return fmt.Sprintf("07L00000000000%dAAA", i) }
	body := func(i int) string {
		return fmt.Sprintf("60.0 APEX_CODE,FINEST;APEX_PROFILING,INFO\n%s (1)|EXECUTION_STARTED\n%s (2)|USER_DEBUG|[1]|DEBUG|log %d\n",
			base.Format("15:04:05.0"), base.Format("15:04:05.0"), i)
	}
	for i := 1; i <= 6; i++ {
		l := fakesf.ApexLog{ID: id(i), Username: "integration@acme.com", Start: base.Add(time.Duration(i) * 1500 * time.Millisecond), Body: body(i)}
		switch i {
		case 2:
			l.Body = strings.Repeat("x", 4096) // over max_body_bytes: 2048
		case 5:
			l.Deleted = true
		}
		org.Add(l)
	}
	org.Add(fakesf.ApexLog{ID: id(7), Username: "someone.else@acme.com", Start: base, Body: "not shipped"})
	srv := httptest.NewServer(org)
	defer srv.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`state: {file: {path: %s/state.json}}
salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: s3cret}
sources: {apexlog: {enabled: true, poll_interval: 10s, users: [integration@acme.com], max_body_bytes: 2048}}
sink: {loki: {url: %s, labels: {job: apex}}}
`, dir, srv.URL, logs.PushURL)
	const stream = `{source="apexlog",event_type="ApexLog",job="apex"}`
	stored := func(n int, within time.Duration) []map[string]string {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			got := logs.Query(t, stream)
			if len(got) >= n || time.Now().After(deadline) {
				slices.SortFunc(got, func(a, b map[string]string) int { return strings.Compare(a["_time"], b["_time"]) })
				return got
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	d := start(t, "apex", cfg)

	// The first poll ships log 1 and 2 (oversized, no download) and stops
	// at log 3, whose download fails: the next poll is 10s away.
	if got := stored(2, 30*time.Second); len(got) != 2 || got[0]["Id"] != id(1) || got[1]["Id"] != id(2) {
		t.Fatalf("before the failed download: %v", got)
	}
	if dl := org.DownloadsSoFar(); !slices.Equal(dl, []string{id(1)}) {
		t.Fatalf("downloads %v while log 3 fails: nothing after it may be downloaded", dl)
	}
	time.Sleep(time.Second) // the commit of log 2's position
	cp := checkpoints(t, dir)["apexlog"]
	if !strings.Contains(cp, id(2)) || strings.Contains(cp, id(3)) || strings.Contains(cp, id(4)) {
		t.Fatalf("checkpoint %s while log 3 fails: want it at log 2", cp)
	}

	got := stored(6, 60*time.Second)
	ids := make([]string, len(got))
	for i, r := range got {
		ids[i] = r["Id"]
	}
	if want := []string{id(1), id(2), id(3), id(4), id(5), id(6)}; !slices.Equal(ids, want) {
		t.Fatalf("stored %v, want %v: each log once, in order", ids, want)
	}
	for i, r := range got {
		switch i + 1 {
		case 2, 5:
			reason := map[int]string{2: "oversized (4096 bytes > max_body_bytes)", 5: "not found (the body answered 404: the log was deleted before it was downloaded)"}[i+1]
			var line map[string]any
			if r["body_skipped"] != "true" || r["body_skip_reason"] != reason || json.Unmarshal([]byte(r["_msg"]), &line) != nil || line["Id"] != r["Id"] {
				t.Errorf("log %d stored as %v, want its metadata with body_skip_reason %q", i+1, r, reason)
			}
		default:
			if r["_msg"] != strings.TrimRight(body(i+1), "\n") && r["_msg"] != body(i+1) || r["body_skipped"] != "" {
				t.Errorf("log %d stored as %v, want its body", i+1, r)
			}
		}
		at, err := time.Parse(time.RFC3339Nano, r["_time"])
		if err != nil || !at.Equal(base.Add(time.Duration(i+1)*1500*time.Millisecond)) {
			t.Errorf("log %d stored at %s, want its StartTime", i+1, r["_time"])
		}
		if r["Operation"] != "/apex/Example" || r["Status"] != "Success" || r["LogUserId"] == "" || r["level"] != "info" {
			t.Errorf("log %d metadata %v", i+1, r)
		}
	}
	if dl := org.DownloadsSoFar(); !slices.Equal(dl, []string{id(1), id(3), id(4), id(6)}) {
		t.Fatalf("downloads %v: want each body once, in order, none of the oversized log", dl)
	}

	// The leader exports the org's limits.
	resp, err := http.Get("http://" + d.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, want := range []string{`sf2loki_salesforce_limit_remaining{limit="DailyApiRequests"} 14998`, `sf2loki_salesforce_limit_max{limit="DailyApiRequests"} 15000`,
		`sf2loki_apexlog_bodies_skipped_total{reason="oversized"} 1`, `sf2loki_apexlog_download_errors_total 2`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("no %s in /metrics", want)
		}
	}
	d.signal(t, syscall.SIGTERM)
	d.waitExit(t, 30*time.Second)
	if cp := checkpoints(t, dir)["apexlog"]; !strings.Contains(cp, id(6)) {
		t.Fatalf("final checkpoint %s, want it at log 6", cp)
	}
	if r := org.RejectedSoFar(); len(r) > 0 {
		t.Fatalf("the org refused %v", r)
	}
	t.Logf("6 logs stored once each, in order, across two failed downloads of log 3 (%d listings)", len(org.QueriesSoFar()))
}
