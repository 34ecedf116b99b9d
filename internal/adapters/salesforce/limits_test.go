package salesforce_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

func TestLimitsReadsEveryLimit(t *testing.T) {
	lim := fakesf.DefaultLimits()
	srv := httptest.NewServer(&fakesf.ApexOrg{Limits: lim})
	defer srv.Close()
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x"})
	if err != nil {
		t.Fatal(err)
	}
	for _, strings := range []bool{false, true} {
		lim.SetStrings(strings)
		got, err := salesforce.Limits(t.Context(), a, "60.0")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 4 || got[salesforce.DailyAPIRequests] != (salesforce.Limit{Max: 15000, Remaining: 14998}) ||
			got["DataStorageMB"] != (salesforce.Limit{Max: 5, Remaining: 5}) {
			t.Fatalf("limits (as strings: %v): %v", strings, got)
		}
	}
	lim.SetForbidden(true)
	if _, err := salesforce.Limits(t.Context(), a, "60.0"); err == nil {
		t.Fatal("a 403 answer read as limits")
	}
}

func TestActiveTraceFlag(t *testing.T) {
	org := &fakesf.ApexOrg{}
	srv := httptest.NewServer(org)
	defer srv.Close()
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	org.AddTraceFlag("7tf1", now.Add(-2*time.Hour), now.Add(-time.Hour))
	if ok, err := salesforce.ActiveTraceFlag(t.Context(), a, "60.0", now); ok || err != nil {
		t.Fatalf("an expired trace flag: %v %v", ok, err)
	}
	org.AddTraceFlag("7tf2", now.Add(-time.Minute), now.Add(30*time.Minute))
	if ok, err := salesforce.ActiveTraceFlag(t.Context(), a, "60.0", now); !ok || err != nil {
		t.Fatalf("an active trace flag: %v %v", ok, err)
	}
	if r := org.RejectedSoFar(); len(r) > 0 {
		t.Fatalf("the org refused %v", r)
	}
}
