package config_test

import (
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/config"
)

const overlapBase = "salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: /k}\nsink: {loki: {url: http://loki/push}}\n"

func TestOneCategoryOnTwoSourcesIsRefused(t *testing.T) {
	for name, tc := range map[string]struct{ sources, want string }{
		"pubsub and eventlogfile": {"sources: {pubsub: {topics: [/event/LoginEventStream]}, eventlogfile: {event_types: [API, Login]}}\n",
			`sources: the login category is enabled on 2 sources: sources.pubsub.topics "/event/LoginEventStream" and sources.eventlogfile.event_types "Login" ` +
				`would ship the same login events twice; keep one, or set sources.allow_overlap: true`},
		"three sources": {"sources:\n  pubsub: {topics: [/event/ApiEventStream]}\n  eventlog_objects: {objects: [{name: ApiEvent}]}\n  eventlogfile: {event_types: [API]}\n",
			`sources: the api category is enabled on 3 sources: sources.pubsub.topics "/event/ApiEventStream", sources.eventlog_objects.objects[0].name "ApiEvent" ` +
				`and sources.eventlogfile.event_types "API" would ship the same api events three times`},
		"LoginHistory is login": {"sources: {eventlog_objects: {objects: [{name: LoginHistory, timestamp_field: LoginTime}]}, eventlogfile: {event_types: [Login]}}\n",
			`sources.eventlog_objects.objects[0].name "LoginHistory" and sources.eventlogfile.event_types "Login"`},
	} {
		got := problems(t, overlapBase+tc.sources)
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: got\n%s\nwant %q", name, got, tc.want)
		}
	}
}

func TestCategoriesThatDoNotOverlapLoad(t *testing.T) {
	for name, sources := range map[string]string{
		"two wildcards":         "sources: {pubsub: {topics: ['*']}, eventlogfile: {event_types: ['*']}}\n",
		"a wildcard and a name": "sources: {pubsub: {topics: ['*']}, eventlogfile: {event_types: [Login]}}\n",
		"custom events, CDC and objects": "sources: {pubsub: {topics: [/event/Login__e, /data/AccountChangeEvent]}, " +
			"eventlog_objects: {objects: [{name: Login__c}, {name: AccountChangeEvent}]}, eventlogfile: {event_types: [Logout]}}\n",
		"one source, two names": "sources: {eventlog_objects: {objects: [{name: LoginEvent}, {name: LoginHistory, timestamp_field: LoginTime}]}}\n",
		"allow_overlap":         "sources: {allow_overlap: true, pubsub: {topics: [/event/LoginEventStream]}, eventlogfile: {event_types: [Login]}}\n",
	} {
		if _, _, err := config.Load(write(t, overlapBase+sources)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A wildcard is settled at run time; the names beside it still count.
	got := problems(t, overlapBase+"sources: {pubsub: {topics: ['*']}, eventlogfile: {event_types: [Login]}, eventlog_objects: {objects: [{name: LoginEvent}]}}\n")
	if !strings.Contains(got, `sources.eventlog_objects.objects[0].name "LoginEvent" and sources.eventlogfile.event_types "Login"`) || strings.Contains(got, `"*"`) {
		t.Errorf("names beside a wildcard:\n%s", got)
	}
}

func TestOverlapIsCheckedPerOrg(t *testing.T) {
	org := func(name, sources string) string {
		return "  - name: " + name + "\n    salesforce: {auth_mode: jwt_bearer, client_id: ck, username: integration@" + name + ".example, private_key_file: /k}\n    sources: " + sources + "\n"
	}
	// Login by Pub/Sub in one org and by EventLogFile in another (each its
	// own user, so its own org): two orgs, no overlap.
	apart := orgsSink + "orgs:\n" + org("prod", "{pubsub: {topics: [/event/LoginEventStream]}}") + org("uat", "{eventlogfile: {event_types: [Login]}}")
	if _, _, err := config.Load(write(t, apart)); err != nil {
		t.Fatalf("one source per org: %v", err)
	}
	both := orgsSink + "orgs:\n" + org("prod", "{eventlogfile: {event_types: [API]}}") +
		org("uat", "{pubsub: {topics: [/event/LoginEventStream]}, eventlogfile: {event_types: [Login]}}") +
		org("dev", "{allow_overlap: true, pubsub: {topics: [/event/LoginEventStream]}, eventlogfile: {event_types: [Login]}}")
	got := problems(t, both)
	want := `orgs[1].sources: the login category is enabled on 2 sources: orgs[1].sources.pubsub.topics "/event/LoginEventStream" and ` +
		`orgs[1].sources.eventlogfile.event_types "Login" would ship the same login events twice; keep one, or set orgs[1].sources.allow_overlap: true`
	if !strings.Contains(got, want) || strings.Contains(got, "orgs[2]") || strings.Contains(got, "orgs[0]") {
		t.Fatalf("got\n%s\nwant only %q", got, want)
	}
}

// SOQL object names are case-insensitive, and Event Log Objects are the
// EventLogFile rows: each spelling is the category of the type.
func TestOverlapIgnoresCaseAndCoversEventLogObjects(t *testing.T) {
	for _, obj := range []string{"loginevent", "LOGINHISTORY", "LoginEventLog"} {
		got := problems(t, overlapBase+"sources: {eventlogfile: {event_types: [Login]}, eventlog_objects: {objects: [{name: "+obj+"}]}}\n")
		if want := `sources.eventlog_objects.objects[0].name "` + obj + `" and sources.eventlogfile.event_types "Login"`; !strings.Contains(got, want) {
			t.Errorf("%s: got\n%s\nwant %q", obj, got, want)
		}
	}
}
