package salesforce_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

type collected struct {
	mu      sync.Mutex
	entries []ports.Entry
}

func (c *collected) emit(e ports.Entry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = append(c.entries, e)
	return nil
}

func (c *collected) ids() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, e := range c.entries {
		var rec map[string]any
		_ = json.Unmarshal([]byte(e.Line), &rec)
		out = append(out, rec["Id"].(string))
	}
	return out
}

func (c *collected) last() ports.Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[len(c.entries)-1]
}

func soqlSource(t *testing.T, org *fakesf.Org, spec salesforce.ObjectSpec) *salesforce.SOQLSource {
	t.Helper()
	return soqlSourceLog(t, org, spec, nil)
}

// soqlSourceLog is soqlSource logging to log.
func soqlSourceLog(t *testing.T, org *fakesf.Org, spec salesforce.ObjectSpec, log *slog.Logger) *salesforce.SOQLSource {
	t.Helper()
	return soqlSourceAuth(t, org, spec, log, func(*salesforce.Config) {})
}

// soqlSourceAuth is soqlSourceLog with the token source's config adjusted.
func soqlSourceAuth(t *testing.T, org *fakesf.Org, spec salesforce.ObjectSpec, log *slog.Logger, adjust func(*salesforce.Config)) *salesforce.SOQLSource {
	t.Helper()
	srv := httptest.NewServer(org)
	t.Cleanup(srv.Close)
	cfg := salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x"}
	adjust(&cfg)
	a, err := salesforce.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := salesforce.NewSOQLSource(a, "60.0", []salesforce.ObjectSpec{spec}, clockAt(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)), log)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runFor runs the source until it has emitted want entries (or 10s).
