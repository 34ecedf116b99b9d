package config_test

import (
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/config"
)

// The standard channel /data/ChangeEvents carries the change events of
// every entity selected for Change Data Capture: beside the entity's own
// channel it ships each change twice, in one entry or in two entries of
// one org, unless the overlap is allowed.
func TestTheStandardChangeChannelBesideAnEntitysIsRefused(t *testing.T) {
	const user = "integration@acme.com"
	two := func(a, b string) string {
		return orgsSink + "orgs:\n" + entry("prod-a", user, a) + entry("prod-b", user, b)
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"one entry": {overlapBase + "sources: {pubsub: {topics: [/data/ChangeEvents, /data/AccountChangeEvent]}}\n",
			`sources.pubsub.topics: "/data/ChangeEvents" and "/data/AccountChangeEvent" would ship the same change twice: ` +
				`the standard channel /data/ChangeEvents carries the change events of every entity selected for Change Data Capture, AccountChangeEvent among them; ` +
				`keep one, or set sources.allow_overlap: true`},
		"one entry, a custom object listed first": {overlapBase + "sources: {pubsub: {topics: [/data/Employee__ChangeEvent, /data/ChangeEvents]}}\n",
			`sources.pubsub.topics: "/data/ChangeEvents" and "/data/Employee__ChangeEvent" would ship the same change twice`},
		"an orgs entry": {orgsSink + "orgs:\n" + entry("prod", user, "{pubsub: {topics: [/data/AccountChangeEvent, /data/ChangeEvents]}}"),
			`orgs[0].sources.pubsub.topics: "/data/ChangeEvents" and "/data/AccountChangeEvent" would ship the same change twice: ` +
				`the standard channel /data/ChangeEvents carries the change events of every entity selected for Change Data Capture, AccountChangeEvent among them; ` +
				`keep one, or set orgs[0].sources.allow_overlap: true`},
		"two entries of one org": {two("{pubsub: {topics: [/data/ChangeEvents]}}", "{pubsub: {topics: [/data/AccountChangeEvent]}}"),
			`orgs[1].sources.pubsub.topics: "/data/AccountChangeEvent" and "/data/ChangeEvents", which orgs[0] "prod-a", the same Salesforce org ` +
				`(salesforce.username "integration@acme.com") lists as sources.pubsub.topics, would ship the same change twice: ` +
				`the standard channel /data/ChangeEvents carries the change events of every entity selected for Change Data Capture, AccountChangeEvent among them, ` +
				`and both shards would ship it; keep one, or set sources.allow_overlap: true in both entries`},
		"two entries of one org, the standard channel second": {two("{pubsub: {topics: [/data/AccountChangeEvent]}}", "{pubsub: {topics: [/data/ChangeEvents]}}"),
			`orgs[1].sources.pubsub.topics: "/data/ChangeEvents" and "/data/AccountChangeEvent", which orgs[0] "prod-a"`},
		"two entries, allow_overlap in one only": {two("{allow_overlap: true, pubsub: {topics: [/data/ChangeEvents]}}", "{pubsub: {topics: [/data/AccountChangeEvent]}}"),
			`orgs[1].sources.pubsub.topics: "/data/AccountChangeEvent" and "/data/ChangeEvents"`},
	} {
		t.Run(name, func(t *testing.T) {
			if got := problems(t, tc.yaml); !strings.Contains(got, tc.want) {
				t.Fatalf("want %q in:\n%s", tc.want, got)
			}
		})
	}
}

