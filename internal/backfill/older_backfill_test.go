package backfill_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The older implementation's backfill state, <stem>-backfill<suffix> beside
// state.file.path, holds per interval and type the CreatedDate it read up
// to and the files done at it: a backfill over a state of its own that
// holds nothing yet skips those files, keeps the positions in its own
// state, and never writes the older file.
func TestBackfillSkipsWhatTheOlderBackfillLoaded(t *testing.T) {
	t.Run("beside the state", func(t *testing.T) { testOlderBackfill(t, false) })
	t.Run("given as --state", func(t *testing.T) { testOlderBackfill(t, true) })
}

// testOlderBackfill runs it with the older file beside the checkpoint
// document, or given as --state (then taken over in place).
func testOlderBackfill(t *testing.T, asState bool) {
	quickBackfill(t)
	e := newBackfillEnv(t, backfillOrg(), "")
	created4 := backfillDay(4).Add(26 * time.Hour).Format("2006-01-02T15:04:05.000-0700")
	older := fmt.Sprintf(`{"backfill:Daily:API": "{\"done_ids\": [\"0ATa4\"], \"last_created\": \"%s\"}", `+
		`"backfill:Hourly:Login": "{\"done_ids\": [\"0ATl9\"], \"last_created\": \"%s\"}"}`, created4, created4)
	olderPath := filepath.Join(e.dir, "state-backfill.json")
	if err := os.WriteFile(olderPath, []byte(older), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--since", backfillDay(6).Format(time.DateOnly)}
	if asState {
		moved := filepath.Join(e.dir, "old", "backfill.json")
		if err := os.MkdirAll(filepath.Dir(moved), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(olderPath, moved); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--state", moved)
	}
	out, errOut, code := e.backfill(t.Context(), args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	got := byRequest(e.loki.snapshot())
	for id := range got {
		if strings.HasPrefix(id, "a5-") || strings.HasPrefix(id, "a4-") {
			t.Fatalf("row %s of a file the older backfill loaded was pushed again", id)
		}
	}
	if len(got) != 30+3*5 { // API of day 3; Login (its older position is for Hourly files) all of it
		t.Fatalf("%d rows pushed, want 45: %v", len(got), slices.Sorted(maps.Keys(got)))
	}
	if !strings.Contains(errOut, "older implementation's backfill state") || !strings.Contains(out, "4 files done, 2 skipped") {
		t.Fatalf("stderr %q, stdout %q", errOut, out)
	}
	if asState {
		out, errOut, code = e.backfill(t.Context(), args...)
		if code != 0 || !strings.Contains(errOut, "all 6 done before (skipped); nothing to do") {
			t.Fatalf("rerun on the state taken over: exit %d\n%s%s", code, out, errOut)
		}
		return
	}
	if b, err := os.ReadFile(olderPath); err != nil || string(b) != older {
		t.Fatalf("the older backfill state was written: %s %v", b, err)
	}
	if doc := e.stateDoc(t); doc.Older["Daily:API"].LastCreated != created4 {
		t.Fatalf("the older positions are not kept in the state: %+v", doc)
	}
	_ = os.Remove(olderPath) // a rerun needs only its own state
	out, errOut, code = e.backfill(t.Context(), "--since", backfillDay(6).Format(time.DateOnly))
	if code != 0 || !strings.Contains(errOut, "all 6 done before (skipped); nothing to do") {
		t.Fatalf("rerun: exit %d\n%s%s", code, out, errOut)
	}
}
