package salesforce_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// elfRig builds a source on org at now, logging to its own buffer;
// configure adjusts the token source's configuration.
func elfRig(t *testing.T, org *fakesf.ELFOrg, spec salesforce.ELFSpec, now time.Time, configure func(*salesforce.Config)) (*salesforce.ELFSource, *testenv.Buffer) {
	t.Helper()
	srv := httptest.NewServer(org)
	t.Cleanup(srv.Close)
	cfg := salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x"}
	if configure != nil {
		configure(&cfg)
	}
	a, err := salesforce.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if spec.PollInterval == 0 {
		spec.PollInterval = 20 * time.Millisecond
	}
	logs := &testenv.Buffer{}
	s, err := salesforce.NewELFSource(a, "60.0", spec, clockAt(now), slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	return s, logs
}

// rows is a body of n rows REQUEST_ID <prefix>-<i>.
func rows(prefix string, n int) string { return csvBody(prefix, n) }

// daily and hourly add files of type typ to org.
func daily(org *fakesf.ELFOrg, id, typ string, day, created time.Time, body string) {
	org.AddFile(fakesf.ELFFile{ID: id, EventType: typ, Interval: "Daily", LogDate: day, CreatedDate: created, Body: body})
}

func hourly(org *fakesf.ELFOrg, id, typ string, hour, created time.Time, seq int, body string) {
	org.AddFile(fakesf.ELFFile{ID: id, EventType: typ, Interval: "Hourly", LogDate: hour, CreatedDate: created, Sequence: seq, Body: body})
}

// has reports whether the rows emitted include every id.
func has(es []ports.Entry, ids ...string) bool {
	got := requestIDs(es)
	for _, id := range ids {
		if !slices.Contains(got, id) {
			return false
		}
	}
	return true
}

// intervalLines returns the source's "eventlogfile interval" log lines.
func intervalLines(logs *testenv.Buffer) []string {
	var out []string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, `msg="eventlogfile interval"`) {
			out = append(out, l)
		}
	}
	return out
}

var nov = func(d, h int) time.Time { return time.Date(2026, 11, d, h, 0, 0, 0, time.UTC) }

// The default interval (auto) on an org without Event Monitoring, which
// publishes Daily files only: they are read, the choice is logged once and
// reported. (Before, the default Hourly read nothing and said nothing.)
func TestELFAutoReadsDailyFilesWhereTheOrgHasNoHourlyOnes(t *testing.T) {
	org := &fakesf.ELFOrg{}
	daily(org, "0ATd26", "Login", nov(26, 0), nov(27, 3), rows("d26", 2))
	daily(org, "0ATd27", "Login", nov(27, 0), nov(28, 3), rows("d27", 1))
	s, logs := elfRig(t, org, salesforce.ELFSpec{EventTypes: []string{"*"}, Lookback: 72 * time.Hour}, nov(28, 12), nil)
	got := runELF(t, s, nil, func(es []ports.Entry) bool { return len(es) >= 3 })
	time.Sleep(100 * time.Millisecond) // more polls: the choice is logged once
	if ids := requestIDs(got); !slices.Equal(ids, []string{"d26-0", "d26-1", "d27-0"}) {
		t.Fatalf("rows %v", ids)
	}
	if iv := s.Intervals(); len(iv) != 1 || iv["Login"] != "Daily" {
		t.Fatalf("Intervals() = %v", iv)
	}
	if l := intervalLines(logs); len(l) != 1 || !strings.Contains(l[0], "level=INFO") || !strings.Contains(l[0], "event_type=Login") ||
		!strings.Contains(l[0], "interval=Daily") {
		t.Fatalf("interval log lines %q", l)
	}
	if q := org.QueriesSoFar(); q[0] != "SELECT EventType FROM EventLogFile GROUP BY EventType" || strings.Contains(q[1], "Interval =") {
		t.Fatalf("queries %q: discovery and listing take every interval", q[:2])
	}
	if !strings.Contains(got[2].Checkpoint.Value, `"interval":"Daily"`) {
		t.Fatalf("checkpoint %s does not record the interval", got[2].Checkpoint.Value)
	}
}

