package salesforce_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// Edge cases of the interval auto rule (elf_interval.go).

// stage runs a source on org at now from checkpoint cp for a few polls and
// returns the rows and the last checkpoint (cp when nothing was emitted).
func stage(t *testing.T, org *fakesf.ELFOrg, spec salesforce.ELFSpec, now time.Time, cp string, stop func([]ports.Entry) bool) ([]ports.Entry, string) {
	t.Helper()
	s, _ := elfRig(t, org, spec, now, nil)
	var resume map[string]string
	if cp != "" {
		resume = map[string]string{"eventlogfile:API": cp}
	}
	if stop == nil {
		stop = func([]ports.Entry) bool { return false }
	}
	deadline := time.Now().Add(150 * time.Millisecond) // several polls
	got := runELF(t, s, resume, func(es []ports.Entry) bool { return stop(es) || time.Now().After(deadline) })
	for i := len(got) - 1; i >= 0; i-- {
		if got[i].Checkpoint.Key == "eventlogfile:API" {
			return got, got[i].Checkpoint.Value
		}
	}
	return got, cp
}

// Event Monitoring ends at 10:30 on Nov 25: the last Hourly file is of
// 10:00, and Nov 25's Daily file is the only file with the events of
// 10:30-23:59. It is first listed beside that Hourly file ("covered") and
// skipped, and the watermark moves past it before Nov 26's Daily file shows
// that the Hourly files stopped. The switch then moves the watermark back
// to Nov 25's Daily file and reads it. (Before, Nov 25's rows after 10:30
// were lost.)
//
//   - "returns": Event Monitoring is back on Nov 27 at 00:00, and Nov 27's
//     first Hourly file (created 01:00) is read before Nov 26's Daily file
//     (created 03:00) is listed;
//   - "late sequence 2": a Sequence-2 Hourly file of Nov 25 09:00, created
//     after Nov 25's Daily file, is read.
func TestELFAutoReadsTheRestOfTheDayHourlyFilesStoppedIn(t *testing.T) {
	spec := salesforce.ELFSpec{Interval: "auto", EventTypes: []string{"API"}, Lookback: 24 * time.Hour}
	for _, variant := range []string{"returns", "late sequence 2"} {
		t.Run(variant, func(t *testing.T) {
			org := &fakesf.ELFOrg{}
			hourly(org, "0ATh25a", "API", nov(25, 9), nov(25, 10), 1, rows("h25a", 1))
			hourly(org, "0ATh25b", "API", nov(25, 10), nov(25, 11), 1, rows("h25b", 1))
			all, cp := stage(t, org, spec, nov(25, 12), "", func(es []ports.Entry) bool { return has(es, "h25b-0") })

			daily(org, "0ATd25", "API", nov(25, 0), nov(26, 3), rows("d25", 2)) // Nov 25 00:00-23:59
			var at time.Time
			if variant == "returns" {
				hourly(org, "0ATh27a", "API", nov(27, 0), nov(27, 1), 1, rows("h27a", 1))
				at = nov(27, 2)
			} else {
				hourly(org, "0ATh25s2", "API", nov(25, 9), nov(26, 5), 2, rows("h25s2", 1))
				at = nov(26, 6)
			}
			got, cp := stage(t, org, spec, at, cp, nil)
			all = append(all, got...)

			daily(org, "0ATd26", "API", nov(26, 0), nov(27, 3), rows("d26", 1))
			daily(org, "0ATd27", "API", nov(27, 0), nov(28, 3), rows("d27", 1))
			got, _ = stage(t, org, spec, nov(28, 12), cp, nil)
			all = append(all, got...)

			if !has(all, "d26-0") {
				t.Fatalf("rows %v: Nov 26 not read at all", requestIDs(all))
			}
			if !has(all, "d25-0", "d25-1") {
				t.Fatalf("rows %v: Nov 25's Daily file (the events after the Hourly files stopped at 10:00) was never read", requestIDs(all))
			}
		})
	}
}

