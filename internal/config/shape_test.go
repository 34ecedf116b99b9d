package config_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain/shape"
)

func TestTransformsAndSampleAreCheckedAtLoad(t *testing.T) {
	msg := problems(t, orgsSink+`
sources:
  eventlogfile:
    sample: {API: 1.5, Login: -0.1}
    transforms:
      - {action: hash, fields: [USER_ID], pattern: "x"}
      - {action: mask}
  pubsub:
    transforms:
      - {action: regex_replace, name: ids, fields: [Uri], pattern: "x(?=y)"}
      - {action: drop_row, fields: [Status]}
      - {action: encrypt, fields: [A]}
`)
	for _, want := range []string{
		`sources.eventlogfile.sample.API: 1.5 is not a fraction from 0 (keep none) to 1 (keep all)`,
		`sources.eventlogfile.sample.Login: -0.1 is not a fraction`,
		`sources.eventlogfile.transforms[0].pattern: rule hash#1: only regex_replace reads pattern`,
		`sources.eventlogfile.transforms[1].fields: rule mask#2: required by mask`,
		`sources.pubsub.transforms[0].pattern: rule ids: "x(?=y)" is not an RE2 regular expression: "error parsing regexp: invalid or unsupported Perl syntax: ` + "`(?=`" + `"`,
		`sources.pubsub.transforms[1].fields: rule drop_row#2: drop_row does not read fields`,
		`sources.pubsub.transforms[1].match: rule drop_row#2: required by drop_row`,
		`sources.pubsub.transforms[2].action: rule encrypt#3: "encrypt" is not one of hash, mask, drop_field, regex_replace, drop_row`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the problems do not say %q:\n%s", want, msg)
		}
	}
	// Each org's sources are checked.
	msg = problems(t, strings.Replace(twoOrgs, "      eventlog_objects:\n", "      eventlog_objects:\n        sample: {\"*\": 2}\n", 1))
	if !strings.Contains(msg, `orgs[1].sources.eventlog_objects.sample.*: 2 is not a fraction`) {
		t.Fatalf("the second org's sample is not checked:\n%s", msg)
	}
}

