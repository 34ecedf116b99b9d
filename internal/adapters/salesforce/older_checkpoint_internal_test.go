package salesforce

import (
	"slices"
	"testing"
	"time"
)

// Values exactly as the older implementation writes them: Python's
// json.dumps(..., sort_keys=True) (", " and ": " separators, keys sorted),
// timestamps as Salesforce returned them (+0000), or, before the first row,
// its lookback start rendered YYYY-MM-DDThh:mm:ssZ.

// eventlog_objects:<Object>: {"ids": [...], "last_ts": ...} and the legacy
// bare timestamp resume at that timestamp with those Ids.
func TestOlderEventLogObjectsCheckpoint(t *testing.T) {
	at := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		value string
		last  time.Time
		ids   []string
	}{
		{`{"ids": ["0Ya000000000001AAA", "0Ya000000000002AAA"], "last_ts": "2026-11-28T10:00:00.000+0000"}`, at,
			[]string{"0Ya000000000001AAA", "0Ya000000000002AAA"}},
		{`{"ids": [], "last_ts": "2026-11-28T10:00:00.123+0000"}`, at.Add(123 * time.Millisecond), []string{}},
		{`{"ids": [], "last_ts": "2026-11-28T10:00:00Z"}`, at, []string{}}, // the lookback start, before any row
		{`2026-11-28T10:00:00.000+0000`, at, nil},                          // legacy: the bare timestamp
		{`2026-11-28T10:00:00Z`, at, nil},
	} {
		c, err := parseCursor(tc.value)
		if err != nil {
			t.Errorf("%s: %v", tc.value, err)
			continue
		}
		if !c.last.Equal(tc.last) || !slices.Equal(c.IDs, tc.ids) {
			t.Errorf("%s resumes at %s after %v, want %s after %v", tc.value, c.last, c.IDs, tc.last, tc.ids)
		}
	}
}

// apexlog: the same shape as eventlog_objects, over StartTime and log Ids.
func TestOlderApexLogCheckpoint(t *testing.T) {
	v := `{"ids": ["07L000000000001AAA", "07L000000000002AAA"], "last_ts": "2026-11-28T09:30:00.000+0000"}`
	if err := CheckApexLogCheckpoint(v); err != nil {
		t.Fatal(err)
	}
	c, err := parseCursor(v)
	if err != nil {
		t.Fatal(err)
	}
	if !c.last.Equal(time.Date(2026, 11, 28, 9, 30, 0, 0, time.UTC)) || !slices.Equal(c.IDs, []string{"07L000000000001AAA", "07L000000000002AAA"}) {
		t.Fatalf("resumes at %s after %v", c.last, c.IDs)
	}
}

// eventlogfile:<EventType>: {"ids": [[fileId, createdDate], ...],
// "last_created": ...} resumes after those files; no interval is recorded
// (the older implementation reads one configured interval).
func TestOlderEventLogFileCheckpoint(t *testing.T) {
	v := `{"ids": [["0AT000000000001AAA", "2026-11-28T05:00:00.000+0000"], ["0AT000000000002AAA", "2026-11-28T06:00:00.000+0000"]], ` +
		`"last_created": "2026-11-28T06:00:00.000+0000"}`
	p, err := parsePos(v)
	if err != nil {
		t.Fatal(err)
	}
	if !p.last.Equal(time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)) || p.Interval != "" {
		t.Fatalf("resumes at %s, interval %q", p.last, p.Interval)
	}
	if !p.done("0AT000000000002AAA", "2026-11-28T06:00:00.000+0000") || !p.done("0AT000000000001AAA", "2026-11-28T05:00:00.000+0000") {
		t.Fatal("a file the older implementation read is read again")
	}
	if p.done("0AT000000000002AAA", "2026-11-29T06:00:00.000+0000") {
		t.Fatal("a Daily file regenerated in place (a newer CreatedDate) is not read again")
	}
}

// The legacy ids of the older implementation are bare file Ids, which
// match any CreatedDate; they may sit beside pairs.
func TestOlderEventLogFileCheckpointWithBareIDs(t *testing.T) {
	v := `{"ids": ["0AT000000000001AAA", ["0AT000000000002AAA", "2026-11-28T06:00:00.000+0000"]], "last_created": "2026-11-28T06:00:00.000+0000"}`
	p, err := parsePos(v)
	if err != nil {
		t.Fatalf("the older legacy shape is refused (the type would restart from its lookback): %v", err)
	}
	if !p.last.Equal(time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)) {
		t.Fatalf("resumes at %s", p.last)
	}
	for _, created := range []string{"2026-11-28T06:00:00.000+0000", "2026-11-27T06:00:00.000+0000", "2026-11-29T06:00:00.000+0000"} {
		if !p.done("0AT000000000001AAA", created) {
			t.Errorf("the bare Id does not match CreatedDate %s", created)
		}
	}
	if !p.done("0AT000000000002AAA", "2026-11-28T06:00:00.000+0000") || p.done("0AT000000000003AAA", "2026-11-28T06:00:00.000+0000") {
		t.Fatal("pairs beside bare Ids are not read as pairs")
	}
	if p.legacyIDs != 1 {
		t.Fatalf("legacyIDs = %d, want 1 (logged once when the type resumes)", p.legacyIDs)
	}
	// Our next value keeps the bare Id as a pair with an empty CreatedDate,
	// which reads back the same.
	again, err := parsePos(p.encode())
	if err != nil || !again.done("0AT000000000001AAA", "2026-11-30T00:00:00.000+0000") {
		t.Fatalf("re-encoded %s: %v", p.encode(), err)
	}
}
