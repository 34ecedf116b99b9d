package salesforce_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// field reads a field of an entry's JSON line.
func field(t *testing.T, e ports.Entry, name string) string {
	t.Helper()
	var rec map[string]any
	if err := json.Unmarshal([]byte(e.Line), &rec); err != nil {
		t.Fatalf("line %q: %v", e.Line, err)
	}
	s, _ := rec[name].(string)
	return s
}

// lastTS reads last_ts from an eventlog_objects checkpoint.
func lastTS(t *testing.T, v string) string {
	t.Helper()
	var c struct {
		LastTS string `json:"last_ts"`
	}
	if err := json.Unmarshal([]byte(v), &c); err != nil {
		t.Fatalf("checkpoint %q: %v", v, err)
	}
	return c.LastTS
}

// checkAscendingOnce fails unless the entries hold want rows, each once, in
// ascending EventDate order.
func checkAscendingOnce(t *testing.T, es []ports.Entry, tsField string, want int) {
	t.Helper()
	seen := map[string]bool{}
	var prev time.Time
	for i, e := range es {
		id := field(t, e, "Id")
		if seen[id] {
			t.Fatalf("entry %d: %s emitted twice", i, id)
		}
		seen[id] = true
		ts, err := salesforce.ParseTime(field(t, e, tsField))
		if err != nil || ts.Before(prev) || !e.Time.Equal(ts) {
			t.Fatalf("entry %d (%s at %v, entry time %v) after %v: not ascending", i, id, ts, e.Time, prev)
		}
		prev = ts
	}
	if len(seen) != want {
		t.Fatalf("%d distinct rows, want %d", len(seen), want)
	}
}

// checkBigObjectQueries fails unless every query is one a big object
// accepts: newest first, never by Id; and the org refused none.
func checkBigObjectQueries(t *testing.T, org *fakesf.Org, tsField string) {
	t.Helper()
	for _, q := range org.Snapshot() {
		if !strings.Contains(q, "ORDER BY "+tsField+" DESC") || strings.Contains(q, " ASC") || strings.Contains(q, "Id >") || strings.Contains(q, " OR ") {
			t.Errorf("query %q is not one a big object accepts", q)
		}
	}
	if r := org.RejectedSoFar(); len(r) > 0 {
		t.Fatalf("the org refused %q", r)
	}
}

// A big object is drained newest first (the only order its index serves)
// and its window emitted oldest first; a second with more rows than a page
// is read whole; only the last entry carries the advanced checkpoint.
func TestSOQLBigObjectDrainsNewestFirstAndEmitsAscending(t *testing.T) {
	org := &fakesf.Org{Batch: 90}
	base := time.Date(2026, 11, 28, 11, 30, 0, 0, time.UTC)
	n := 0
	add := func(ts time.Time) {
		org.Add(fmt.Sprintf("0Lg%05d", n), ts)
		n++
	}
	for i := range 100 {
		add(base.Add(time.Duration(i) * 500 * time.Millisecond))
	}
	busy := base.Add(time.Minute) // 260 rows in one second, 60 of them in one millisecond
	for i := range 260 {
		ts := busy.Add(time.Duration(i) * time.Millisecond)
		if i < 60 {
			ts = busy.Add(7 * time.Millisecond)
		}
		add(ts)
	}
	for i := range 90 {
		add(busy.Add(2*time.Second + time.Duration(i)*time.Second))
	}
	c := &collected{}
	runFor(t, soqlSource(t, org, salesforce.ObjectSpec{Name: "LoginEvent", PollInterval: time.Hour}), nil, c, 450)
	checkAscendingOnce(t, c.entries, "EventDate", 450)
	checkBigObjectQueries(t, org, "EventDate")
	start := c.entries[0].Checkpoint.Value
	for i, e := range c.entries[:449] {
		if e.Checkpoint.Value != start || e.Checkpoint.Key != "eventlog_objects:LoginEvent" {
			t.Fatalf("entry %d carries %+v: only the window's last entry may advance the checkpoint", i, e.Checkpoint)
		}
	}
	if got := lastTS(t, c.last().Checkpoint.Value); got != busy.Add(91*time.Second).Format("2006-01-02T15:04:05.000-0700") || !strings.HasPrefix(lastTS(t, start), "2026-11-28T11:00:00.") {
		// The start is the lookback from the test clock, which runs on: a
		// busy machine can put it a few milliseconds past 11:00:00.
		t.Fatalf("checkpoints from %s to %s", start, c.last().Checkpoint.Value)
	}
	var sweep bool
	for _, q := range org.Snapshot() {
		sweep = sweep || strings.HasPrefix(q, "SELECT EventDate, EventIdentifier, Id, Username FROM LoginEvent WHERE EventDate >= 2026-11-28T11:31:00Z AND EventDate < 2026-11-28T11:31:01Z")
	}
	if !sweep {
		t.Fatalf("the busy second was not read whole with the described fields: %q", org.Snapshot())
	}
}

