package salesforce_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// apexNow is the clock of the ApexLog tests: the logs are of the hour
// before.
var apexNow = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func apexSource(t *testing.T, org *fakesf.ApexOrg, spec salesforce.ApexLogSpec) *salesforce.ApexLogSource {
	t.Helper()
	srv := httptest.NewServer(org)
	t.Cleanup(srv.Close)
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x",
		ThrottlePause: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if spec.PollInterval == 0 {
		spec.PollInterval = 20 * time.Millisecond
	}
	s, err := salesforce.NewApexLogSource(a, "60.0", spec, clockAt(apexNow), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runApex runs the source until it has emitted want entries (or 10s) and
// returns them.
func runApex(t *testing.T, s *salesforce.ApexLogSource, resume map[string]string, want int) []ports.Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	var got []ports.Entry
	done := make(chan error, 1)
	go func() {
		done <- s.Run(ctx, func(k string) (string, bool) { v, ok := resume[k]; return v, ok }, func(e ports.Entry) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, e)
			return nil
		})
	}()
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= want {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("emitted %d entries, want %d", n, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // room for an entry too many
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return got
}

func apexIDs(entries []ports.Entry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Metadata["Id"])
	}
	return out
}

func apexID(i int) string { return fmt.Sprintf("07L%012dAAA", i) }

func TestApexLogShipsEachLogWithItsMetadata(t *testing.T) {
	org := &fakesf.ApexOrg{}
	at := apexNow.Add(-30 * time.Minute)
	org.Add(fakesf.ApexLog{ID: apexID(2), Username: "ops@acme.com", UserID: "005A", Start: at, Body: "60.0 APEX_CODE,FINEST\n10:00:00.0 (1)|EXECUTION_STARTED\n",
		Operation: "/services/data/v60.0/sobjects/Account", Request: "API", Application: "Unknown", DurationMilliseconds: 120})
	org.Add(fakesf.ApexLog{ID: apexID(1), Username: "ops@acme.com", Start: at, Body: "first", Status: "System.LimitException: Too many SOQL queries: 101"})
	org.Add(fakesf.ApexLog{ID: apexID(3), Username: "someone@acme.com", Start: at.Add(time.Second), Body: "not ours"})
	org.Add(fakesf.ApexLog{ID: apexID(4), Username: "ci@acme.com", Start: at.Add(1500 * time.Millisecond), Body: "third"})
	org.Add(fakesf.ApexLog{ID: apexID(5), Username: "ops@acme.com", Start: apexNow.Add(-2 * time.Hour), Body: "before the lookback"})
	s := apexSource(t, org, salesforce.ApexLogSpec{Users: []string{"ops@acme.com", "ci@acme.com"}})
	got := runApex(t, s, nil, 3)
	if ids := apexIDs(got); !slices.Equal(ids, []string{apexID(1), apexID(2), apexID(4)}) {
		t.Fatalf("shipped %v, want the two users' logs in the lookback window, by StartTime then Id", ids)
	}
	e := got[1]
	want := map[string]string{"Id": apexID(2), "LogUserId": "005A", "LogLength": "55", "Operation": "/services/data/v60.0/sobjects/Account",
		"Request": "API", "Status": "Success", "Application": "Unknown", "DurationMilliseconds": "120", "Location": "Monitoring", "level": "info"}
	if e.Line != "60.0 APEX_CODE,FINEST\n10:00:00.0 (1)|EXECUTION_STARTED\n" || !e.Time.Equal(at) || fmt.Sprint(e.Metadata) != fmt.Sprint(want) ||
		e.Labels["source"] != "apexlog" || e.Labels["event_type"] != "ApexLog" || len(e.Labels) != 2 {
		t.Fatalf("entry %+v", e)
	}
	if got[0].Metadata["level"] != "error" || got[0].Line != "first" {
		t.Fatalf("a log ending in an unhandled exception: %+v", got[0])
	}
	var cp struct {
		LastTS string   `json:"last_ts"`
		IDs    []string `json:"ids"`
	}
	last := got[2].Checkpoint
	if last.Key != "apexlog" || json.Unmarshal([]byte(last.Value), &cp) != nil || cp.LastTS != "2026-11-28T11:30:01.500+0000" ||
		!slices.Equal(cp.IDs, []string{apexID(1), apexID(2), apexID(4)}) {
		t.Fatalf("checkpoint %+v", last)
	}
	if err := salesforce.CheckApexLogCheckpoint(last.Value); err != nil {
		t.Fatal(err)
	}
	qs := org.QueriesSoFar()
	if len(qs) == 0 || !strings.Contains(qs[0], "FROM ApexLog WHERE StartTime >= 2026-11-28T11:00:00Z AND LogUser.Username IN ('ops@acme.com', 'ci@acme.com') ORDER BY StartTime ASC, Id ASC LIMIT 200") {
		t.Fatalf("first query %q", qs)
	}
	if !strings.Contains(qs[len(qs)-1], "WHERE (StartTime > 2026-11-28T11:30:01Z OR (StartTime = 2026-11-28T11:30:01Z AND Id > '"+apexID(4)+"'))") {
		t.Fatalf("a later poll does not continue from the compound cursor: %q", qs[len(qs)-1])
	}
	if r := org.RejectedSoFar(); len(r) > 0 {
		t.Fatalf("the org refused %v", r)
	}
	if d := org.DownloadsSoFar(); !slices.Equal(d, []string{apexID(1), apexID(2), apexID(4)}) {
		t.Fatalf("downloads %v: each body once", d)
	}

	// A restart resumes after the checkpoint: only a new log ships.
	org.Add(fakesf.ApexLog{ID: apexID(6), Username: "ci@acme.com", Start: at.Add(1500 * time.Millisecond), Body: "same instant, later Id"})
	again := runApex(t, apexSource(t, org, salesforce.ApexLogSpec{Users: []string{"ops@acme.com", "ci@acme.com"}}), map[string]string{"apexlog": last.Value}, 1)
	if ids := apexIDs(again); !slices.Equal(ids, []string{apexID(6)}) {
		t.Fatalf("after the restart %v", ids)
	}
}