// A fresh start (no checkpoint) on an org whose Hourly files began on Nov 27
// at 14:00 (Event Monitoring licensed then): whatever the lookback, Nov 27
// (the first day with Hourly files, which began after its first hour) is
// read from its Daily file, and its Hourly files are not read. (Before,
// with the default 24h lookback, Nov 27's Daily file was skipped as
// "covered" by its 14:00 Hourly file and 00:00-13:59 were lost.)
func TestELFAutoFreshStartReadsTheFirstHourlyDayFromItsDailyFile(t *testing.T) {
	for _, lookback := range []time.Duration{48 * time.Hour, 24 * time.Hour} {
		t.Run(lookback.String(), func(t *testing.T) {
			org := &fakesf.ELFOrg{}
			daily(org, "0ATd26", "API", nov(26, 0), nov(27, 3), rows("d26", 1))
			hourly(org, "0ATh27a", "API", nov(27, 14), nov(27, 15), 1, rows("h27a", 1))
			hourly(org, "0ATh27b", "API", nov(27, 20), nov(27, 21), 1, rows("h27b", 1))
			daily(org, "0ATd27", "API", nov(27, 0), nov(28, 3), rows("d27", 2)) // the whole of Nov 27
			hourly(org, "0ATh28a", "API", nov(28, 0), nov(28, 1), 1, rows("h28a", 1))
			hourly(org, "0ATh28b", "API", nov(28, 5), nov(28, 6), 1, rows("h28b", 1))
			s, _ := elfRig(t, org, salesforce.ELFSpec{Interval: "auto", EventTypes: []string{"API"}, Lookback: lookback}, nov(28, 12), nil)
			got := runELF(t, s, nil, func(es []ports.Entry) bool { return has(es, "h28b-0") })
			time.Sleep(100 * time.Millisecond)
			ids := requestIDs(got)
			if !has(got, "d27-0", "d27-1") {
				t.Fatalf("rows %v: Nov 27's Daily file, the only file with 00:00-13:59, was not read", ids)
			}
			if slices.ContainsFunc(ids, func(id string) bool { return strings.HasPrefix(id, "h27") }) {
				t.Fatalf("rows %v: Nov 27 read from both intervals", ids)
			}
		})
	}
}

// The interval rule decides on settled files only. An org with Event
// Monitoring whose only activity on Nov 26 is at 23:00 gets that Hourly
// file at 04:00 on Nov 27, an hour after Nov 26's Daily file. At 03:30,
// with a 2h settle window, Nov 26's Daily file (30 minutes old) decides
// nothing; later both Daily files are covered and nothing is read twice.
// (Before, it switched the type to Daily from Nov 25, read Nov 25 again
// and switched back.)
func TestELFAutoDecidesOnSettledFilesOnly(t *testing.T) {
	org := &fakesf.ELFOrg{}
	hourly(org, "0ATh24", "API", nov(24, 10), nov(24, 11), 1, rows("h24", 1)) // Hourly files before: Nov 25 is not their first day
	hourly(org, "0ATh25", "API", nov(25, 10), nov(25, 11), 1, rows("h25", 1))
	daily(org, "0ATd25", "API", nov(25, 0), nov(26, 3), rows("d25", 1))
	daily(org, "0ATd26", "API", nov(26, 0), nov(27, 3), rows("d26", 1))
	cp := `{"last_created":"2026-11-25T11:00:00.000+0000","ids":[["0ATh25","2026-11-25T11:00:00.000+0000"]],"interval":"Hourly"}`
	spec := salesforce.ELFSpec{Interval: "auto", EventTypes: []string{"API"}, SettleWindow: 2 * time.Hour}
	all, cp := stage(t, org, spec, nov(27, 3).Add(30*time.Minute), cp, nil)

	hourly(org, "0ATh26", "API", nov(26, 23), nov(27, 4), 1, rows("h26", 1))
	hourly(org, "0ATh27", "API", nov(27, 3), nov(27, 4).Add(30*time.Minute), 1, rows("h27", 1))
	got, _ := stage(t, org, spec, nov(28, 12), cp, func(es []ports.Entry) bool { return has(es, "h27-0") })
	all = append(all, got...)
	if ids := requestIDs(all); !slices.Equal(ids, []string{"h26-0", "h27-0"}) {
		t.Fatalf("rows %v, want [h26-0 h27-0]: Nov 25 was read from its Hourly file already", ids)
	}
}