// An org with Event Monitoring publishes Daily and Hourly files of the same
// days: auto reads the Hourly ones only, never both.
func TestELFAutoReadsHourlyFilesOnlyWhereTheOrgPublishesBoth(t *testing.T) {
	org := &fakesf.ELFOrg{}
	hourly(org, "0ATh26", "API", nov(26, 10), nov(26, 11), 1, rows("h26", 1)) // before the lookback: Nov 27 is not the first Hourly day
	hourly(org, "0ATh10", "API", nov(27, 10), nov(27, 13), 1, rows("h10", 2))
	hourly(org, "0ATh11", "API", nov(27, 11), nov(27, 14), 1, rows("h11", 1))
	daily(org, "0ATd27", "API", nov(27, 0), nov(28, 3), rows("d27", 3))
	hourly(org, "0ATh28", "API", nov(28, 1), nov(28, 4), 1, rows("h28", 1))
	s, _ := elfRig(t, org, salesforce.ELFSpec{Interval: "auto", EventTypes: []string{"API"}, Lookback: 48 * time.Hour}, nov(28, 12), nil)
	got := runELF(t, s, nil, func(es []ports.Entry) bool { return has(es, "h28-0") })
	time.Sleep(100 * time.Millisecond)
	if ids := requestIDs(got); !slices.Equal(ids, []string{"h10-0", "h10-1", "h11-0", "h28-0"}) {
		t.Fatalf("rows %v: want the Hourly files only", ids)
	}
	if d := org.DownloadsSoFar(); slices.Contains(d, "0ATd27") {
		t.Fatalf("downloads %v: the Daily file was read besides the Hourly ones", d)
	}
	if iv := s.Intervals(); iv["API"] != "Hourly" {
		t.Fatalf("Intervals() = %v", iv)
	}
}

// Event Monitoring is licensed at 14:00 on Nov 26: the Daily file of Nov 26
// covers the whole day, Hourly files begin at 14:00. The type goes on
// reading Daily files up to Nov 26 and reads Hourly files from Nov 27 on:
// no day skipped, none read twice, and a restart from a checkpoint taken
// mid-switch keeps the rule.
func TestELFAutoSwitchesFromDailyToHourlyAtTheNextDay(t *testing.T) {
	org := &fakesf.ELFOrg{}
	daily(org, "0ATd25", "API", nov(25, 0), nov(26, 3), rows("d25", 1))
	s, logs := elfRig(t, org, salesforce.ELFSpec{Interval: "auto", EventTypes: []string{"API"}, Lookback: 48 * time.Hour}, nov(26, 12), nil)
	got := runELF(t, s, nil, func(es []ports.Entry) bool {
		if !has(es, "d25-0") {
			return false
		}
		if len(org.DownloadsSoFar()) == 1 { // now the org publishes Hourly files too
			hourly(org, "0ATh26a", "API", nov(26, 14), nov(26, 17), 1, rows("h26a", 1))
			hourly(org, "0ATh26b", "API", nov(26, 15), nov(26, 18), 1, rows("h26b", 1))
			daily(org, "0ATd26", "API", nov(26, 0), nov(27, 3), rows("d26", 2)) // the whole of Nov 26
			hourly(org, "0ATh27a", "API", nov(27, 0), nov(27, 3).Add(30*time.Minute), 1, rows("h27a", 1))
			hourly(org, "0ATh26c", "API", nov(26, 15), nov(27, 4), 2, rows("h26c", 1)) // late events of 15:00
			hourly(org, "0ATh27b", "API", nov(27, 1), nov(27, 5), 1, rows("h27b", 1))
			daily(org, "0ATd27", "API", nov(27, 0), nov(28, 3), rows("d27", 2))
		}
		return has(es, "h27b-0")
	})
	time.Sleep(100 * time.Millisecond)
	if ids := requestIDs(got); !slices.Equal(ids, []string{"d25-0", "d26-0", "d26-1", "h27a-0", "h27b-0"}) {
		t.Fatalf("rows %v: want Daily up to Nov 26, Hourly from Nov 27", ids)
	}
	l := intervalLines(logs)
	if len(l) != 2 || !strings.Contains(l[0], "interval=Daily") || !strings.Contains(l[1], "interval=Hourly") ||
		!strings.Contains(l[1], "Daily files with a LogDate before 2026-11-27, Hourly files from it") {
		t.Fatalf("interval log lines %q: want Daily, then Hourly with its rule", l)
	}
	if iv := s.Intervals(); iv["API"] != "Hourly" {
		t.Fatalf("Intervals() = %v", iv)
	}
	// The checkpoint committed with Nov 26's Daily file carries the rule.
	var mid string
	for _, e := range got {
		if strings.Contains(e.Line, `"d26-1"`) {
			mid = e.Checkpoint.Value
		}
	}
	if !strings.Contains(mid, `"interval":"Hourly","interval_since":"2026-11-27T00:00:00.000+0000"`) {
		t.Fatalf("checkpoint after Nov 26's Daily file: %s", mid)
	}
	s2, _ := elfRig(t, org, salesforce.ELFSpec{Interval: "auto", EventTypes: []string{"API"}}, nov(28, 12), nil)
	again := runELF(t, s2, map[string]string{"eventlogfile:API": mid}, func(es []ports.Entry) bool { return has(es, "h27b-0") })
	time.Sleep(50 * time.Millisecond)
	if ids := requestIDs(again); !slices.Equal(ids, []string{"h27a-0", "h27b-0"}) {
		t.Fatalf("after a restart from %s: rows %v", mid, ids)
	}
}

