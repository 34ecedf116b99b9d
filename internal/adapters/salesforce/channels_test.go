package salesforce_test

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

func channelsOrg(t *testing.T) (*fakesf.Channels, *salesforce.Auth) {
	t.Helper()
	ch := &fakesf.Channels{}
	srv := httptest.NewServer(&fakesf.Org{Channels: ch})
	t.Cleanup(srv.Close)
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x"})
	if err != nil {
		t.Fatal(err)
	}
	return ch, a
}

// The members of the standard and custom channels come back by channel
// name, whether a member names its custom channel or gives its Id.
func TestChannelMembers(t *testing.T) {
	for _, ids := range []bool{false, true} {
		ch, a := channelsOrg(t)
		ch.EventChannelIDs = ids
		ch.AddChannel("Sales__chn", "data")
		ch.AddChannel("acme__Orders__chn", "event")
		ch.AddMember("ChangeEvents", "AccountChangeEvent")
		ch.AddMember("ChangeEvents", "Employee__ChangeEvent")
		ch.AddMember("Sales__chn", "AccountChangeEvent")
		ch.AddMember("acme__Orders__chn", "Order__e")
		got, err := salesforce.ChannelMembers(t.Context(), a, "60.0")
		if err != nil {
			t.Fatalf("ids %v: %v", ids, err)
		}
		if !slices.Equal(got["ChangeEvents"], []string{"AccountChangeEvent", "Employee__ChangeEvent"}) ||
			!slices.Equal(got["Sales__chn"], []string{"AccountChangeEvent"}) || !slices.Equal(got["acme__Orders__chn"], []string{"Order__e"}) || len(got) != 3 {
			t.Errorf("ids %v: %v", ids, got)
		}
		if r := ch.RejectedSoFar(); len(r) != 0 {
			t.Errorf("ids %v: refused %v", ids, r)
		}
	}
}

// Without View Setup and Configuration the objects are not there for the
// user: the error says which listing failed.
func TestChannelMembersForbidden(t *testing.T) {
	ch, a := channelsOrg(t)
	ch.SetForbidden(true)
	_, err := salesforce.ChannelMembers(t.Context(), a, "60.0")
	if err == nil || !strings.Contains(err.Error(), "listing PlatformEventChannel: ") || !strings.Contains(err.Error(), "INVALID_TYPE") {
		t.Fatalf("forbidden: %v", err)
	}
}
