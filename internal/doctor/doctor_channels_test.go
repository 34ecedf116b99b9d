package doctor

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakepubsub"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// A custom channel carries the entities its members select in the org: the
// doctor reads them with the Tooling API and names each one another
// subscription of the org ships too.
func TestDoctorCustomChannelMembers(t *testing.T) {
	ps := fakepubsub.Start(t)
	for _, topic := range []string{"/data/Sales__chn", "/data/AccountChangeEvent", "/data/ChangeEvents"} {
		ps.AddTopic(topic, fakepubsub.LoginEventStreamSchema)
	}
	ch := &fakesf.Channels{}
	ch.AddChannel("Sales__chn", "data")
	ch.AddMember("Sales__chn", "AccountChangeEvent")
	ch.AddMember("Sales__chn", "OpportunityChangeEvent")
	ch.AddMember("ChangeEvents", "ContactChangeEvent")
	web := httptest.NewServer(&fakesf.Org{Channels: ch})
	defer web.Close()
	dir := t.TempDir()
	cfg := func(sources string) string {
		return testenv.WriteConfig(t, fmt.Sprintf(`state: {file: {path: %s/s.json}}
salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: x, org_id: 00D000000000001}
sources: %s
sink: {loki: {url: %s/loki/api/v1/push}}
`, dir, web.URL, strings.ReplaceAll(sources, "ENDPOINT", fmt.Sprintf("endpoint: %q, plaintext: true", ps.Addr)), web.URL))
	}
	row := func(path string) Check {
		t.Helper()
		r := Doctor(t.Context(), path)
		for _, c := range r.Checks {
			if c.Status == Warn && strings.Contains(c.Detail, "is a custom channel") {
				t.Fatalf("the configuration's warning beside the channel row: %+v", c)
			}
		}
		rs := append(rows(r, "channel:/data/Sales__chn"), rows(r, "channels")...)
		if len(rs) != 1 {
			t.Fatalf("channel rows: %+v", r.Checks)
		}
		return rs[0]
	}
	entity := cfg("{pubsub: {topics: [/data/Sales__chn, /data/AccountChangeEvent], ENDPOINT}}")
	want := `carries AccountChangeEvent, OpportunityChangeEvent; AccountChangeEvent is also subscribed to as sources.pubsub.topics "/data/AccountChangeEvent": ` +
		`the same events would be shipped twice; remove the member from the channel, drop the other subscription, or set sources.allow_overlap: true (in both entries when another entry ships it)`
	if c := row(entity); c.Status != Warn || c.Detail != want {
		t.Fatalf("beside a member's own channel: %+v\nwant %q", c, want)
	}
	// The rest without the other checks: the org's auth, a shard's
	// configuration.
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: web.URL, ClientID: "ck", ClientSecret: "x"})
	if err != nil {
		t.Fatal(err)
	}
	// direct is the first row for the topics (each channel has its own).
	direct := func(topics ...string) Check {
		t.Helper()
		got := checkChannels(t.Context(), &config.Config{Salesforce: config.Salesforce{APIVersion: "60.0"}, Sources: config.Sources{PubSub: config.PubSub{Topics: topics}}}, a)
		if len(got) == 0 {
			t.Fatalf("no row for %v", topics)
		}
		return got[0]
	}
	// Whether the member names its channel or gives the channel's Id.
	ch.EventChannelIDs = true
	if c := direct("/data/Sales__chn", "/data/AccountChangeEvent"); c.Status != Warn || c.Detail != want {
		t.Fatalf("members naming the channel by Id: %+v", c)
	}
	if c := direct("/data/Sales__chn", "/data/ChangeEvents"); c.Status != Pass ||
		c.Detail != `carries AccountChangeEvent, OpportunityChangeEvent: none of them is shipped beside it (sources.pubsub.topics "/data/ChangeEvents")` {
		t.Fatalf("beside the standard channel, no member in common: %+v", c)
	}
	ch.AddMember("ChangeEvents", "OpportunityChangeEvent")
	if c := direct("/data/Sales__chn", "/data/ChangeEvents"); c.Status != Warn || !strings.Contains(c.Detail,
		`OpportunityChangeEvent is also selected on the standard channel (the Change Data Capture page), which sources.pubsub.topics "/data/ChangeEvents" carries`) {
		t.Fatalf("beside the standard channel, a member in common: %+v", c)
	}
	ch.AddChannel("Other__chn", "data")
	ch.AddMember("Other__chn", "OpportunityChangeEvent")
	if c := direct("/data/Sales__chn", "/data/Other__chn"); c.Status != Warn || !strings.Contains(c.Detail,
		`OpportunityChangeEvent is also a member of sources.pubsub.topics "/data/Other__chn"`) {
		t.Fatalf("beside another custom channel: %+v", c)
	}
	ch.SetForbidden(true)
	if c := direct("/data/Sales__chn", "/data/AccountChangeEvent"); c.Name != "channels" || c.Status != Warn || !strings.Contains(c.Detail, "cannot read the members of /data/Sales__chn with the Tooling API: "+
		"the user needs View Setup and Configuration (and API Enabled) to query PlatformEventChannel and PlatformEventChannelMember") ||
		!strings.Contains(c.Detail, `make sure none of its members is also shipped by sources.pubsub.topics "/data/AccountChangeEvent"`) {
		t.Fatalf("members unreadable: %+v", c)
	}
	ch.SetForbidden(false)
	if got := checkChannels(t.Context(), &config.Config{Sources: config.Sources{PubSub: config.PubSub{Topics: []string{"/data/Sales__chn", "/event/Order__e"}}}}, a); len(got) != 0 {
		t.Fatalf("rows for a channel beside events of another kind: %+v", got)
	}
	if r := Doctor(t.Context(), cfg("{allow_overlap: true, pubsub: {topics: [/data/Sales__chn, /data/AccountChangeEvent], ENDPOINT}}")); len(rows(r, "channels")) != 0 ||
		len(rows(r, "channel:/data/Sales__chn")) != 0 {
		t.Fatalf("rows with allow_overlap: %+v", r.Checks)
	}
}