func runFor(t *testing.T, s *salesforce.SOQLSource, resume map[string]string, c *collected, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- s.Run(ctx, func(k string) (string, bool) { v, ok := resume[k]; return v, ok }, c.emit)
	}()
	for {
		c.mu.Lock()
		n := len(c.entries)
		c.mu.Unlock()
		if n >= want {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("emitted %d entries, want %d", n, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestSOQLDrainsInOrderAcrossPagesAndTies(t *testing.T) {
	// An ordinary object (LoginHistory, by LoginTime); answers come in
	// batches of 90 behind nextRecordsUrl.
	org := &fakesf.Org{Batch: 90}
	base := time.Date(2026, 11, 28, 11, 30, 0, 0, time.UTC)
	// 450 rows within one second: 250 of them share one millisecond (ties
	// across a page edge).
	for i := range 450 {
		ts := base.Add(time.Duration(i) * time.Millisecond)
		if i >= 100 && i < 350 {
			ts = base.Add(100 * time.Millisecond)
		}
		org.AddTo("LoginHistory", "LoginTime", fmt.Sprintf("0AT%05d", i), ts)
	}
	c := &collected{}
	runFor(t, soqlSource(t, org, salesforce.ObjectSpec{Name: "LoginHistory", TimestampField: "LoginTime", PollInterval: time.Hour}), nil, c, 450)
	ids := c.ids()
	if len(ids) != 450 || !slices.IsSorted(ids) {
		t.Fatalf("%d ids, sorted %v", len(ids), slices.IsSorted(ids))
	}
	if want := "0AT00449"; !strings.Contains(c.last().Checkpoint.Value, want) || c.last().Checkpoint.Key != "eventlog_objects:LoginHistory" {
		t.Fatalf("last checkpoint %+v", c.last().Checkpoint)
	}
	e := c.entries[0]
	if e.Labels["source"] != "eventlog_objects" || e.Labels["event_type"] != "LoginHistory" || strings.Contains(e.Line, "attributes") || e.Metadata["level"] != "info" ||
		!e.Time.Equal(base) {
		t.Fatalf("entry shape %+v", e)
	}
	// A full first page inside one second: the second is read whole, by Id
	// (200 + 200 + 50), then the drain goes on from the next second.
	// The run stops once the 450th entry arrives, which may be before the
	// drain's next query (from the next second) was sent.
	q := org.Snapshot()
	if len(q) < 4 || len(q) > 5 || !strings.Contains(q[0], "LoginTime >= 2026-11-28T11:00:00Z ORDER BY LoginTime ASC, Id ASC LIMIT 200") ||
		!strings.Contains(q[1], "LoginTime >= 2026-11-28T11:30:00Z AND LoginTime < 2026-11-28T11:30:01Z ORDER BY Id ASC LIMIT 200") ||
		!strings.Contains(q[2], "AND Id > '0AT00199'") || !strings.Contains(q[3], "AND Id > '0AT00399'") ||
		(len(q) == 5 && !strings.Contains(q[4], "LoginTime >= 2026-11-28T11:30:01Z ORDER BY")) {
		t.Fatalf("queries %q", q)
	}
	// 200 rows come as 90 + 90 + 20: two locators for each full answer.
	if org.Follows() != 6 {
		t.Fatalf("%d nextRecordsUrl pages read, want 6", org.Follows())
	}
	if r := org.RejectedSoFar(); len(r) > 0 {
		t.Fatalf("the org refused %q", r)
	}
}

func TestQueryFollowsNextRecordsURLAndReportsA5xxAsTransient(t *testing.T) {
	org := &fakesf.Org{Batch: 7, Unavailable: 1}
	base := time.Date(2026, 11, 28, 11, 30, 0, 0, time.UTC)
	for i := range 20 {
		org.Add(fmt.Sprintf("0AT%02d", i), base.Add(time.Duration(i)*time.Second))
	}
	srv := httptest.NewServer(org)
	defer srv.Close()
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x"})
	if err != nil {
		t.Fatal(err)
	}
	q := "SELECT FIELDS(ALL) FROM LoginEvent WHERE EventDate >= 2026-11-28T00:00:00Z ORDER BY EventDate DESC LIMIT 200"
	if _, err := salesforce.Query(t.Context(), a, "60.0", q); !ports.IsTransient(err) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("a 503: %v, want a transient error naming the status", err)
	}
	rows, err := salesforce.Query(t.Context(), a, "60.0", q)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range rows {
		ids = append(ids, r["Id"].(string))
	}
	slices.Reverse(ids) // newest first
	if len(ids) != 20 || !slices.IsSorted(ids) || org.Follows() != 2 {
		t.Fatalf("%d rows %v after %d locator pages: want all 20 newest first over 7 + 7 + 6", len(ids), ids, org.Follows())
	}
}

func TestSOQLResumesAfterTheCheckpointAndSettlesLateRows(t *testing.T) {
	org := &fakesf.Org{}
	base := time.Date(2026, 11, 28, 11, 30, 0, 0, time.UTC)
	for i := range 10 {
		org.Add(fmt.Sprintf("A%02d", i), base.Add(time.Duration(i)*time.Second))
	}
	c := &collected{}
	spec := salesforce.ObjectSpec{Name: "LoginEvent", PollInterval: time.Hour, Settle: 5 * time.Second}
	runFor(t, soqlSource(t, org, spec), nil, c, 10)
	cp := c.last().Checkpoint.Value
	// A row becomes visible late, 3s behind the watermark, and two new rows arrive.
	org.Add("LATE", base.Add(6*time.Second))
	org.Add("B00", base.Add(20*time.Second))
	org.Add("B01", base.Add(21*time.Second))
	c2 := &collected{}
	runFor(t, soqlSource(t, org, spec), map[string]string{"eventlog_objects:LoginEvent": cp}, c2, 3)
	if got := c2.ids(); !slices.Equal(got, []string{"LATE", "B00", "B01"}) {
		t.Fatalf("after resume: %v, want the late row and the new ones, nothing re-emitted", got)
	}
	// Without settle the late row is behind the watermark and is not read.
	org2 := &fakesf.Org{}
	for i := range 10 {
		org2.Add(fmt.Sprintf("A%02d", i), base.Add(time.Duration(i)*time.Second))
	}
	spec.Settle = 0
	c3 := &collected{}
	runFor(t, soqlSource(t, org2, spec), nil, c3, 10)
	org2.Add("LATE", base.Add(6*time.Second))
	org2.Add("B00", base.Add(20*time.Second))
	c4 := &collected{}
	runFor(t, soqlSource(t, org2, spec), map[string]string{"eventlog_objects:LoginEvent": c3.last().Checkpoint.Value}, c4, 1)
	if got := c4.ids(); !slices.Equal(got, []string{"B00"}) {
		t.Fatalf("settle 0: %v", got)
	}
}

func TestSOQLCheckpointFormsAndFailures(t *testing.T) {
	org := &fakesf.Org{Throttle: 1, Unavailable: 2, Garbage: 1, Revoke: 1}
	base := time.Date(2026, 11, 28, 11, 30, 0, 0, time.UTC)
	org.Add("OLD", base.Add(-2*time.Hour)) // before the lookback window
	org.Add("A", base)
	org.Add("B", base.Add(time.Minute))
	spec := salesforce.ObjectSpec{Name: "LoginEvent", PollInterval: 10 * time.Millisecond}
	c := &collected{}
	throttled := 0
	s := soqlSourceAuth(t, org, spec, nil, func(c *salesforce.Config) {
		c.ThrottlePause = 10 * time.Millisecond
		c.Throttled = func(string) { throttled++ }
	})
	// A garbage checkpoint falls back to the lookback window (1h before now).
	runFor(t, s, map[string]string{"eventlog_objects:LoginEvent": "{not json"}, c, 2)
	if got := c.ids(); !slices.Equal(got, []string{"A", "B"}) || throttled != 1 {
		t.Fatalf("got %v with %d throttles: want A and B after one throttle, two 503s, a non-JSON 200 and a 401", got, throttled)
	}
	// A bare timestamp from an older document resumes at it: it carries no
	// Ids, so the rows at that instant are read again (at-least-once), the
	// older ones are not.
	c2 := &collected{}
	runFor(t, soqlSource(t, org, spec), map[string]string{"eventlog_objects:LoginEvent": "2026-11-28T11:30:00.000+0000"}, c2, 2)
	if got := c2.ids(); !slices.Equal(got, []string{"A", "B"}) {
		t.Fatalf("bare timestamp: %v", got)
	}
	if _, err := salesforce.NewSOQLSource(nil, "60.0", []salesforce.ObjectSpec{{Name: "Login Event; DELETE"}}, nil, nil); err == nil {
		t.Fatal("an object name outside [A-Za-z0-9_] was accepted")
	}
}

// shiftedClock is the real clock moved to another date.
type shiftedClock struct {
	clock.Real
	offset time.Duration
}

func clockAt(t time.Time) ports.Clock { return shiftedClock{offset: time.Until(t)} }

func (c shiftedClock) Now() time.Time { return time.Now().Add(c.offset) }