func TestApexLogShipsOversizedAndDeletedLogsAsTheirMetadata(t *testing.T) {
	org := &fakesf.ApexOrg{}
	at := apexNow.Add(-10 * time.Minute)
	big := strings.Repeat("x", 300)
	org.Add(fakesf.ApexLog{ID: apexID(1), Start: at, Body: big})                                     // LogLength tells
	org.Add(fakesf.ApexLog{ID: apexID(2), Start: at.Add(time.Second), Body: big, LogLength: 10})     // LogLength lies: the read is capped
	org.Add(fakesf.ApexLog{ID: apexID(3), Start: at.Add(2 * time.Second), Body: "x", Deleted: true}) // 404
	org.Add(fakesf.ApexLog{ID: apexID(4), Start: at.Add(3 * time.Second), Body: "fits"})
	s := apexSource(t, org, salesforce.ApexLogSpec{MaxBodyBytes: 100})
	var skipped []string
	var mu sync.Mutex
	s.BodySkipped = func(r string) { mu.Lock(); skipped = append(skipped, r); mu.Unlock() }
	got := runApex(t, s, nil, 4)
	if ids := apexIDs(got); !slices.Equal(ids, []string{apexID(1), apexID(2), apexID(3), apexID(4)}) {
		t.Fatalf("shipped %v", ids)
	}
	for i, want := range []string{"oversized (300 bytes > max_body_bytes)", "oversized (300 bytes > max_body_bytes)",
		"not found (the body answered 404: the log was deleted before it was downloaded)"} {
		e := got[i]
		var line map[string]any
		if e.Metadata["body_skipped"] != "true" || e.Metadata["body_skip_reason"] != want || json.Unmarshal([]byte(e.Line), &line) != nil ||
			line["Id"] != e.Metadata["Id"] || line["body_skipped"] != true || line["body_skip_reason"] != want || line["StartTime"] == nil {
			t.Errorf("log %d: %+v, want its metadata JSON with body_skip_reason %q", i+1, e, want)
		}
	}
	if got[3].Line != "fits" || got[3].Metadata["body_skipped"] != "" {
		t.Fatalf("a body that fits: %+v", got[3])
	}
	if d := org.DownloadsSoFar(); !slices.Equal(d, []string{apexID(2), apexID(4)}) {
		t.Fatalf("downloads %v: an oversized LogLength is not downloaded", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(skipped, []string{"oversized", "oversized", "not_found"}) {
		t.Fatalf("skips counted %v", skipped)
	}
}

// A body download that fails for now stops the poll at its log: the
// position never moves past it, and the next poll ships it, then the rest.
func TestApexLogFailedDownloadIsRetriedNotPassed(t *testing.T) {
	org := &fakesf.ApexOrg{FailBody: map[string]int{apexID(2): 3}}
	at := apexNow.Add(-10 * time.Minute)
	for i := 1; i <= 3; i++ {
		org.Add(fakesf.ApexLog{ID: apexID(i), Start: at.Add(time.Duration(i) * time.Second), Body: fmt.Sprintf("body %d", i)})
	}
	s := apexSource(t, org, salesforce.ApexLogSpec{})
	var failures atomic.Int32
	s.DownloadFailed = func() { failures.Add(1) }
	got := runApex(t, s, nil, 3)
	if ids := apexIDs(got); !slices.Equal(ids, []string{apexID(1), apexID(2), apexID(3)}) {
		t.Fatalf("shipped %v, want each log once, in order", ids)
	}
	if got[1].Line != "body 2" || got[1].Metadata["body_skipped"] != "" {
		t.Fatalf("the retried log shipped as %+v, want its body", got[1])
	}
	if d := org.DownloadsSoFar(); !slices.Equal(d, []string{apexID(1), apexID(2), apexID(3)}) {
		t.Fatalf("downloads %v: no log after the failing one was downloaded before it", d)
	}
	if n := failures.Load(); n != 3 {
		t.Fatalf("%d failed downloads counted, want 3", n)
	}
	if !strings.Contains(got[0].Checkpoint.Value, apexID(1)) || strings.Contains(got[0].Checkpoint.Value, apexID(2)) {
		t.Fatalf("the first log's checkpoint %s", got[0].Checkpoint.Value)
	}
}

// The org's API limit met on a body stops the poll there: no later log is
// downloaded before it, and the next poll ships both in order.
func TestApexLogThrottlingAbortsThePoll(t *testing.T) {
	org := &fakesf.ApexOrg{ThrottleBody: map[string]int{apexID(1): 1}, Throttle: 1}
	at := apexNow.Add(-10 * time.Minute)
	org.Add(fakesf.ApexLog{ID: apexID(1), Start: at, Body: "one"})
	org.Add(fakesf.ApexLog{ID: apexID(2), Start: at.Add(time.Second), Body: "two"})
	// The first poll's listing meets the limit, the second poll's first
	// body: each stops there.
	s := apexSource(t, org, salesforce.ApexLogSpec{})
	var failures atomic.Int32
	s.DownloadFailed = func() { failures.Add(1) }
	got := runApex(t, s, nil, 2)
	if ids := apexIDs(got); !slices.Equal(ids, []string{apexID(1), apexID(2)}) {
		t.Fatalf("shipped %v", ids)
	}
	if d := org.DownloadsSoFar(); !slices.Equal(d, []string{apexID(1), apexID(2)}) {
		t.Fatalf("downloads %v", d)
	}
	// The throttled listing, the one stopped at the throttled body and the
	// one that shipped start from the same position.
	if qs := org.QueriesSoFar(); len(qs) < 3 || qs[0] != qs[1] || qs[1] != qs[2] {
		t.Fatalf("listings %q", qs)
	}
	if n := failures.Load(); n != 0 {
		t.Fatalf("%d throttled downloads counted as failed downloads (the throttle has its own counter)", n)
	}
}

// More logs than a page in one second, 120 of them in one millisecond,
// across batches of 70: every log ships once, in (StartTime, Id) order,
// and the org refuses no query.
func TestApexLogDrainsASecondWithMoreThanAPage(t *testing.T) {
	org := &fakesf.ApexOrg{Batch: 70}
	sec := apexNow.Add(-20 * time.Minute)
	for i := range 450 {
		ts := sec.Add(time.Duration(i%300) * time.Millisecond)
		if i >= 100 && i < 220 {
			ts = sec.Add(500 * time.Millisecond)
		}
		if i >= 400 {
			ts = sec.Add(time.Duration(i) * time.Second)
		}
		org.Add(fakesf.ApexLog{ID: apexID(i), Start: ts, Body: "b"})
	}
	got := runApex(t, apexSource(t, org, salesforce.ApexLogSpec{}), nil, 450)
	seen := map[string]bool{}
	for i, e := range got {
		id := e.Metadata["Id"]
		if seen[id] {
			t.Fatalf("%s shipped twice", id)
		}
		seen[id] = true
		if i > 0 && (e.Time.Before(got[i-1].Time) || e.Time.Equal(got[i-1].Time) && id < got[i-1].Metadata["Id"]) {
			t.Fatalf("%s (%s) shipped after %s (%s)", id, e.Time, got[i-1].Metadata["Id"], got[i-1].Time)
		}
	}
	if len(got) != 450 {
		t.Fatalf("%d logs shipped, want 450", len(got))
	}
	if r := org.RejectedSoFar(); len(r) > 0 {
		t.Fatalf("the org refused %v", r)
	}
	if !slices.ContainsFunc(org.QueriesSoFar(), func(q string) bool { return strings.Contains(q, "ORDER BY Id ASC") }) {
		t.Fatal("the full second was not read by Id")
	}
}

func TestApexLogUnreadableCheckpointStartsFromTheLookback(t *testing.T) {
	org := &fakesf.ApexOrg{}
	org.Add(fakesf.ApexLog{ID: apexID(1), Start: apexNow.Add(-30 * time.Minute), Body: "b"})
	s := apexSource(t, org, salesforce.ApexLogSpec{})
	var garbage atomic.Int32
	s.GarbageCheckpoint = func() { garbage.Add(1) }
	if got := runApex(t, s, map[string]string{"apexlog": "not a position"}, 1); len(got) != 1 || garbage.Load() != 1 {
		t.Fatalf("%d entries, %d garbage counted", len(got), garbage.Load())
	}
	if err := salesforce.CheckApexLogCheckpoint("not a position"); err == nil {
		t.Fatal("a garbage checkpoint passed the check")
	}
}

// TestApexLogRefusesAUsernameThatBreaksTheQuery: every user passes
// sfrules.ValidUsername before it is put in the query.
func TestApexLogRefusesAUsernameThatBreaksTheQuery(t *testing.T) {
	if _, err := salesforce.NewApexLogSource(nil, "60.0", salesforce.ApexLogSpec{Users: []string{"x') OR Id != ('"}}, nil, nil); err == nil {
		t.Fatal("a username that would break out of the query was accepted")
	}
}