// Event Monitoring ends at 09:00 on Nov 26: Hourly files stop, Daily files
// go on. Once a Daily file covers a day without Hourly files, the type
// reads Daily files from the day the Hourly files stopped, whose Daily
// file holds the hours after they stopped. Listed together, Nov 26 is read
// from its Daily file only; when its Hourly file was read first, Nov 26 is
// read again (never a gap).
func TestELFAutoSwitchesFromHourlyToDailyWhenHourlyFilesStop(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("daily files listed later %v", late), func(t *testing.T) {
			org := &fakesf.ELFOrg{}
			hourly(org, "0ATh23", "API", nov(23, 10), nov(23, 11), 1, rows("h23", 1)) // before the lookback
			hourly(org, "0ATh25a", "API", nov(25, 10), nov(25, 13), 1, rows("h25a", 1))
			hourly(org, "0ATh26", "API", nov(26, 8), nov(26, 11), 1, rows("h26", 1))
			dailies := func() {
				daily(org, "0ATd25", "API", nov(25, 0), nov(26, 3), rows("d25", 1))
				daily(org, "0ATd26", "API", nov(26, 0), nov(27, 3), rows("d26", 1))
				daily(org, "0ATd27", "API", nov(27, 0), nov(28, 3), rows("d27", 1))
			}
			if !late {
				dailies()
			}
			s, logs := elfRig(t, org, salesforce.ELFSpec{Interval: "auto", EventTypes: []string{"API"}, Lookback: 96 * time.Hour}, nov(28, 12), nil)
			got := runELF(t, s, nil, func(es []ports.Entry) bool {
				if late && has(es, "h26-0") && len(org.DownloadsSoFar()) == 2 {
					dailies()
				}
				return has(es, "d27-0")
			})
			time.Sleep(100 * time.Millisecond)
			want := []string{"h25a-0", "d26-0", "d27-0"}
			if late {
				want = []string{"h25a-0", "h26-0", "d26-0", "d27-0"}
			}
			if ids := requestIDs(got); !slices.Equal(ids, want) {
				t.Fatalf("rows %v, want %v", ids, want)
			}
			// Decided in one poll, the rule is logged once; else the
			// Hourly choice first.
			l := intervalLines(logs)
			if n := len(l); n != map[bool]int{false: 1, true: 2}[late] || !strings.Contains(l[0], "interval=Hourly") != !late ||
				!strings.Contains(l[n-1], "interval=Daily") || !strings.Contains(l[n-1], "Hourly files with a LogDate before 2026-11-26, Daily files from it") ||
				!strings.Contains(l[n-1], "no Hourly file for 2026-11-27 or later") {
				t.Fatalf("interval log lines %q", l)
			}
			checks := 0
			for _, q := range org.QueriesSoFar() {
				if strings.Contains(q, "ORDER BY LogDate") {
					checks++
				}
			}
			// Two per Daily file: the first Hourly file from its day on, and
			// the last before it (Nov 25, 26: Hourly files that day, not
			// from its first hour, and before it; Nov 27: none that day or
			// later, the last before it on Nov 26). Nov 25's is listed only
			// when the Daily files come with the rest.
			if want := map[bool]int{false: 6, true: 4}[late]; checks != want {
				t.Fatalf("%d questions for Hourly files, want %d, each asked once", checks, want)
			}
		})
	}
}