// A platform event channel may hold Real-Time Event Monitoring streams:
// one is its category's, like the stream's own topic; the other entries of
// the org count too.
func TestCheckChannelsComparesCategoriesAndOtherEntries(t *testing.T) {
	ch := &fakesf.Channels{}
	ch.AddChannel("Monitor__chn", "event")
	ch.AddMember("Monitor__chn", "LoginEventStream")
	ch.AddMember("Monitor__chn", "Order__e")
	ch.AddChannel("Sales__chn", "data")
	srv := httptest.NewServer(&fakesf.Org{Channels: ch})
	defer srv.Close()
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Salesforce: config.Salesforce{APIVersion: "60.0"},
		Sources:     config.Sources{PubSub: config.PubSub{Topics: []string{"/event/Monitor__chn", "/data/Sales__chn"}}, EventLogFile: config.EventLogFile{EventTypes: []string{"Login"}}},
		OrgSiblings: []config.OrgSibling{{Name: "prod-b", Sources: config.Sources{PubSub: config.PubSub{Topics: []string{"/event/Order__e", "/data/AccountChangeEvent"}}}}}}
	got := checkChannels(t.Context(), cfg, a)
	if len(got) != 2 || got[0].Name != "channel:/event/Monitor__chn" || got[0].Status != Warn ||
		got[0].Detail != `carries LoginEventStream, Order__e; LoginEventStream is the login category, which sources.eventlogfile.event_types "Login" ships too; `+
			`Order__e is also subscribed to as orgs entry "prod-b"'s sources.pubsub.topics "/event/Order__e": the same events would be shipped twice; `+
			`remove the member from the channel, drop the other subscription, or set sources.allow_overlap: true (in both entries when another entry ships it)` {
		t.Fatalf("event channel: %+v", got)
	}
	if got[1].Name != "channel:/data/Sales__chn" || got[1].Status != Warn || !strings.Contains(got[1].Detail, "PlatformEventChannelMember lists no member of Sales__chn") {
		t.Fatalf("an empty channel: %+v", got[1])
	}
	// The overlap allowed in both entries: nothing left to compare.
	cfg.Sources.AllowOverlap, cfg.OrgSiblings[0].Sources.AllowOverlap = true, true
	if got := checkChannels(t.Context(), cfg, a); len(got) != 0 {
		t.Fatalf("allowed everywhere: %+v", got)
	}
	if got := checkChannels(t.Context(), &config.Config{Sources: config.Sources{PubSub: config.PubSub{Topics: []string{"/event/Monitor__chn", "*"}}}}, nil); len(got) != 1 ||
		got[0].Status != Skip || !strings.Contains(got[0].Detail, "the auth check did not pass") {
		t.Fatalf("without auth: %+v", got)
	}
}
