package salesforce_test

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

func eventManagerOrg(t *testing.T) (*fakesf.Org, *fakesf.EventManager, *salesforce.Auth) {
	t.Helper()
	em := fakesf.NewEventManager("LoginEvent", "LoginEventStream")
	em.Set("ApiEventStream", false)
	org := &fakesf.Org{EventManager: em}
	srv := httptest.NewServer(org)
	t.Cleanup(srv.Close)
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x"})
	if err != nil {
		t.Fatal(err)
	}
	return org, em, a
}

func TestRealTimeEventSwitches(t *testing.T) {
	_, em, a := eventManagerOrg(t)
	got, err := salesforce.RealTimeEventSwitches(t.Context(), a, "60.0")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !got["LoginEventStream"] || !got["LoginEvent"] || got["ApiEventStream"] {
		t.Fatalf("switches: %v", got)
	}
	// An expired session (a SOAP fault, not a 401): once more with a new
	// token.
	em.Expire("t1")
	if got, err := salesforce.RealTimeEventSwitches(t.Context(), a, "60.0"); err != nil || !got["LoginEventStream"] {
		t.Fatalf("after the session expired: %v, %v", got, err)
	}
	em.SetForbidden(true)
	_, err = salesforce.RealTimeEventSwitches(t.Context(), a, "60.0")
	var fault *salesforce.SOAPFault
	if !errors.Is(err, salesforce.ErrNoMetadataAccess) || !errors.As(err, &fault) || fault.Code != "INSUFFICIENT_ACCESS" ||
		!strings.Contains(err.Error(), "Modify Metadata Through Metadata API Functions") {
		t.Fatalf("without the permission: %v", err)
	}
	if _, err := salesforce.RealTimeEventSwitches(t.Context(), a, "49.0"); err == nil || !strings.Contains(err.Error(), "50.0") {
		t.Fatalf("before API 50.0: %v", err)
	}
}

func TestNewestStoredIsLegalOnABigObject(t *testing.T) {
	org, _, a := eventManagerOrg(t)
	base := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	org.Add("1", base.Add(10*time.Second))
	org.Add("2", base.Add(20*time.Minute+300*time.Millisecond))
	org.Add("3", base.Add(40*time.Minute))
	got, ok, err := salesforce.NewestStored(t.Context(), a, "60.0", "LoginEvent", base.Add(500*time.Millisecond), base.Add(30*time.Minute))
	if err != nil || !ok || !got.Equal(base.Add(20*time.Minute+300*time.Millisecond)) {
		t.Fatalf("newest in the window: %v %v %v (rejected: %v)", got, ok, err, org.RejectedSoFar())
	}
	if _, ok, err := salesforce.NewestStored(t.Context(), a, "60.0", "LoginEvent", base.Add(41*time.Minute), base.Add(50*time.Minute)); err != nil || ok {
		t.Fatalf("an empty window: %v %v", ok, err)
	}
	if len(org.RejectedSoFar()) != 0 {
		t.Fatalf("refused: %v", org.RejectedSoFar())
	}
}
