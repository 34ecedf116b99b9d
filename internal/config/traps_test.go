package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/sfrules"
)

const trapsBase = "salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: /k}\nsink: {loki: {url: http://loki:3100/loki/api/v1/push}}\n"

// TestEventLogFileTypesAreSalesforces: a misspelt type is refused with the
// documented one it misses; a type far from every documented one (one
// Salesforce may have added since) is a warning; case does not matter
// (SOQL compares EventType without it).
func TestEventLogFileTypesAreSalesforces(t *testing.T) {
	msg := problems(t, trapsBase+"sources: {eventlogfile: {event_types: [API, ReportExprt, Logn]}}\n")
	for _, want := range []string{
		"sources.eventlogfile.event_types: ReportExprt is not an EventLogFile event type: did you mean ReportExport? No file of type ReportExprt would ever be listed " +
			"(Salesforce's list: https://developer.salesforce.com/docs/atlas.en-us.object_reference.meta/object_reference/sforce_api_objects_eventlogfile_supportedeventtypes.htm)",
		"Logn is not an EventLogFile event type: did you mean Login?",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("want %q in:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "API is not") {
		t.Errorf("API refused:\n%s", msg)
	}
	msg = problems(t, trapsBase+"sources: {eventlogfile: {event_types: [LoginEventStream, apievent]}}\n")
	for _, want := range []string{
		"sources.eventlogfile.event_types: LoginEventStream is a Real-Time Event Monitoring event, not an EventLogFile event type: no file of it would ever be listed; " +
			"stream it with sources.pubsub.topics: [/event/LoginEventStream], or poll its storage object with sources.eventlog_objects.objects: [LoginEvent]",
		"apievent is a Real-Time Event Monitoring event, not an EventLogFile event type",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("want %q in:\n%s", want, msg)
		}
	}
	msg = problems(t, "orgs: [{name: a, salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: /k}, sources: {eventlogfile: {event_types: [LightningPageVeiw]}}}]\n"+
		"sink: {loki: {url: http://loki:3100/loki/api/v1/push}}\n")
	if !strings.Contains(msg, "orgs[0].sources.eventlogfile.event_types: LightningPageVeiw is not an EventLogFile event type: did you mean LightningPageView?") {
		t.Errorf("an orgs entry:\n%s", msg)
	}

	_, warnings, err := config.Load(write(t, trapsBase+"sources: {eventlogfile: {event_types: [reportexport, LOGIN, '*', QuantumTeleport]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], "sources.eventlogfile.event_types: QuantumTeleport is not an EventLogFile event type Salesforce documents") ||
		!strings.Contains(warnings[0], "sf2loki doctor's entitlement line says whether the org has files of it") {
		t.Fatalf("warnings: %q", warnings)
	}
}

// TestEventLogFileTypeList: one name per type, each a name the API takes,
// the free ones among them.
func TestEventLogFileTypeList(t *testing.T) {
	seen := map[string]bool{}
	for _, ty := range sfrules.EventLogFileTypes {
		if seen[strings.ToLower(ty)] || !sfrules.ValidName(ty) {
			t.Errorf("%q twice or not a name", ty)
		}
		seen[strings.ToLower(ty)] = true
	}
	for _, ty := range sfrules.FreeEventLogFileTypes {
		if !slices.Contains(sfrules.EventLogFileTypes, ty) {
			t.Errorf("free type %s is not in the list", ty)
		}
	}
}

// TestLoginURLsThatCannotWork: a Lightning Experience or Setup host has no
// token endpoint (the My Domain login host is named instead); plain http
// is refused except to a loopback address (a local test server).
func TestLoginURLsThatCannotWork(t *testing.T) {
	sf := func(extra string) string {
		return "salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: /k, " + extra + "}\n"
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"lightning": {sf("login_url: 'https://acme.lightning.force.com'"),
			"salesforce.login_url: https://acme.lightning.force.com is the org's Lightning Experience host, which has no OAuth token endpoint: " +
				"use the org's My Domain login URL, https://acme.my.salesforce.com (Setup > My Domain"},
		"sandbox lightning": {sf("login_url: 'https://acme--uat.sandbox.lightning.force.com/'"),
			"use the org's My Domain login URL, https://acme--uat.sandbox.my.salesforce.com"},
		"setup host":  {sf("login_url: 'https://acme.my.salesforce-setup.com'"), "is the org's Setup host, which has no OAuth token endpoint: use the org's My Domain login URL, https://acme.my.salesforce.com"},
		"visualforce": {sf("login_url: 'https://acme--c.vf.force.com'"), "is a Visualforce host, which has no OAuth token endpoint"},
		"an orgs entry": {"orgs: [{name: a, salesforce: {auth_mode: client_credentials, client_id: ck, client_secret: s, login_url: 'https://acme.lightning.force.com'}}]\n",
			"orgs[0].salesforce.login_url: https://acme.lightning.force.com is the org's Lightning Experience host"},
		"plain http": {sf("login_url: 'http://acme.my.salesforce.com'"),
			"salesforce.login_url: http://acme.my.salesforce.com is plain http: Salesforce takes the token request (the key's assertion or the client secret) over https only; " +
				"write https://acme.my.salesforce.com (plain http is allowed only to a loopback address, for a local test server)"},
		"audience": {sf("jwt_audience: 'https://acme.lightning.force.com'"),
			"salesforce.jwt_audience: https://acme.lightning.force.com is the org's Lightning Experience host: the audience is https://login.salesforce.com (production)"},
	} {
		t.Run(name, func(t *testing.T) {
			if msg := problems(t, tc.yaml); !strings.Contains(msg, tc.want) {
				t.Fatalf("want %q in:\n%s", tc.want, msg)
			}
		})
	}
	for _, ok := range []string{"http://127.0.0.1:8443", "http://localhost:9000", "https://acme.my.salesforce.com", "https://acme--uat.sandbox.my.salesforce.com"} {
		if _, _, err := config.Load(write(t, sf("login_url: '"+ok+"'"))); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
}
