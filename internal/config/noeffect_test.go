package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/config"
)

// noEffect returns the "no effect" warnings of loading yaml (failing if it
// does not load).
func noEffect(t *testing.T, yaml string) []string {
	t.Helper()
	_, warnings, err := config.Load(write(t, yaml))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, w := range warnings {
		if strings.Contains(w, "no effect") {
			out = append(out, w)
		}
	}
	return out
}

// TestKeysWithNoEffectWarn: a key set to something other than its default,
// in a part of sf2loki that does not run, is a warning naming the keys, the
// reason and the fix (before, check accepted every one of these silently).
func TestKeysWithNoEffectWarn(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"a lease that is not selected": {
			"coordinate: {type: file_lease, file_lease: {path: /tmp/l}, s3_lease: {bucket: b, region: eu-west-1}}\n",
			"coordinate.s3_lease.bucket, coordinate.s3_lease.region are set, but have no effect: coordinate.type is file_lease; remove them, or set coordinate.type: s3_lease to use them",
		},
		"a state store that is not selected": {
			"state: {store: file, gcs: {bucket: b}}\n",
			"state.gcs.bucket is set, but has no effect: state.store is file; remove it, or set state.store: gcs to use it",
		},
		"a source that is off": {
			orgsSink + "sources: {pubsub: {replay_preset: EARLIEST}}\n",
			"sources.pubsub.replay_preset is set, but has no effect: sources.pubsub.topics is empty, so the source is off; turn the source on with sources.pubsub.topics, or remove it",
		},
		"a source's list of rules, once": {
			orgsSink + "sources: {eventlog_objects: {transforms: [{action: mask, fields: [A]}, {action: drop_field, fields: [B], name: b}]}}\n",
			"sources.eventlog_objects.transforms is set, but has no effect: sources.eventlog_objects.objects is empty",
		},
		"apexlog off": {
			orgsSink + "sources: {apexlog: {users: [a@b.com]}}\n",
			"sources.apexlog.users is set, but has no effect: sources.apexlog.enabled is false",
		},
		"a basic-auth user with no token": {
			"sink: {loki: {url: http://loki:3100/loki/api/v1/push, basic_auth_user: alice}}\n",
			"sink.loki.basic_auth_user is set, but has no effect: neither sink.loki.auth_token nor auth_token_file is set, so no basic auth is sent; set sink.loki.auth_token_file to the password, or remove it",
		},
		"the OTLP push while off": {
			"service: {telemetry: {endpoint: 'https://otlp.example.com/otlp/v1/metrics', export_interval: 30s}}\n",
			"service.telemetry.endpoint, service.telemetry.export_interval are set, but have no effect: service.telemetry.enabled is false",
		},
		"trace export while off": {
			"telemetry: {service_name: mine}\n",
			"telemetry.service_name is set, but has no effect: telemetry.otlp_endpoint is blank",
		},
		"a budget action without a budget": {
			"sink: {loki: {egress: {budget_action: drop}}}\n",
			"sink.loki.egress.budget_action is set, but has no effect: sink.loki.egress.daily_byte_budget is 0",
		},
		"a client secret with jwt_bearer, in an org": {
			strings.Replace(twoOrgs, "      private_key_file: /run/secrets/prod-key\n", "      private_key_file: /run/secrets/prod-key\n      client_secret: s3cr3t\n", 1),
			"orgs[0].salesforce.client_secret is set, but has no effect: orgs[0].salesforce.auth_mode is jwt_bearer (they are client_credentials's); remove it",
		},
		"a token file beside the token": {
			"sink: {loki: {url: http://loki:3100/loki/api/v1/push, auth_token: s3cr3t, auth_token_file: /run/t}}\n",
			"sink.loki.auth_token_file is set, but has no effect: sink.loki.auth_token is set too, and it is used: the file is never read",
		},
		"a key file beside the key, in an org": {
			strings.Replace(twoOrgs, "      private_key_file: /run/secrets/prod-key\n", "      private_key_file: /run/secrets/prod-key\n      private_key: s3cr3t\n", 1),
			"orgs[0].salesforce.private_key_file is set, but has no effect: orgs[0].salesforce.private_key is set too",
		},
		"exclude without a star": {
			strings.Replace(twoOrgs, `eventlogfile: {event_types: ["*"]}`, `eventlogfile: {event_types: [API], exclude: [Report*]}`, 1),
			`orgs[0].sources.eventlogfile.exclude is set, but has no effect: orgs[0].sources.eventlogfile.event_types has no "*"`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := noEffect(t, tc.yaml)
			if len(got) != 1 || !strings.HasPrefix(got[0], tc.want) {
				t.Fatalf("warnings %q\nwant one starting %q", got, tc.want)
			}
			if strings.Contains(got[0], "s3cr3t") {
				t.Fatalf("a secret's value is quoted: %q", got[0])
			}
		})
	}
}

// TestKeysThatTakeEffectDoNotWarn: keys of the parts that run, and keys of
// idle parts left at their defaults (as a file that writes out every key
// has them), are not reported.
func TestKeysThatTakeEffectDoNotWarn(t *testing.T) {
	for name, yaml := range map[string]string{
		"the selected lease, others at their defaults": "coordinate: {type: s3_lease, s3_lease: {bucket: b}, file_lease: {path: /var/lib/sf2loki/leader.lease, ttl: 30s}}\nstate: {store: s3, s3: {bucket: b}}\n",
		"two orgs with their sources on":               twoOrgs,
		"a user with a token":                          "sink: {loki: {url: http://loki:3100/loki/api/v1/push, basic_auth_user: alice, auth_token_file: /run/t}}\n",
		"a source that is on":                          orgsSink + "sources: {synthetic: {rate: 5, event_types: [LoginEvent]}}\n",
		"rediscovery with a star":                      strings.Replace(twoOrgs, "pubsub: {topics: [/event/LoginEventStream]}", `pubsub: {topics: ["*"], rediscovery_interval: 5m}`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			if got := noEffect(t, yaml); len(got) != 0 {
				t.Fatalf("warnings %q", got)
			}
		})
	}
	// The generated example sets every key at its default.
	_, warnings, err := config.Load("../../configs/sf2loki.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warnings {
		if strings.Contains(w, "no effect") {
			t.Errorf("the example: %s", w)
		}
	}
}

// TestKeysWithNoEffectAreReportedOnce: a key an outer rule (the source is
// off) claims is not reported again by an inner one (no "*").
func TestKeysWithNoEffectAreReportedOnce(t *testing.T) {
	got := noEffect(t, orgsSink+"sources: {pubsub: {rediscovery_interval: 5m, stall_timeout: 10m}}\n")
	if len(got) != 1 || !strings.HasPrefix(got[0], "sources.pubsub.rediscovery_interval, sources.pubsub.stall_timeout are set, but have no effect: sources.pubsub.topics is empty") {
		t.Fatalf("warnings %q", got)
	}
	if i := slices.IndexFunc(got, func(w string) bool { return strings.Contains(w, `has no "*"`) }); i >= 0 {
		t.Fatalf("reported twice: %q", got)
	}
}
