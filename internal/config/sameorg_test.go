package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/config"
)

// entry is one orgs entry logging in as user (jwt_bearer on the generic
// login host) with sources.
func entry(name, user, sources string) string {
	return fmt.Sprintf("  - name: %s\n    salesforce: {auth_mode: jwt_bearer, client_id: ck, username: %q, private_key_file: /k}\n    sources: %s\n", name, user, sources)
}

// One Salesforce org listed under two names must not ship an event twice:
// whatever each entry would be refused for on its own is refused across
// the entries, and a "*" may not reach the other entry's names.
func TestOneOrgUnderTwoNamesShipsEachEventOnce(t *testing.T) {
	const user = "integration@acme.com"
	two := func(a, b string) string {
		return orgsSink + "orgs:\n" + entry("prod-rt", user, a) + entry("prod-elf", user, b)
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"one type in both": {two("{eventlogfile: {event_types: [Login, API]}}", "{eventlogfile: {event_types: [Report, API]}}"),
			`orgs[1].sources.eventlogfile.event_types: "API" is also listed by orgs[0] "prod-rt", the same Salesforce org (salesforce.username "integration@acme.com"): both shards would ship its events; keep it in one entry`},
		"one object in both, spelled apart": {two("{eventlog_objects: {objects: [{name: SetupAuditTrail, timestamp_field: CreatedDate}]}}", "{eventlog_objects: {objects: [{name: setupaudittrail, timestamp_field: CreatedDate}]}}"),
			`orgs[1].sources.eventlog_objects.objects[0].name: "setupaudittrail" is also listed by orgs[0] "prod-rt"`},
		"a custom topic in both": {two("{pubsub: {topics: [/event/Order__e]}}", "{pubsub: {topics: [/event/Order__e]}}"),
			`orgs[1].sources.pubsub.topics: "/event/Order__e" is also listed by orgs[0] "prod-rt"`},
		"one category on two sources": {two("{pubsub: {topics: [/event/LoginEventStream]}}", "{eventlogfile: {event_types: [Login]}}"),
			`orgs[1].sources.eventlogfile.event_types: "Login" is the login category, which orgs[0] "prod-rt", the same Salesforce org (salesforce.username "integration@acme.com") lists as sources.pubsub.topics "/event/LoginEventStream": both shards would ship the same login events; keep one, or set sources.allow_overlap: true in every entry of the org`},
		"allow_overlap in one entry only": {two("{allow_overlap: true, pubsub: {topics: [/event/LoginEventStream]}}", "{eventlogfile: {event_types: [Login]}}"),
			`orgs[1].sources.allow_overlap: false here, true in orgs[0] "prod-rt", the same Salesforce org (salesforce.username "integration@acme.com"): set it the same in every entry of one org`},
		"a star over the other entry's source": {two(`{eventlogfile: {event_types: ["*"]}}`, "{eventlogfile: {event_types: [Report]}}"),
			`orgs[0].sources.eventlogfile: "*" lists every name of the org, also those orgs[1] "prod-elf", the same Salesforce org (salesforce.username "integration@acme.com") lists for sources.eventlogfile: both shards would ship them`},
		"stars in two entries": {two(`{pubsub: {topics: ["*"]}}`, `{eventlogfile: {event_types: ["*"]}}`),
			`orgs[1].sources: "*" in orgs[0] "prod-rt", the same Salesforce org (salesforce.username "integration@acme.com") too: two entries' "*" listings would each ingest what the other discovers`},
		"debug logs of every user twice": {two("{apexlog: {enabled: true}}", "{apexlog: {enabled: true, users: [a@acme.com]}}"),
			`orgs[1].sources.apexlog: enabled in orgs[0] "prod-rt", the same Salesforce org (salesforce.username "integration@acme.com") too, for users that overlap`},
		"debug logs of one user twice": {two("{apexlog: {enabled: true, users: [A@acme.com]}}", "{apexlog: {enabled: true, users: [b@acme.com, a@acme.com]}}"),
			"orgs[1].sources.apexlog: enabled in orgs[0]"},
		// The username's case does not make another org.
		"a username in another case": {orgsSink + "orgs:\n" + entry("a", user, "{eventlogfile: {event_types: [API]}}") + entry("b", strings.ToUpper(user), "{eventlogfile: {event_types: [API]}}"),
			`orgs[1].sources.eventlogfile.event_types: "API" is also listed by orgs[0] "a", the same Salesforce org (salesforce.username "integration@acme.com")`},
		// One My Domain: client_credentials with two connected apps.
		"one My Domain": {orgsSink + `orgs:
  - {name: a, salesforce: {auth_mode: client_credentials, login_url: https://acme.my.salesforce.com, client_id: ck1, client_secret_file: /s}, sources: {eventlogfile: {event_types: [API]}}}
  - {name: b, salesforce: {auth_mode: client_credentials, login_url: "https://ACME.my.salesforce.com/", client_id: ck2, client_secret_file: /s}, sources: {eventlogfile: {event_types: [API]}}}
`, `orgs[1].sources.eventlogfile.event_types: "API" is also listed by orgs[0] "a", the same Salesforce org (the login host acme.my.salesforce.com)`},
		// One org id, 15 and 18 characters, through two users.
		"one org id": {orgsSink + `orgs:
  - {name: a, salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u1, private_key_file: /k, org_id: 00D5e000000AbCd}, sources: {eventlogfile: {event_types: [API]}}}
  - {name: b, salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u2, private_key_file: /k, org_id: 00D5e000000AbCdEAK}, sources: {eventlogfile: {event_types: [API]}}}
`, `orgs[1].sources.eventlogfile.event_types: "API" is also listed by orgs[0] "a", the same Salesforce org (salesforce.org_id "00D5e000000AbCd")`},
		// a and c share a user, c and b a My Domain: all three are one org.
		"joined through a third entry": {orgsSink + `orgs:
  - {name: a, salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u1, private_key_file: /k}, sources: {eventlogfile: {event_types: [API]}}}
  - {name: b, salesforce: {auth_mode: client_credentials, login_url: https://acme.my.salesforce.com, client_id: ck2, client_secret_file: /s}, sources: {pubsub: {topics: [/event/ApiEventStream]}}}
  - {name: c, salesforce: {auth_mode: jwt_bearer, login_url: https://acme.my.salesforce.com, client_id: ck, username: u1, private_key_file: /k}}
`, `orgs[1].sources.pubsub.topics: "/event/ApiEventStream" is the api category, which orgs[0] "a", the same Salesforce org (salesforce.username "u1") lists as sources.eventlogfile.event_types "API"`},
	} {
		t.Run(name, func(t *testing.T) {
			if msg := problems(t, tc.yaml); !strings.Contains(msg, tc.want) {
				t.Fatalf("want %q in:\n%s", tc.want, msg)
			}
		})
	}
}