// The defect this guards against: an org whose Hourly files begin today
// (Nov 28), while yesterday has a Daily file only, flipped the type to
// Daily ("a Daily file covers a day the org published no Hourly file
// for") and back to Hourly, skipped today's Hourly files and read rows
// twice. Now the day without Hourly files is read from its Daily file and
// the type stays Hourly: from today when today's Hourly files begin at its
// first hour; else from tomorrow, today being read from its Daily file
// (the Hourly files miss the hours before they began).
func TestELFAutoReadsADayWithoutHourlyFilesFromItsDailyFile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		begin int // the hour of Nov 28 the Hourly files begin
		first int // the files the first poll reads
		want  []string
		rule  string
	}{
		{"hourly files from the first hour", 0, 3, []string{"h28a-0", "d27-0", "h28b-0", "h29-0"}, "Daily files with a LogDate before 2026-11-28, Hourly files from it"},
		{"hourly files from 09:00", 9, 1, []string{"d27-0", "d28-0", "d28-1", "h29-0"}, "Daily files with a LogDate before 2026-11-29, Hourly files from it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			org := &fakesf.ELFOrg{}
			daily(org, "0ATd27", "API", nov(27, 0), nov(28, 3), rows("d27", 1))
			hourly(org, "0ATh28a", "API", nov(28, tc.begin), nov(28, tc.begin+1), 1, rows("h28a", 1))
			hourly(org, "0ATh28b", "API", nov(28, 10), nov(28, 11), 1, rows("h28b", 1))
			s, logs := elfRig(t, org, salesforce.ELFSpec{Interval: "auto", EventTypes: []string{"API"}, Lookback: 36 * time.Hour}, nov(28, 12), nil)
			got := runELF(t, s, nil, func(es []ports.Entry) bool {
				if has(es, "d27-0") && len(org.DownloadsSoFar()) == tc.first { // the next day's files
					daily(org, "0ATd28", "API", nov(28, 0), nov(29, 3), rows("d28", 2))
					hourly(org, "0ATh29", "API", nov(29, 0), nov(29, 4), 1, rows("h29", 1))
				}
				return has(es, "h29-0")
			})
			time.Sleep(100 * time.Millisecond)
			if ids := requestIDs(got); !slices.Equal(ids, tc.want) {
				t.Fatalf("rows %v, want %v", ids, tc.want)
			}
			l := intervalLines(logs)
			if len(l) != 1 || !strings.Contains(l[0], "interval=Hourly") || !strings.Contains(l[0], tc.rule) {
				t.Fatalf("interval log lines %q: want one, Hourly by the rule %q", l, tc.rule)
			}
			if iv := s.Intervals(); iv["API"] != "Hourly" {
				t.Fatalf("Intervals() = %v", iv)
			}
		})
	}
}

