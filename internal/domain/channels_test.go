package domain_test

import (
	"testing"

	"github.com/sf2loki/sf2loki/internal/domain"
)

func TestChannelNames(t *testing.T) {
	for topic, want := range map[string]string{
		"/data/AccountChangeEvent":           "AccountChangeEvent",
		"/data/Employee__ChangeEvent":        "Employee__ChangeEvent",
		"/data/ns__Employee__ChangeEvent":    "ns__Employee__ChangeEvent",
		"/data/ChangeEvents":                 "", // the standard channel
		"/data/ChangeEvent":                  "",
		"/data/Sales__chn":                   "",
		"/event/AccountChangeEvent":          "",
		"/data/x/AccountChangeEvent":         "",
		"/data/accountchangeevent":           "", // names are case-sensitive
		"/event/LoginEventStream":            "",
		"/data/AccountChangeEvent/":          "",
		"/data/OpportunityChangeEventStream": "",
	} {
		got, ok := domain.EntityChangeTopic(topic)
		if got != want || ok != (want != "") {
			t.Errorf("EntityChangeTopic(%q) = %q, %v; want %q", topic, got, ok, want)
		}
	}
	for topic, want := range map[string]struct {
		name string
		data bool
	}{
		"/data/Sales__chn":       {"Sales__chn", true},
		"/data/ns__Sales__chn":   {"ns__Sales__chn", true},
		"/event/Orders__chn":     {"Orders__chn", false},
		"/data/__chn":            {},
		"/data/ChangeEvents":     {},
		"/event/Order__e":        {},
		"/data/x/Sales__chn":     {},
		"/topic/Sales__chn":      {},
		"/data/AccountChangeEvt": {},
	} {
		name, data, ok := domain.CustomChannel(topic)
		if name != want.name || data != want.data || ok != (want.name != "") {
			t.Errorf("CustomChannel(%q) = %q, %v, %v; want %+v", topic, name, data, ok, want)
		}
	}
}

// The standard channel carries every single-entity change channel's
// events; nothing else is known to carry another topic by its name.
func TestChannelCarries(t *testing.T) {
	for _, c := range []struct {
		outer, inner string
		want         bool
	}{
		{"/data/ChangeEvents", "/data/AccountChangeEvent", true},
		{"/data/ChangeEvents", "/data/Employee__ChangeEvent", true},
		{"/data/AccountChangeEvent", "/data/ChangeEvents", false},
		{"/data/ChangeEvents", "/data/ChangeEvents", false},
		{"/data/ChangeEvents", "/data/Sales__chn", false},
		{"/data/Sales__chn", "/data/AccountChangeEvent", false},
		{"/data/changeevents", "/data/AccountChangeEvent", false},
		{"/event/ChangeEvents", "/data/AccountChangeEvent", false},
		{"/data/ChangeEvents", "/event/LoginEventStream", false},
	} {
		if got := domain.ChannelCarries(c.outer, c.inner); got != c.want {
			t.Errorf("ChannelCarries(%q, %q) = %v", c.outer, c.inner, got)
		}
	}
}