// Splitting one org by source, or listing different orgs alike, loads; the
// split org's shards learn each other's names.
func TestOrgsThatAreNotOneOrgTwiceLoad(t *testing.T) {
	const user = "integration@acme.com"
	for name, tc := range map[string]struct {
		yaml     string
		siblings map[string][]string // shard -> its siblings' names
	}{
		"one org split by source": {orgsSink + "orgs:\n" +
			entry("prod-rt", user, "{pubsub: {topics: [/event/LoginEventStream, /event/ApiEventStream]}}") +
			entry("prod-elf", user, `{eventlogfile: {event_types: ["*"]}}`) +
			entry("other", "ops@other.com", "{eventlogfile: {event_types: [Login]}}"),
			map[string][]string{"prod-rt": {"prod-elf"}, "prod-elf": {"prod-rt"}}},
		"one category twice, allowed": {orgsSink + "orgs:\n" +
			entry("prod-rt", user, "{allow_overlap: true, pubsub: {topics: [/event/LoginEventStream]}}") +
			entry("prod-elf", user, "{allow_overlap: true, eventlogfile: {event_types: [Login]}}"),
			map[string][]string{"prod-rt": {"prod-elf"}, "prod-elf": {"prod-rt"}}},
		"debug logs of different users": {orgsSink + "orgs:\n" +
			entry("a", user, "{apexlog: {enabled: true, users: [a@acme.com]}}") + entry("b", user, "{apexlog: {enabled: true, users: [b@acme.com]}}"),
			map[string][]string{"a": {"b"}, "b": {"a"}}},
		// Different users on the generic login host, and two orgs served
		// by one loopback test server, are different orgs.
		"different orgs alike": {orgsSink + "orgs:\n" +
			entry("a", "u@a.com", "{eventlogfile: {event_types: [API]}}") + entry("b", "u@b.com", "{eventlogfile: {event_types: [API]}}") + `
  - {name: c, salesforce: {auth_mode: client_credentials, login_url: "http://127.0.0.1:8080", client_id: ck, client_secret_file: /s}, sources: {eventlogfile: {event_types: [API]}}}
  - {name: d, salesforce: {auth_mode: client_credentials, login_url: "http://127.0.0.1:8080", client_id: ck, client_secret_file: /s}, sources: {eventlogfile: {event_types: [API]}}}
  - {name: e, salesforce: {auth_mode: none}, sources: {synthetic: {rate: 5}}}
  - {name: f, salesforce: {auth_mode: none}, sources: {synthetic: {rate: 5}}}
`, nil},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, _, err := config.Load(write(t, tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range cfg.Shards() {
				var got []string
				for _, sib := range s.OrgSiblings {
					got = append(got, sib.Name)
				}
				if want := tc.siblings[s.ShardName]; fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s: siblings %v, want %v", s.ShardName, got, want)
				}
			}
		})
	}
}

// A shard's copy of its siblings' sources is its own.
func TestASiblingsSourcesAreACopy(t *testing.T) {
	cfg, _, err := config.Load(write(t, orgsSink+"orgs:\n"+
		entry("a", "u", "{pubsub: {topics: [/event/LoginEventStream]}}")+entry("b", "u", "{eventlogfile: {event_types: [API]}}")))
	if err != nil {
		t.Fatal(err)
	}
	shards := cfg.Shards()
	shards[1].OrgSiblings[0].Sources.PubSub.Topics[0] = "changed"
	if cfg.Orgs[0].Sources.PubSub.Topics[0] != "/event/LoginEventStream" || shards[0].Sources.PubSub.Topics[0] != "/event/LoginEventStream" {
		t.Fatal("a sibling's sources share their lists with the org's")
	}
}