// Event Monitoring lapses for Nov 26 and is back from Nov 27 00:00: the
// type reads Nov 26 from its Daily file and nothing twice, the rule
// (three ranges) is in the checkpoint, and a restart keeps it.
func TestELFAutoReadsAGapInTheHourlyFilesFromItsDailyFile(t *testing.T) {
	org := &fakesf.ELFOrg{}
	hourly(org, "0ATh23", "API", nov(23, 10), nov(23, 11), 1, rows("h23", 1)) // before the lookback
	hourly(org, "0ATh25a", "API", nov(25, 10), nov(25, 11), 1, rows("h25a", 1))
	hourly(org, "0ATh25b", "API", nov(25, 23), nov(26, 0).Add(30*time.Minute), 1, rows("h25b", 1))
	daily(org, "0ATd25", "API", nov(25, 0), nov(26, 3), rows("d25", 1))
	hourly(org, "0ATh27a", "API", nov(27, 0), nov(27, 1), 1, rows("h27a", 1))
	daily(org, "0ATd26", "API", nov(26, 0), nov(27, 3), rows("d26", 2))
	hourly(org, "0ATh27b", "API", nov(27, 5), nov(27, 6), 1, rows("h27b", 1))
	daily(org, "0ATd27", "API", nov(27, 0), nov(28, 3), rows("d27", 1))
	s, logs := elfRig(t, org, salesforce.ELFSpec{Interval: "auto", EventTypes: []string{"API"}, Lookback: 96 * time.Hour}, nov(28, 12), nil)
	got := runELF(t, s, nil, func(es []ports.Entry) bool { return has(es, "h27b-0") })
	time.Sleep(100 * time.Millisecond)
	if ids := requestIDs(got); !slices.Equal(ids, []string{"h25a-0", "h25b-0", "h27a-0", "d26-0", "d26-1", "h27b-0"}) {
		t.Fatalf("rows %v: want Nov 25 and 27 from Hourly files, Nov 26 from its Daily file", ids)
	}
	const rule = "Hourly files with a LogDate before 2026-11-26, Daily files from it, Hourly files from 2026-11-27"
	if l := intervalLines(logs); len(l) != 1 || !strings.Contains(l[0], "interval=Hourly") || !strings.Contains(l[0], rule) ||
		!strings.Contains(l[0], "no Hourly file from 2026-11-26 to 2026-11-26") {
		t.Fatalf("interval log lines %q: want one, by the rule %q", l, rule)
	}
	var mid string
	for _, e := range got {
		if strings.Contains(e.Line, `"d26-1"`) {
			mid = e.Checkpoint.Value
		}
	}
	if !strings.Contains(mid, `"interval":"Hourly","interval_since":"2026-11-27T00:00:00.000+0000","interval_earlier":[{"interval":"Daily","since":"2026-11-26T00:00:00.000+0000"}]`) {
		t.Fatalf("checkpoint after Nov 26's Daily file: %s", mid)
	}
	if err := salesforce.CheckELFCheckpoint(mid); err != nil {
		t.Fatal(err)
	}
	s2, logs2 := elfRig(t, org, salesforce.ELFSpec{Interval: "auto", EventTypes: []string{"API"}}, nov(28, 12), nil)
	again := runELF(t, s2, map[string]string{"eventlogfile:API": mid}, func(es []ports.Entry) bool { return has(es, "h27b-0") })
	time.Sleep(50 * time.Millisecond)
	if ids := requestIDs(again); !slices.Equal(ids, []string{"h27b-0"}) {
		t.Fatalf("after a restart from %s: rows %v", mid, ids)
	}
	if l := intervalLines(logs2); len(l) != 1 || !strings.Contains(l[0], rule) || !strings.Contains(l[0], "reason=\"the stored checkpoint\"") {
		t.Fatalf("after a restart: interval log lines %q", l)
	}
}

// A checkpoint written before intervals were recorded was read Hourly (the
// old default). On an org with Daily files only, that read nothing; now
// the type turns to Daily and reads them.
func TestELFAutoTakesAnOldCheckpointAndFindsTheDailyFiles(t *testing.T) {
	org := &fakesf.ELFOrg{}
	daily(org, "0ATd26", "API", nov(26, 0), nov(27, 3), rows("d26", 1))
	daily(org, "0ATd27", "API", nov(27, 0), nov(28, 3), rows("d27", 1))
	old := `{"last_created":"2026-11-26T12:00:00.000+0000","ids":[]}`
	s, logs := elfRig(t, org, salesforce.ELFSpec{EventTypes: []string{"API"}}, nov(28, 12), nil)
	got := runELF(t, s, map[string]string{"eventlogfile:API": old}, func(es []ports.Entry) bool { return len(es) >= 2 })
	if ids := requestIDs(got); !slices.Equal(ids, []string{"d26-0", "d27-0"}) {
		t.Fatalf("rows %v", ids)
	}
	if l := intervalLines(logs); len(l) != 1 || !strings.Contains(l[0], "interval=Daily") {
		t.Fatalf("interval log lines %q", l)
	}
}

