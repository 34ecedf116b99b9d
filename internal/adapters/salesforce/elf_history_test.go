package salesforce_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/domain/shape"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// historyOrg has, for API, Daily files on Nov 1 and 2 and Hourly files on
// Nov 1, 2 and 3 (no Daily file yet on the 3rd), plus a Login Daily file.
func historyOrg() *fakesf.ELFOrg {
	org := &fakesf.ELFOrg{}
	day := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }
	for d := 1; d <= 3; d++ {
		for _, h := range []int{0, 13} {
			ld := day(d).Add(time.Duration(h) * time.Hour)
			org.AddFile(fakesf.ELFFile{ID: fmt.Sprintf("0ATh%d%02d", d, h), EventType: "API", Interval: "Hourly", LogDate: ld,
				CreatedDate: ld.Add(90 * time.Minute), Sequence: 1, Body: csvBody(fmt.Sprintf("h%d%02d", d, h), 2)})
		}
		if d < 3 {
			org.AddFile(fakesf.ELFFile{ID: fmt.Sprintf("0ATd%d", d), EventType: "API", Interval: "Daily", LogDate: day(d),
				CreatedDate: day(d + 1).Add(3 * time.Hour), Body: csvBody(fmt.Sprintf("d%d", d), 4)})
		}
	}
	org.AddFile(fakesf.ELFFile{ID: "0ATl1", EventType: "Login", Interval: "Daily", LogDate: day(1), CreatedDate: day(2), Body: csvBody("l1", 1)})
	return org
}

func historyIDs(fs []salesforce.HistoryFile) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.ID)
	}
	return out
}

// A history listing takes the files whose LogDate lies in [since, until),
// oldest first; auto reads a day from its Daily file where there is one,
// else from its Hourly files.
func TestELFHistoryListsByLogDateAndIntervalRule(t *testing.T) {
	now := time.Date(2026, 11, 4, 12, 0, 0, 0, time.UTC)
	since, until := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 4, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		interval string
		since    time.Time
		want     []string
	}{
		{"auto", since, []string{"0ATd1", "0ATd2", "0ATh300", "0ATh313"}},
		{"Hourly", since, []string{"0ATh100", "0ATh113", "0ATh200", "0ATh213", "0ATh300", "0ATh313"}},
		{"Daily", since, []string{"0ATd1", "0ATd2"}},
		{"auto", since.Add(24 * time.Hour), []string{"0ATd2", "0ATh300", "0ATh313"}},
		{"Hourly", since.Add(36 * time.Hour), []string{"0ATh213", "0ATh300", "0ATh313"}},
	} {
		t.Run(tc.interval+tc.since.Format("_0102T15"), func(t *testing.T) {
			org := historyOrg()
			s := elfSource(t, org, salesforce.ELFSpec{Interval: tc.interval, EventTypes: []string{"API"}}, now)
			files, err := s.History(t.Context(), "API", tc.since, until)
			if err != nil {
				t.Fatal(err)
			}
			if got := historyIDs(files); !slices.Equal(got, tc.want) {
				t.Fatalf("listed %v, want %v (queries %q)", got, tc.want, org.QueriesSoFar())
			}
			for _, f := range files {
				if f.EventType != "API" || f.Created == "" || f.Length == 0 || f.LogDate.Before(tc.since) {
					t.Fatalf("file %+v", f)
				}
			}
		})
	}
}

// "*" discovers every type the org has, in the configured interval.
func TestELFHistoryTypesDiscovers(t *testing.T) {
	now := time.Date(2026, 11, 4, 12, 0, 0, 0, time.UTC)
	s := elfSource(t, historyOrg(), salesforce.ELFSpec{Interval: "auto", EventTypes: []string{"*"}}, now)
	types, err := s.HistoryTypes(t.Context())
	if err != nil || !slices.Equal(types, []string{"API", "Login"}) {
		t.Fatalf("types %v, %v; want API and Login", types, err)
	}
	s = elfSource(t, historyOrg(), salesforce.ELFSpec{Interval: "Hourly", EventTypes: []string{"*"}}, now)
	if types, err = s.HistoryTypes(t.Context()); err != nil || !slices.Equal(types, []string{"API"}) {
		t.Fatalf("Hourly types %v, %v; want API only", types, err)
	}
}

// A file is read whole, in order, at the rows' own times: transformed, but
// never sampled, and its bytes counted.
func TestELFReadHistoryTransformsButNeverSamples(t *testing.T) {
	now := time.Date(2026, 11, 4, 12, 0, 0, 0, time.UTC)
	org := historyOrg()
	sh := shaper(t, shape.Config{Sample: map[string]float64{"API": 0}, Rules: []shape.Rule{
		{Action: shape.DropField, Fields: []string{"QUERY"}},
		{Action: shape.DropRow, Match: map[string]string{"REQUEST_ID": "d1-3"}},
	}})
	s := elfSource(t, org, salesforce.ELFSpec{Interval: "auto", EventTypes: []string{"API"}, Shaper: sh}, now)
	files, err := s.History(t.Context(), "API", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), now)
	if err != nil {
		t.Fatal(err)
	}
	var got []ports.Entry
	read := 0
	if err := s.ReadHistory(t.Context(), files[0], func(e ports.Entry) error { got = append(got, e); return nil }, func(n int) { read += n }); err != nil {
		t.Fatal(err)
	}
	if ids := requestIDs(got); !slices.Equal(ids, []string{"d1-0", "d1-1", "d1-2"}) {
		t.Fatalf("rows %v, want d1-0..2 (sampling 0 ignored, d1-3 dropped by its transform)", ids)
	}
	for i, e := range got {
		if strings.Contains(e.Line, "QUERY") || e.Labels["source"] != "eventlogfile" || e.Labels["event_type"] != "API" ||
			!e.Time.Equal(time.Date(2026, 11, 28, 10, 0, i, 0, time.UTC)) || e.Checkpoint.Key != "" {
			t.Fatalf("entry %d: %+v", i, e)
		}
	}
	if want := len(fakesf.CRLF(csvBody("d1", 4))); read != want {
		t.Fatalf("%d bytes counted, want the body's %d", read, want)
	}
	boom := errors.New("sink refused")
	if err := s.ReadHistory(t.Context(), files[1], func(ports.Entry) error { return boom }, nil); !errors.Is(err, boom) || ports.IsTransient(err) {
		t.Fatalf("an emit error came back as %v, want it as it is", err)
	}
	org.Unavailable = 1
	if err := s.ReadHistory(t.Context(), files[1], func(ports.Entry) error { return nil }, nil); !ports.IsTransient(err) {
		t.Fatalf("a failed download came back as %v, want a transient error", err)
	}
}
