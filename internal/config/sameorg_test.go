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
			`orgs[1].sources.eventlogfile.event_types: "Login" is the login category, which orgs[0] "prod-rt", the same Salesforce org (salesforce.username "integration@acme.com") lists as sources.pubsub.topics "/event/LoginEventStream": both shards would ship the same login events; keep one, or set sources.allow_overlap: true in both entries`},
		"allow_overlap in one entry only": {two("{allow_overlap: true, pubsub: {topics: [/event/LoginEventStream]}}", "{eventlogfile: {event_types: [Login]}}"),
			`orgs[1].sources.eventlogfile.event_types: "Login" is the login category, which orgs[0] "prod-rt"`},
		"stars on two sources in two entries": {two(`{pubsub: {topics: ["*"]}}`, `{eventlogfile: {event_types: ["*"]}}`),
			`orgs[1].sources.eventlogfile.event_types: "*" here and a pubsub "*" in orgs[0] "prod-rt", the same Salesforce org (salesforce.username "integration@acme.com"): neither shard knows what the other discovers`},
		"stars on one source in two entries, even with allow_overlap": {two(`{allow_overlap: true, eventlogfile: {event_types: ["*"]}}`, `{allow_overlap: true, eventlogfile: {event_types: ["*"]}}`),
			`orgs[1].sources.eventlogfile.event_types: "*" here and in orgs[0] "prod-rt", the same Salesforce org (salesforce.username "integration@acme.com"): both shards would ship every eventlogfile name`},
		"a star with allow_overlap beside the other entry's names on its source": {two(`{allow_overlap: true, eventlogfile: {event_types: ["*"]}}`, `{allow_overlap: true, eventlogfile: {event_types: [API]}}`),
			`orgs[0].sources.eventlogfile.event_types: "*" with sources.allow_overlap ships every eventlogfile name, also "API" that orgs[1] "prod-elf"`},
		"a star beside a stream without a category": {two(`{pubsub: {topics: ["*"]}}`, "{pubsub: {topics: [/event/ns__AuditEventStream]}}"),
			`orgs[0].sources.pubsub.topics: "*" ships "/event/ns__AuditEventStream" too, which orgs[1] "prod-elf", the same Salesforce org (salesforce.username "integration@acme.com") lists and which has no event category to skip it by`},
		"a star with allow_overlap beside a category the other entry does not allow": {two(`{allow_overlap: true, eventlogfile: {event_types: ["*"]}}`, `{pubsub: {topics: [/event/LoginEventStream]}}`),
			`orgs[0].sources.eventlogfile.event_types: "*" with sources.allow_overlap skips no category, also not that of "/event/LoginEventStream" that orgs[1] "prod-elf"`},
		"contradicting org ids": {orgsSink + "orgs:\n" +
			"  - {name: a, salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u1, private_key_file: /k, org_id: 00D5e000000AAAA}}\n" +
			"  - {name: b, salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u1, private_key_file: /k, org_id: 00D5e000000BBBB}}\n",
			`orgs[1].salesforce.org_id: "00D5e000000BBBB" is another org than orgs[0] "a"'s "00D5e000000AAAA", yet the login settings make them one org (salesforce.username "u1"); correct the org_id, the username or the login_url`},
		// b and c set different org ids and are joined only through a.
		"contradicting org ids through a third entry": {orgsSink + "orgs:\n" +
			"  - {name: a, salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u1, login_url: https://acme.my.salesforce.com, private_key_file: /k}}\n" +
			"  - {name: b, salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u1, private_key_file: /k, org_id: 00D5e000000AAAA}, sources: {eventlogfile: {event_types: [API]}}}\n" +
			"  - {name: c, salesforce: {auth_mode: client_credentials, login_url: https://acme.my.salesforce.com, client_id: ck, client_secret_file: /s, org_id: 00D5e000000BBBB}, sources: {eventlogfile: {event_types: [API]}}}\n",
			`orgs[2].salesforce.org_id: "00D5e000000BBBB" is another org than orgs[1] "b"'s "00D5e000000AAAA", yet the login settings make them one org (through orgs[0] "a")`},
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
  - {name: b, salesforce: {auth_mode: client_credentials, login_url: "https://ACME.my.salesforce.com./", client_id: ck2, client_secret_file: /s}, sources: {eventlogfile: {event_types: [API]}}}
`, `orgs[1].sources.eventlogfile.event_types: "API" is also listed by orgs[0] "a", the same Salesforce org (the My Domain acme.my.salesforce.com)`},
		// One org id, 15 and 18 characters (in any case), through two users.
		"one org id": {orgsSink + `orgs:
  - {name: a, salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u1, private_key_file: /k, org_id: 00D5e000000AbCd}, sources: {eventlogfile: {event_types: [API]}}}
  - {name: b, salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u2, private_key_file: /k, org_id: 00D5e000000AbCdEAK}, sources: {eventlogfile: {event_types: [API]}}}
`, `orgs[1].sources.eventlogfile.event_types: "API" is also listed by orgs[0] "a", the same Salesforce org (salesforce.org_id "00D5e000000AbCd")`},
		"one org id in another case": {orgsSink + `orgs:
  - {name: c, salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u3, private_key_file: /k, org_id: 00d5e000000abcdeak}, sources: {eventlogfile: {event_types: [Login]}}}
  - {name: d, salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u4, private_key_file: /k, org_id: 00D5e000000AbCd}, sources: {eventlogfile: {event_types: [Login]}}}
