package salesforce_test

import (
	"slices"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// A type's promoted columns become labels and its metadata columns
// structured metadata; empty cells set neither; other types are untouched.
func TestELFTypesPromoteColumns(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	org := &fakesf.ELFOrg{}
	org.Add("0AT1", "ReportExport", now.Add(-2*time.Hour), "EVENT_TYPE,TIMESTAMP_DERIVED,REQUEST_ID,REPORT_ID,DELEGATED_USER\r\n"+
		"ReportExport,2026-11-28T10:00:00.000Z,r1,00O1,admin@acme.example\r\n"+
		"ReportExport,2026-11-28T10:00:01.000Z,r2,,\r\n")
	org.Add("0AT2", "API", now.Add(-2*time.Hour), "EVENT_TYPE,TIMESTAMP_DERIVED,REQUEST_ID,REPORT_ID,DELEGATED_USER\r\n"+
		"API,2026-11-28T10:00:00.000Z,a1,00O2,someone\r\n")
	s := elfSource(t, org, salesforce.ELFSpec{EventTypes: []string{"ReportExport", "API"},
		Types: map[string]salesforce.ELFTypeSpec{"ReportExport": {Metadata: []string{"REPORT_ID"}, Labels: []string{"DELEGATED_USER"}}}}, now)
	got := runELF(t, s, nil, func(es []ports.Entry) bool { return len(es) >= 3 })
	byID := map[string]ports.Entry{}
	for _, e := range got {
		if ids := requestIDs([]ports.Entry{e}); len(ids) == 1 {
			byID[ids[0]] = e
		}
	}
	if e := byID["r1"]; e.Labels["DELEGATED_USER"] != "admin@acme.example" || e.Metadata["REPORT_ID"] != "00O1" || e.Labels["event_type"] != "ReportExport" {
		t.Errorf("r1: labels %v, metadata %v", e.Labels, e.Metadata)
	}
	if e := byID["r2"]; len(e.Labels) != 2 || len(e.Metadata) != 1 {
		t.Errorf("r2 (empty cells): labels %v, metadata %v; want only source, event_type and level", e.Labels, e.Metadata)
	}
	if e := byID["a1"]; e.Labels["DELEGATED_USER"] != "" || e.Metadata["REPORT_ID"] != "" {
		t.Errorf("API rows are not ReportExport's: labels %v, metadata %v", e.Labels, e.Metadata)
	}
}

// exclude leaves discovered types out, without regard to case, but never a
// type listed by name.
func TestELFExcludeFiltersDiscoveredTypes(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	org := &fakesf.ELFOrg{}
	for i, ty := range []string{"API", "RestApi", "Login", "Report"} {
		org.Add("0AT"+string(rune('1'+i)), ty, now.Add(-2*time.Hour), csvBody(ty, 1))
	}
	s := elfSource(t, org, salesforce.ELFSpec{EventTypes: []string{"*", "RestApi"}, Exclude: []string{"*api", "LOGIN"}}, now)
	got := runELF(t, s, nil, func(es []ports.Entry) bool { return len(es) >= 2 })
	var types []string
	for _, e := range got {
		if !slices.Contains(types, e.Labels["event_type"]) && !e.CheckpointOnly {
			types = append(types, e.Labels["event_type"])
		}
	}
	slices.Sort(types)
	if !slices.Equal(types, []string{"Report", "RestApi"}) {
		t.Errorf("types read %v, want Report and RestApi (listed by name)", types)
	}
}