func TestMatchAndSampleKeysKeepTheirCase(t *testing.T) {
	cfg, _, err := config.Load(write(t, orgsSink+`
sources:
  transform_salt: pepper
  eventlogfile:
    sample: {API: 0.25, "/event/ApiEventStream": 0.5}
    transforms:
      - {action: drop_row, match: {STATUS_CODE: 200, URI: "/services/*"}}
  synthetic:
    transforms:
      - {action: drop_row, match: {Status: Success}}
`))
	if err != nil {
		t.Fatal(err)
	}
	elf := cfg.Sources.EventLogFile
	if !maps.Equal(elf.Sample, map[string]float64{"API": 0.25, "/event/ApiEventStream": 0.5}) ||
		!maps.Equal(elf.Transforms[0].Match, map[string]string{"STATUS_CODE": "200", "URI": "/services/*"}) ||
		!maps.Equal(cfg.Sources.Synthetic.Transforms[0].Match, map[string]string{"Status": "Success"}) {
		t.Fatalf("sample %v, match %v / %v", elf.Sample, elf.Transforms[0].Match, cfg.Sources.Synthetic.Transforms[0].Match)
	}
	cfg, _, err = config.Load(write(t, strings.Replace(twoOrgs, "      eventlog_objects:\n",
		"      eventlog_objects:\n        sample: {LoginEvent: 0.1}\n        transforms: [{action: drop_row, match: {LoginType: SAML*}}]\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if o := cfg.Orgs[1].Sources.EventlogObjects; o.Sample["LoginEvent"] != 0.1 || o.Transforms[0].Match["LoginType"] != "SAML*" {
		t.Fatalf("orgs[1]: sample %v, match %v", o.Sample, o.Transforms[0].Match)
	}
}

func TestSampleFromTheEnvironmentIsANumber(t *testing.T) {
	t.Setenv("SF2LOKI_SOURCES__PUBSUB__SAMPLE__X", "0.5")
	t.Setenv("SF2LOKI_SOURCES__EVENTLOGFILE__SAMPLE__API", "0.1")
	cfg, _, err := config.Load(write(t, orgsSink+`
sources:
  eventlogfile: {sample: {API: 0.5, Login: 1}}
`))
	if err != nil {
		t.Fatal(err)
	}
	// The environment's entry replaces the file's, whatever its case (the
	// environment's names arrive in lower case; sampling matches event
	// types without regard to case).
	if !maps.Equal(cfg.Sources.PubSub.Sample, map[string]float64{"x": 0.5}) ||
		!maps.Equal(cfg.Sources.EventLogFile.Sample, map[string]float64{"api": 0.1, "Login": 1}) {
		t.Fatalf("pubsub %v, eventlogfile %v", cfg.Sources.PubSub.Sample, cfg.Sources.EventLogFile.Sample)
	}
	t.Setenv("SF2LOKI_SOURCES__PUBSUB__SAMPLE__Y", "half")
	msg := problems(t, orgsSink+"sources: {pubsub: {sample: {Z: [1]}}, eventlogfile: {sample: {W: yes}}}\n")
	for _, want := range []string{
		`sources.pubsub.sample.y: "half" is not a number (a fraction from 0 to 1) (from SF2LOKI_SOURCES__PUBSUB__SAMPLE__Y)`,
		`sources.pubsub.sample.Z: must be a number, not a list`,
		`sources.eventlogfile.sample.W: "yes" is not a number`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the problems do not say %q:\n%s", want, msg)
		}
	}
}

func TestShapeWarnings(t *testing.T) {
	hash := orgsSink + `
sources:
  pubsub:
    transforms: [{action: mask, fields: [SourceIp]}, {action: hash, fields: [UserId]}]
`
	// The source is off (no topics): its transforms are checked all the
	// same, and have no effect, which is a warning of its own.
	const off = "sources.pubsub.transforms is set, but has no effect: sources.pubsub.topics is empty"
	_, warnings, err := config.Load(write(t, hash))
	if err != nil || len(warnings) != 2 || !strings.Contains(warnings[0], "sources.pubsub.transforms[1] hashes without a salt: "+config.UnsaltedHashAdvice) ||
		!strings.Contains(warnings[0], "set sources.transform_salt_file") || !strings.HasPrefix(warnings[1], off) {
		t.Fatalf("%v %q", err, warnings)
	}
	for _, salt := range []string{"  transform_salt: pepper\n", "  transform_salt_file: /run/secrets/salt\n"} {
		if _, warnings, err := config.Load(write(t, strings.Replace(hash, "sources:\n", "sources:\n"+salt, 1))); err != nil || len(warnings) != 1 || !strings.HasPrefix(warnings[0], off) {
			t.Fatalf("with %s: %v %q", salt, err, warnings)
		}
	}
	_, warnings, err = config.Load(write(t, strings.Replace(twoOrgs, "      eventlog_objects:\n",
		"      eventlog_objects:\n        transforms: [{action: hash, fields: [UserId]}]\n", 1)))
	if err != nil || len(warnings) != 1 || !strings.HasPrefix(warnings[0], "orgs[1].sources.eventlog_objects.transforms[0] hashes without a salt") ||
		!strings.Contains(warnings[0], "set orgs[1].sources.transform_salt_file") {
		t.Fatalf("orgs: %v %q", err, warnings)
	}
	// A field promoted to structured metadata and dropped: a warning, not a
	// problem.
	_, warnings, err = config.Load(write(t, `
sink: {loki: {url: http://loki:3100/loki/api/v1/push, structured_metadata_fields: [USER_ID, CLIENT_IP]}}
sources:
  eventlogfile: {transforms: [{action: drop_field, fields: ["*_IP"]}]}
`))
	if err != nil || len(warnings) != 2 || !strings.Contains(warnings[0], "sources.eventlogfile.transforms[0] drops CLIENT_IP, which sink.loki.structured_metadata_fields promotes") ||
		!strings.HasPrefix(warnings[1], "sources.eventlogfile.transforms is set, but has no effect") {
		t.Fatalf("%v %q", err, warnings)
	}
}

// Pub/Sub's sample keys and rules' event_types name a topic or its last
// element, the event_type label's value: an environment override can only
// name the latter (a variable's name holds no /).
func TestPubSubShapesMatchTheTopicsLastElement(t *testing.T) {
	t.Setenv("SF2LOKI_SOURCES__PUBSUB__SAMPLE__APIEVENTSTREAM", "0.25")
	cfg, warnings, err := config.Load(write(t, orgsSink+`salesforce: {auth_mode: client_credentials, client_id: x, client_secret: y, login_url: "https://x.my.salesforce.com"}
sources:
  transform_salt: pepper
  pubsub:
    topics: [/event/ApiEventStream, /event/LoginEventStream]
    transforms:
      - {action: hash, fields: [UserId], event_types: [LoginEventStream]}
`))
	if err != nil || len(warnings) != 0 {
		t.Fatalf("%v %q", err, warnings)
	}
	s, err := shape.New("pubsub", cfg.Sources.Shape("pubsub"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.For("/event/ApiEventStream").Sampling() {
		t.Errorf("SF2LOKI_SOURCES__PUBSUB__SAMPLE__APIEVENTSTREAM=0.25 samples nothing on /event/ApiEventStream")
	}
	rec := map[string]any{"UserId": "005000000000001"}
	s.For("/event/LoginEventStream").Values(rec)
	if rec["UserId"] == "005000000000001" {
		t.Errorf("a hash rule with event_types [LoginEventStream] leaves UserId in clear text on /event/LoginEventStream")
	}
	// Only Pub/Sub's names are paths.
	if s, _ := shape.New("eventlogfile", cfg.Sources.Shape("eventlogfile")); s != nil && s.For("a/ApiEventStream").Sampling() {
		t.Errorf("eventlogfile matched a last path element")
	}
}

// A sample key or an event_types glob matching none of the names a source
// lists shapes nothing: check warns. A "*" source is not checked.
func TestShapesMatchingNoListedNameWarn(t *testing.T) {
	_, warnings, err := config.Load(write(t, orgsSink+`salesforce: {auth_mode: client_credentials, client_id: x, client_secret: y, login_url: "https://x.my.salesforce.com"}
sources:
  allow_overlap: true
  pubsub:
    topics: [/event/ApiEventStream]
    sample: {"/event/ApiEventStream": 0.5, apieventstream: 0.5, "*Api*": 0.5, LoginEventStream: 0.1}
    transforms: [{action: mask, fields: [SourceIp], event_types: [ApiEventStream, "/event/LoginEvent*"]}]
  eventlogfile:
    event_types: [API]
    sample: {api: 0.5, Login: 0.5}
  eventlog_objects:
    objects: [{name: ApiEvent}]
    transforms: [{action: mask, name: ip, fields: [SourceIp], event_types: [LoginEvent]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`sources.pubsub.sample.LoginEventStream matches none of the names the source lists (/event/ApiEventStream): it samples nothing`,
		`sources.pubsub.transforms[0].event_types "/event/LoginEvent*" matches none of the names the source lists (/event/ApiEventStream): rule mask#1 applies to no row`,
		`sources.eventlogfile.sample.Login matches none of the names the source lists (API): it samples nothing`,
		`sources.eventlog_objects.transforms[0].event_types "LoginEvent" matches none of the names the source lists (ApiEvent): rule ip applies to no row`,
	}
	if strings.Join(warnings, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(warnings, "\n"), strings.Join(want, "\n"))
	}
	_, warnings, err = config.Load(write(t, orgsSink+`salesforce: {auth_mode: client_credentials, client_id: x, client_secret: y, login_url: "https://x.my.salesforce.com"}
sources:
  pubsub: {topics: ["*"], sample: {Nothing: 0.5}}
  eventlogfile: {event_types: ["*"], sample: {Nothing: 0.5}}
`))
	if err != nil || len(warnings) != 0 {
		t.Errorf("a \"*\" source: %v %q", err, warnings)
	}
}
