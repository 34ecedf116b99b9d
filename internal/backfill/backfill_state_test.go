package backfill

import (
	"strings"
	"testing"
)

// With orgs, one older backfill state held every org's positions, under
// backfill:org=<name>:…, the first org also reading the unprefixed keys.
func TestReadOlderBackfillOrgs(t *testing.T) {
	data := []byte(`{"backfill:Daily:API": "{\"done_ids\": [\"a\"], \"last_created\": \"2026-11-01T00:00:00.000+0000\"}", ` +
		`"backfill:org=prod:Daily:API": "{\"done_ids\": [\"b\"], \"last_created\": \"2026-11-02T00:00:00.000+0000\"}", ` +
		`"backfill:Daily:Login": "{\"done_ids\": [\"c\"], \"last_created\": \"2026-11-03T00:00:00.000+0000\"}", ` +
		`"backfill:org=emea:Hourly:API": "{\"done_ids\": [\"d\"], \"last_created\": \"2026-11-04T00:00:00.000+0000\"}"}`)
	for _, tc := range []struct {
		org   string
		first bool
		want  map[string]string // key → done id
	}{
		{"", true, map[string]string{"Daily:API": "a", "Daily:Login": "c"}},
		{"prod", true, map[string]string{"Daily:API": "b", "Daily:Login": "c"}},
		{"emea", false, map[string]string{"Hourly:API": "d"}},
	} {
		got, ok, err := readOlderBackfill(data, tc.org, tc.first)
		if err != nil || !ok || len(got) != len(tc.want) {
			t.Fatalf("org %q: %v %v %v", tc.org, got, ok, err)
		}
		for k, id := range tc.want {
			if c := got[k]; len(c.DoneIDs) != 1 || c.DoneIDs[0] != id {
				t.Errorf("org %q: %s = %+v, want done %s", tc.org, k, c, id)
			}
		}
	}
	if _, ok, err := readOlderBackfill([]byte(`{"org":"prod","files":{}}`), "prod", true); ok || err != nil {
		t.Fatalf("our own layout read as the older one: %v %v", ok, err)
	}
	if _, _, err := readOlderBackfill([]byte(`{"backfill:Daily:API": "{\"last_created\": \"yesterday\"}"}`), "", true); err == nil ||
		!strings.Contains(err.Error(), "backfill:Daily:API") {
		t.Fatalf("a broken older position: %v", err)
	}
}