// Salesforce writes a second Hourly file for an hour (Sequence 2, a new
// Id, created later) with the events that arrived late: it is read, and
// the rows of sequence 1 are neither lost nor read again.
func TestELFReadsALateSequenceTwoFile(t *testing.T) {
	org := &fakesf.ELFOrg{}
	hourly(org, "0ATs1", "API", nov(28, 9), nov(28, 11), 1, rows("s1", 3))
	s, _ := elfRig(t, org, salesforce.ELFSpec{EventTypes: []string{"API"}}, nov(28, 12), nil)
	got := runELF(t, s, nil, func(es []ports.Entry) bool { return len(es) >= 3 })
	last := got[len(got)-1].Checkpoint.Value
	hourly(org, "0ATs2", "API", nov(28, 9), nov(28, 11).Add(90*time.Minute), 2, rows("s2", 2))
	s2, _ := elfRig(t, org, salesforce.ELFSpec{EventTypes: []string{"API"}}, nov(28, 13), nil)
	again := runELF(t, s2, map[string]string{"eventlogfile:API": last}, func(es []ports.Entry) bool { return len(es) >= 2 })
	time.Sleep(50 * time.Millisecond)
	if ids := append(requestIDs(got), requestIDs(again)...); !slices.Equal(ids, []string{"s1-0", "s1-1", "s1-2", "s2-0", "s2-1"}) {
		t.Fatalf("rows %v: want sequence 1 once, then sequence 2", ids)
	}
	if d := org.DownloadsSoFar(); !slices.Equal(d, []string{"0ATs1", "0ATs2"}) {
		t.Fatalf("downloads %v", d)
	}
}

// The source asks for gzip on every download, whatever the transport, and
// reads the compressed body byte for byte.
func TestELFDownloadsCompressedFiles(t *testing.T) {
	for _, transport := range []string{"default", "without compression"} {
		t.Run(transport, func(t *testing.T) {
			org := &fakesf.ELFOrg{}
			org.Add("0AT1", "API", nov(28, 10), rows("a", 300))
			org.Add("0AT2", "API", nov(28, 11), rows("b", 2))
			s, _ := elfRig(t, org, salesforce.ELFSpec{EventTypes: []string{"API"}}, nov(28, 12), func(c *salesforce.Config) {
				if transport != "default" {
					c.HTTPClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}
				}
			})
			got := runELF(t, s, nil, func(es []ports.Entry) bool { return len(es) >= 302 })
			if ids := requestIDs(got); len(ids) != 302 || ids[0] != "a-0" || ids[301] != "b-1" {
				t.Fatalf("%d rows", len(ids))
			}
			var row map[string]string
			if err := json.Unmarshal([]byte(got[0].Line), &row); err != nil || row["QUERY"] != "SELECT Id\r\nFROM Account" {
				t.Fatalf("row %v: the quoted CRLF was not kept", row)
			}
			if org.Gzipped != 2 {
				t.Fatalf("%d of 2 downloads compressed: the source did not ask for gzip", org.Gzipped)
			}
		})
	}
}