`, `orgs[1].sources.eventlogfile.event_types: "Login" is also listed by orgs[0] "c", the same Salesforce org (salesforce.org_id "00d5e000000abcdeak")`},
		// a and c share a user, c and b a My Domain: all three are one org.
		"joined through a third entry": {orgsSink + `orgs:
  - {name: a, salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u1, private_key_file: /k}, sources: {eventlogfile: {event_types: [API]}}}
  - {name: b, salesforce: {auth_mode: client_credentials, login_url: https://acme.my.salesforce.com, client_id: ck2, client_secret_file: /s}, sources: {pubsub: {topics: [/event/ApiEventStream]}}}
  - {name: c, salesforce: {auth_mode: jwt_bearer, login_url: https://acme.my.salesforce.com, client_id: ck, username: u1, private_key_file: /k}}
`, `orgs[1].sources.pubsub.topics: "/event/ApiEventStream" is the api category, which orgs[0] "a", the same Salesforce org (through orgs[2] "c") lists as sources.eventlogfile.event_types "API"`},
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
		// A "*" skips what the other entry lists; Pub/Sub's "*" finds only
		// *EventStream topics.
		"a star beside the other entry's names": {orgsSink + "orgs:\n" +
			entry("elf", user, `{eventlogfile: {event_types: ["*"], exclude: [API]}}`) + entry("api", user, "{eventlogfile: {event_types: [API]}}") +
			entry("rt", user, `{pubsub: {topics: [/event/LoginEventStream]}}`),
			map[string][]string{"elf": {"api", "rt"}, "api": {"elf", "rt"}, "rt": {"elf", "api"}}},
		"a Pub/Sub star beside change events": {orgsSink + "orgs:\n" +
			entry("rt", user, `{pubsub: {topics: ["*"]}}`) + entry("cdc", user, "{pubsub: {topics: [/data/AccountChangeEvent, /event/Order__e]}}"),
			map[string][]string{"rt": {"cdc"}, "cdc": {"rt"}}},
		"a star with allow_overlap beside topics it never lists": {orgsSink + "orgs:\n" +
			entry("rt", user, `{allow_overlap: true, pubsub: {topics: ["*"]}}`) + entry("cdc", user, "{pubsub: {topics: [/data/AccountChangeEvent, /event/Order__e]}}"),
			map[string][]string{"rt": {"cdc"}, "cdc": {"rt"}}},
		"stars on two sources, both allowing overlap": {orgsSink + "orgs:\n" +
			entry("rt", user, `{allow_overlap: true, pubsub: {topics: ["*"]}}`) + entry("elf", user, `{allow_overlap: true, eventlogfile: {event_types: ["*"]}}`),
			map[string][]string{"rt": {"elf"}, "elf": {"rt"}}},
		// Two objects of one category on one source load in one entry,
		// and across two; allow_overlap may differ between entries.
		"one category on one source": {orgsSink + "orgs:\n" +
			entry("a", user, "{allow_overlap: true, eventlog_objects: {objects: [{name: LoginHistory, timestamp_field: LoginTime}]}}") +
			entry("b", user, "{eventlog_objects: {objects: [{name: LoginEvent}]}}"),
			map[string][]string{"a": {"b"}, "b": {"a"}}},
		"debug logs of different users": {orgsSink + "orgs:\n" +
			entry("a", user, "{apexlog: {enabled: true, users: [a@acme.com]}}") + entry("b", user, "{apexlog: {enabled: true, users: [b@acme.com]}}"),
			map[string][]string{"a": {"b"}, "b": {"a"}}},
		// Different users on the generic login host, and orgs behind one
		// loopback test server, one instance host or one proxy, are
		// different orgs: only a My Domain names one.
		"different orgs alike": {orgsSink + "orgs:\n" +
			entry("a", "u@a.com", "{eventlogfile: {event_types: [API]}}") + entry("b", "u@b.com", "{eventlogfile: {event_types: [API]}}") + `
  - {name: c, salesforce: {auth_mode: client_credentials, login_url: "http://127.0.0.1:8080", client_id: ck, client_secret_file: /s}, sources: {eventlogfile: {event_types: [API]}}}
  - {name: d, salesforce: {auth_mode: client_credentials, login_url: "http://127.0.0.1:8080", client_id: ck, client_secret_file: /s}, sources: {eventlogfile: {event_types: [API]}}}
  - {name: g, salesforce: {auth_mode: client_credentials, login_url: "https://na139.salesforce.com", client_id: ck, client_secret_file: /s}, sources: {eventlogfile: {event_types: [API]}}}
  - {name: h, salesforce: {auth_mode: client_credentials, login_url: "https://na139.salesforce.com", client_id: ck, client_secret_file: /s}, sources: {eventlogfile: {event_types: [API]}}}
  - {name: i, salesforce: {auth_mode: client_credentials, login_url: "https://sfproxy.corp.example/i", client_id: ck, client_secret_file: /s}, sources: {eventlogfile: {event_types: [API]}}}
  - {name: j, salesforce: {auth_mode: client_credentials, login_url: "https://sfproxy.corp.example/j", client_id: ck, client_secret_file: /s}, sources: {eventlogfile: {event_types: [API]}}}
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

// An org id that is not one is refused, rather than left out of the
// identity that groups the entries of one org.
func TestAMalformedOrgIDIsRefused(t *testing.T) {
	for _, id := range []string{"00D5e000000AbC", "00D5e000000AbCdEA", "00D5e000000AbCdEA9", "00D5e000000-bCd"} {
		yaml := orgsSink + "orgs:\n  - {name: a, salesforce: {auth_mode: none, org_id: " + id + "}, sources: {synthetic: {rate: 5}}}\n"
		if msg := problems(t, yaml); !strings.Contains(msg, `orgs[0].salesforce.org_id: "`+id+`" is not an org id: 18 letters and digits`) {
			t.Errorf("%s: %s", id, msg)
		}
	}
}