func TestChangeChannelsThatDoNotOverlapLoad(t *testing.T) {
	org := func(name, sources string) string {
		return "  - name: " + name + "\n    salesforce: {auth_mode: jwt_bearer, client_id: ck, username: integration@" + name + ".example, private_key_file: /k}\n    sources: " + sources + "\n"
	}
	const user = "integration@acme.com"
	for name, yaml := range map[string]string{
		"allow_overlap": overlapBase + "sources: {allow_overlap: true, pubsub: {topics: [/data/ChangeEvents, /data/AccountChangeEvent]}}\n",
		"two entries of one org, both allow_overlap": orgsSink + "orgs:\n" + entry("prod-a", user, "{allow_overlap: true, pubsub: {topics: [/data/ChangeEvents]}}") +
			entry("prod-b", user, "{allow_overlap: true, pubsub: {topics: [/data/AccountChangeEvent]}}"),
		"two orgs":                           orgsSink + "orgs:\n" + org("prod", "{pubsub: {topics: [/data/ChangeEvents]}}") + org("uat", "{pubsub: {topics: [/data/AccountChangeEvent]}}"),
		"single-entity channels only":        overlapBase + "sources: {pubsub: {topics: [/data/AccountChangeEvent, /data/ContactChangeEvent]}}\n",
		"the standard channel beside events": overlapBase + "sources: {pubsub: {topics: [/data/ChangeEvents, /event/LoginEventStream, /event/Order__e]}}\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := config.Load(write(t, yaml)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A custom channel carries what its members, set in the org, select: the
// configuration cannot refuse it, and warns when a topic beside it may
// carry the same events.
func TestACustomChannelBesideOtherChannelsWarns(t *testing.T) {
	const user = "integration@acme.com"
	warnings := func(t *testing.T, yaml string) []string {
		t.Helper()
		_, w, err := config.Load(write(t, yaml))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range w {
			if strings.Contains(s, "custom channel") {
				out = append(out, s)
			}
		}
		return out
	}
	got := warnings(t, overlapBase+"sources: {pubsub: {topics: [/data/Sales__chn, /data/AccountChangeEvent, /data/ContactChangeEvent, /event/Order__e]}}\n")
	want := `sources.pubsub.topics: "/data/Sales__chn" is a custom channel: it carries the change events of the entities its members (PlatformEventChannelMember) ` +
		`select in the org, which the configuration cannot see; if it carries what "/data/AccountChangeEvent", "/data/ContactChangeEvent" beside it carries, ` +
		`each such event is shipped twice. Keep each event on one subscription, or set sources.allow_overlap: true if that is wanted; ` + config.CustomChannelAdvice
	if len(got) != 1 || got[0] != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	got = warnings(t, overlapBase+"sources: {pubsub: {topics: [/event/Orders__chn, '*']}}\n")
	if len(got) != 1 || !strings.Contains(got[0], `"/event/Orders__chn" is a custom channel: it carries the platform events (custom ones, or Real-Time Event Monitoring streams)`) ||
		!strings.Contains(got[0], `if it carries what "*" beside it carries`) {
		t.Fatalf("an event channel beside \"*\": %q", got)
	}
	got = warnings(t, orgsSink+"orgs:\n"+entry("prod-a", user, "{pubsub: {topics: [/data/Sales__chn]}}")+entry("prod-b", user, "{pubsub: {topics: [/data/AccountChangeEvent]}}"))
	if len(got) != 1 || !strings.HasPrefix(got[0], `orgs[0].sources.pubsub.topics: "/data/Sales__chn" is a custom channel`) ||
		!strings.Contains(got[0], `if it carries what "/data/AccountChangeEvent" (orgs entry "prod-b") beside it carries`) {
		t.Fatalf("beside another entry of the org: %q", got)
	}
	for name, yaml := range map[string]string{
		"alone":                         overlapBase + "sources: {pubsub: {topics: [/data/Sales__chn]}}\n",
		"beside events of another kind": overlapBase + "sources: {pubsub: {topics: [/data/Sales__chn, /event/LoginEventStream, '*']}, eventlogfile: {event_types: [Logout]}}\n",
		"allow_overlap":                 overlapBase + "sources: {allow_overlap: true, pubsub: {topics: [/data/Sales__chn, /data/AccountChangeEvent]}}\n",
		"another org": orgsSink + "orgs:\n" + entry("prod", user, "{pubsub: {topics: [/data/Sales__chn]}}") +
			entry("uat", "integration@uat.example", "{pubsub: {topics: [/data/AccountChangeEvent]}}"),
	} {
		t.Run(name, func(t *testing.T) {
			if got := warnings(t, yaml); len(got) != 0 {
				t.Fatalf("warned: %q", got)
			}
		})
	}
}

func TestChannelPeers(t *testing.T) {
	src := config.Sources{PubSub: config.PubSub{Topics: []string{"/data/Sales__chn", "/data/AccountChangeEvent", "/event/Orders__chn", "/event/Order__e"}}}
	sib := []config.OrgSibling{{Name: "b", Sources: config.Sources{PubSub: config.PubSub{Topics: []string{"/data/Sales__chn", "/event/LoginEventStream"}}}}}
	got := config.ChannelPeers(src, sib)
	if p := got["/data/Sales__chn"]; len(p) != 2 || p[0] != (config.ChannelPeer{Topic: "/data/AccountChangeEvent"}) || p[1] != (config.ChannelPeer{Entry: "b", Topic: "/data/Sales__chn"}) {
		t.Errorf("data channel peers: %+v", p)
	}
	if p := got["/event/Orders__chn"]; len(p) != 2 || p[0].Topic != "/event/Order__e" || p[1] != (config.ChannelPeer{Entry: "b", Topic: "/event/LoginEventStream"}) {
		t.Errorf("event channel peers: %+v", p)
	}
	src.AllowOverlap = true
	sib[0].Sources.AllowOverlap = true
	if got := config.ChannelPeers(src, sib); len(got) != 0 {
		t.Errorf("peers with allow_overlap everywhere: %+v", got)
	}
}