// REQUEST_LIMIT_EXCEEDED stops the poll of every type quietly (DEBUG, the
// org's gate logs once) and moves no checkpoint; the next poll reads
// everything.
func TestELFThrottledPollStopsEveryTypeAndMovesNoCheckpoint(t *testing.T) {
	org := &fakesf.ELFOrg{Throttle: 1}
	for i, typ := range []string{"API", "Login", "Report"} {
		org.Add(fmt.Sprintf("0AT%d", i), typ, nov(28, 10), rows(typ, 2))
	}
	// The gate stays closed for less than a poll interval, as the app sets
	// it (the shortest poll interval of the org's sources).
	pause := func(c *salesforce.Config) { c.ThrottlePause = 10 * time.Millisecond }
	s, logs := elfRig(t, org, salesforce.ELFSpec{EventTypes: []string{"API", "Login", "Report"}, Concurrency: 1}, nov(28, 12), pause)
	got := runELF(t, s, nil, func(es []ports.Entry) bool { return len(es) >= 6 })
	if ids := requestIDs(got); len(ids) != 6 {
		t.Fatalf("rows %v", ids)
	}
	out := logs.String()
	if strings.Contains(out, "level=WARN") || strings.Contains(out, "level=ERROR") {
		t.Fatalf("a throttled poll logged above DEBUG:\n%s", out)
	}
	if n := strings.Count(out, "level=DEBUG"); n < 1 || n > 3 {
		t.Fatalf("%d DEBUG lines for the throttled poll, want one per type at most:\n%s", n, out)
	}
	if q := len(org.QueriesSoFar()); q != 4 {
		t.Fatalf("%d listings, want 4: the throttled one, then one per type at the next poll", q)
	}

	// A download that meets the limit: its rows are not emitted and the
	// checkpoint stays before the file; the next poll reads it whole.
	org2 := &fakesf.ELFOrg{ThrottleLogFile: map[string]int{"0AT2": 1}}
	org2.Add("0AT1", "API", nov(28, 9), rows("a", 2))
	org2.Add("0AT2", "API", nov(28, 10), rows("b", 2))
	s2, logs2 := elfRig(t, org2, salesforce.ELFSpec{EventTypes: []string{"API"}}, nov(28, 12), pause)
	got = runELF(t, s2, nil, func(es []ports.Entry) bool { return len(es) >= 4 })
	if ids := requestIDs(got); !slices.Equal(ids, []string{"a-0", "a-1", "b-0", "b-1"}) {
		t.Fatalf("rows %v", ids)
	}
	if strings.Contains(got[1].Checkpoint.Value, "0AT2") || !strings.Contains(got[3].Checkpoint.Value, "0AT2") {
		t.Fatalf("checkpoints %s, %s", got[1].Checkpoint.Value, got[3].Checkpoint.Value)
	}
	if d := org2.DownloadsSoFar(); !slices.Equal(d, []string{"0AT1", "0AT2"}) {
		t.Fatalf("downloads %v", d)
	}
	if out := logs2.String(); strings.Contains(out, "level=WARN") {
		t.Fatalf("a throttled download logged a WARN:\n%s", out)
	}
}

// A row without TIMESTAMP_DERIVED or TIMESTAMP takes its file's LogDate,
// which a Daily file regenerated in place keeps: the copy read again is
// the same entry, and Loki keeps one.
func TestELFRowsOfARegeneratedFileAreTheSameEntries(t *testing.T) {
	org := &fakesf.ELFOrg{}
	body := "EVENT_TYPE,REQUEST_ID,USER_ID\nLogout,r1,005A\nLogout,r2,005B\n"
	daily(org, "0ATd", "Logout", nov(27, 0), nov(28, 3), body)
	s, _ := elfRig(t, org, salesforce.ELFSpec{Interval: "Daily", EventTypes: []string{"Logout"}}, nov(28, 12), nil)
	first := runELF(t, s, nil, func(es []ports.Entry) bool { return len(es) >= 2 })
	daily(org, "0ATd", "Logout", nov(27, 0), nov(28, 7), body+"Logout,r3,005C\n") // regenerated in place
	s2, _ := elfRig(t, org, salesforce.ELFSpec{Interval: "Daily", EventTypes: []string{"Logout"}}, nov(28, 12), nil)
	second := runELF(t, s2, map[string]string{"eventlogfile:Logout": first[1].Checkpoint.Value}, func(es []ports.Entry) bool { return len(es) >= 3 })
	for i := range 2 {
		a, b := first[i], second[i]
		if !a.Time.Equal(b.Time) || a.Line != b.Line || fmt.Sprint(a.Labels) != fmt.Sprint(b.Labels) || fmt.Sprint(a.Metadata) != fmt.Sprint(b.Metadata) {
			t.Fatalf("row %d read again differs:\n%v %s\n%v %s", i, a.Time, a.Line, b.Time, b.Line)
		}
	}
	if !first[0].Time.Equal(nov(27, 0)) {
		t.Fatalf("time %v, want the LogDate", first[0].Time)
	}
}