// A stop in the middle of a window (a failed or cancelled emit) advances
// nothing: every entry emitted carries the checkpoint from before the
// window, and the next run reads the whole window again.
func TestSOQLBigObjectStopMidWindowAdvancesNothing(t *testing.T) {
	org := &fakesf.Org{}
	base := time.Date(2026, 11, 28, 11, 30, 0, 0, time.UTC)
	for i := range 300 {
		org.Add(fmt.Sprintf("0Lg%05d", i), base.Add(time.Duration(i)*time.Second))
	}
	stored := `{"last_ts":"2026-11-28T11:29:00.000+0000","ids":[]}`
	resume := func(k string) (string, bool) { return stored, k == "eventlog_objects:LoginEvent" }
	s := soqlSource(t, org, salesforce.ObjectSpec{Name: "LoginEvent", PollInterval: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var got []ports.Entry
	err := s.Run(ctx, resume, func(e ports.Entry) error {
		if len(got) == 120 {
			cancel()
			return errors.New("the pipeline stopped")
		}
		got = append(got, e)
		return nil
	})
	if err != nil || len(got) != 120 {
		t.Fatalf("Run: %v after %d entries", err, len(got))
	}
	for i, e := range got {
		if lastTS(t, e.Checkpoint.Value) != "2026-11-28T11:29:00.000+0000" {
			t.Fatalf("entry %d carries %s: a window stopped midway must not advance", i, e.Checkpoint.Value)
		}
	}
	c := &collected{}
	runFor(t, soqlSource(t, org, salesforce.ObjectSpec{Name: "LoginEvent", PollInterval: time.Hour}), map[string]string{"eventlog_objects:LoginEvent": stored}, c, 300)
	checkAscendingOnce(t, c.entries, "EventDate", 300)
}

// A backlog larger than max_catchup_records is drained oldest window first:
// each poll emits (and commits) the oldest max_catchup_records rows above
// the watermark, says so in a WARN, and the next polls continue; no row is
// skipped or repeated.
func TestSOQLBigObjectBacklogIsDrainedOldestWindowFirst(t *testing.T) {
	org := &fakesf.Org{}
	base := time.Date(2026, 11, 28, 11, 30, 0, 0, time.UTC)
	for i := range 350 {
		org.Add(fmt.Sprintf("0Lg%05d", i), base.Add(time.Duration(i)*time.Second))
	}
	logs := &testenv.Buffer{}
	s := soqlSourceLog(t, org, salesforce.ObjectSpec{Name: "LoginEvent", PollInterval: 20 * time.Millisecond, MaxCatchupRecords: 100},
		slog.New(slog.NewTextHandler(logs, nil)))
	c := &collected{}
	runFor(t, s, nil, c, 350)
	checkAscendingOnce(t, c.entries[:350], "EventDate", 350)
	checkBigObjectQueries(t, org, "EventDate")
	// Windows of 100: the 100th, 200th and 300th entries close a window.
	for i, e := range c.entries[:350] {
		closes := i%100 == 99 || i == 349
		if advanced := lastTS(t, e.Checkpoint.Value) == field(t, e, "EventDate"); advanced != closes {
			t.Fatalf("entry %d carries %s (closes a window: %v)", i, e.Checkpoint.Value, closes)
		}
	}
	out := logs.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "max_catchup_records") || !strings.Contains(out, "2026-11-28T11:31:40") {
		t.Fatalf("no WARN naming the rows left for the next polls:\n%s", out)
	}
}

// SOQL dateTime literals have whole seconds: a watermark inside a second
// (09:59:01.360) is read from the start of that second and the rows
// already emitted are told apart in the client, so across two polls no row
// of 09:59:01.360, 09:59:01.900 and 09:59:02.000 is lost or repeated, for
// an ordinary object, a standard big object and a custom one.
func TestSOQLSubSecondWatermarkLosesAndRepeatsNothing(t *testing.T) {
	for _, o := range []struct{ name, field string }{{"LoginHistory", "LoginTime"}, {"LoginEvent", "EventDate"}, {"Audit__b", "EventTime__c"}} {
		t.Run(o.name, func(t *testing.T) {
			org := &fakesf.Org{}
			at := func(ms int) time.Time {
				return time.Date(2026, 11, 28, 9, 59, 1, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond)
			}
			org.AddTo(o.name, o.field, "A", at(360))
			spec := salesforce.ObjectSpec{Name: o.name, TimestampField: o.field, PollInterval: time.Hour, Lookback: 3 * time.Hour}
			c := &collected{}
			runFor(t, soqlSource(t, org, spec), nil, c, 1)
			cp := c.last().Checkpoint.Value
			if lastTS(t, cp) != "2026-11-28T09:59:01.360+0000" {
				t.Fatalf("checkpoint %s", cp)
			}
			org.AddTo(o.name, o.field, "B", at(900))
			org.AddTo(o.name, o.field, "C", at(1000))
			c2 := &collected{}
			runFor(t, soqlSource(t, org, spec), map[string]string{"eventlog_objects:" + o.name: cp}, c2, 2)
			time.Sleep(50 * time.Millisecond)
			if got := c2.ids(); !slices.Equal(got, []string{"B", "C"}) {
				t.Fatalf("second poll: %v, want B and C (A once, in the first poll)", got)
			}
			var opening string
			for _, q := range org.Snapshot() {
				if strings.Contains(q, o.field+" >= 2026-11-28T09:59:01Z") {
					opening = q
				}
			}
			if opening == "" {
				t.Fatalf("no query from the start of the watermark's second: %q", org.Snapshot())
			}
			if r := org.RejectedSoFar(); len(r) > 0 {
				t.Fatalf("the org refused %q", r)
			}
		})
	}
}

// TestSOQLRefusesAnUnknownBigObjectMode: big_object is auto, true or
// false (sfrules.IsBigObject).
func TestSOQLRefusesAnUnknownBigObjectMode(t *testing.T) {
	if _, err := salesforce.NewSOQLSource(nil, "60.0", []salesforce.ObjectSpec{{Name: "LoginEvent", BigObject: "maybe"}}, nil, nil); err == nil {
		t.Fatal("big_object: maybe was accepted")
	}
}
