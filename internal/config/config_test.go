package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
)

func write(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sf2loki.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// problems loads yaml and returns the problem lines (failing if it loads).
func problems(t *testing.T, yaml string) string {
	t.Helper()
	_, _, err := config.Load(write(t, yaml))
	var ce *config.Error
	if !errors.As(err, &ce) || !errors.Is(err, domain.ErrInvalidConfig) {
		t.Fatalf("loaded a bad configuration: %v", err)
	}
	return err.Error()
}

func TestDefaults(t *testing.T) {
	cfg, warnings, err := config.Load("")
	if err != nil || len(warnings) != 0 {
		t.Fatalf("defaults: %v %v", err, warnings)
	}
	if cfg.Coordinate.Type != "noop" || cfg.State.Store != "file" || cfg.State.File.Path != "/var/lib/sf2loki/state.json" ||
		cfg.Coordinate.FileLease.TTL != 30*time.Second || cfg.Coordinate.FileLease.RenewInterval != 10*time.Second ||
		cfg.State.S3.Key != "sf2loki/state.json" || cfg.Coordinate.S3Lease.Key != "sf2loki/leader.lease" ||
		cfg.Coordinate.K8sLease.Name != "sf2loki-leader" || cfg.Service.HealthAddr != ":8080" ||
		cfg.Service.ShutdownGrace != 25*time.Second || cfg.Service.LogFormat != "json" {
		t.Fatalf("defaults: %+v", cfg)
	}
	if d := config.Defaults(); d.Coordinate.GCSLease.TTL != 30*time.Second || d.State.GCS.ObjectName != "sf2loki/state.json" {
		t.Fatalf("Defaults(): %+v", d)
	}
}

func TestEnvironmentBeatsFileAndInterpolation(t *testing.T) {
	t.Setenv("SF2LOKI_COORDINATE__S3_LEASE__BUCKET", "from-env")
	t.Setenv("LEASE_KEY", "leases/a.json")
	cfg, _, err := config.Load(write(t, `
coordinate:
  type: s3_lease
  s3_lease:
    bucket: from-file
    key: ${LEASE_KEY}
    ttl: 1h30m
    renew_interval: 45s
state:
  store: s3
  s3: {bucket: state-bucket}
`))
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Coordinate.S3Lease
	if l.Bucket != "from-env" || l.Key != "leases/a.json" || l.TTL != 90*time.Minute || l.RenewInterval != 45*time.Second {
		t.Fatalf("%+v", l)
	}
}

func TestUnknownKeysAndAllProblemsTogether(t *testing.T) {
	t.Setenv("SF2LOKI_STATE__S3__BUKET", "x")
	msg := problems(t, `
coordinate:
  type: s3_lease
  s3_lease:
    bukcet: x
    renew_interval: 20s
state:
  store: s3
servce: {}
`)
	for _, want := range []string{
		"coordinate.s3_lease.bukcet: unknown key; did you mean coordinate.s3_lease.bucket?",
		"servce: unknown key",
		"state.s3.buket: environment variable SF2LOKI_STATE__S3__BUKET names an unknown key; did you mean state.s3.bucket?",
		"coordinate.s3_lease.bucket: required when coordinate.type is s3_lease",
		"coordinate.s3_lease.renew_interval: must be below ttl/2 (15s), got 20s",
		"state.s3.bucket: required when state.store is s3",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
}

func TestValidation(t *testing.T) {
	cases := map[string]struct{ yaml, want string }{
		"undefined variable": {`service: {log_level: "${SF2LOKI_TEST_UNSET_VAR}"}`, "service.log_level: ${SF2LOKI_TEST_UNSET_VAR} is not set"},
		"bad duration":       {`coordinate: {file_lease: {ttl: 5x}}`, "coordinate.file_lease.ttl"},
		"bad enum":           {`coordinate: {type: zookeeper}`, `coordinate.type: "zookeeper" is not one of`},
		"gcs lease bucket":   {`coordinate: {type: gcs_lease}`, "coordinate.gcs_lease.bucket: required when coordinate.type is gcs_lease"},
		"gcs state bucket":   {`state: {store: gcs}`, "state.gcs.bucket: required when state.store is gcs"},
		"zero ttl":           {`coordinate: {type: file_lease, file_lease: {ttl: 0s}}`, "coordinate.file_lease.ttl: must be > 0"},
		"zero renew":         {`coordinate: {type: file_lease, file_lease: {renew_interval: 0s}}`, "coordinate.file_lease.renew_interval: must be > 0"},
		"renew >= ttl/2":     {`coordinate: {type: k8s_lease, k8s_lease: {lease_duration: 10s, renew_interval: 8s}}`, "must be below lease_duration/2"},
		"k8s whole seconds":  {`coordinate: {type: k8s_lease, k8s_lease: {lease_duration: 30500ms, renew_interval: 10s}}`, "whole seconds"},
		"gcs renew >= 1s": {`{coordinate: {type: gcs_lease, gcs_lease: {bucket: b, ttl: 1s, renew_interval: 400ms}}, state: {store: gcs, gcs: {bucket: b}}}`,
			"coordinate.gcs_lease.renew_interval: must be at least 1s"},
		"same s3 object": {`{coordinate: {type: s3_lease, s3_lease: {bucket: b, key: k}}, state: {store: s3, s3: {bucket: b, key: k}}}`,
			"coordinate.s3_lease.key: the lease and the checkpoint document are the same object (s3://b/k)"},
		"same gcs object": {`{coordinate: {type: gcs_lease, gcs_lease: {bucket: b, object_name: o}}, state: {store: gcs, gcs: {bucket: b, object_name: o}}}`,
			"the lease and the checkpoint document are the same object (gs://b/o)"},
		"same file": {`{coordinate: {type: file_lease, file_lease: {path: /x/a.json}}, state: {file: {path: /x/./a.json}}}`,
			"coordinate.file_lease.path: the lease and the checkpoint document are the same object"},
		"not a mapping":  {`- a`, "the top level must be a mapping"},
		"zero batch":     {`sink: {loki: {batch: {max_entries: 0}}}`, "sink.loki.batch.max_entries: must be > 0, got 0; the minimum is 1"},
		"source no sink": {`sources: {synthetic: {rate: 5}}`, "sink.loki.url: required when a source is enabled"},
		"section scalar": {`coordinate: 5`, "coordinate: must be a mapping"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if msg := problems(t, tc.yaml); !strings.Contains(msg, tc.want) {
				t.Fatalf("want %q in:\n%s", tc.want, msg)
			}
		})
	}
}

func TestRiskyPairingWarns(t *testing.T) {
	_, warnings, err := config.Load(write(t, `coordinate: {type: k8s_lease}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "k8s_lease with state.store file") {
		t.Fatalf("warnings %v", warnings)
	}
}

// TestGeneratedArtefactsAreCurrent fails when the committed example,
// reference or JSON Schema differs from the generator's output: run make
// generate.
func TestGeneratedArtefactsAreCurrent(t *testing.T) {
	for file, want := range map[string]string{
		"../../configs/sf2loki.example.yaml": config.Example(),
		"../../docs/config-reference.md":     config.Reference(),
		"../../configs/sf2loki.schema.json":  config.JSONSchema(),
	} {
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s is stale: run make generate", file)
		}
	}
	// The example loads as it is.
	if _, _, err := config.Load("../../configs/sf2loki.example.yaml"); err != nil {
		t.Fatalf("the example configuration does not load: %v", err)
	}
	// Every key is documented.
	for _, f := range config.Schema() {
		if f.Doc == "" {
			t.Errorf("%s has no doc string", f.Path)
		}
	}
}

func TestEnvironmentSetsMapEntries(t *testing.T) {
	t.Setenv("SF2LOKI_SINK__LOKI__LABELS__ENVIRONMENT", "production")
	t.Setenv("SF2LOKI_TELEMETRY__HEADERS__AUTHORIZATION", "Bearer x")
	cfg, _, err := config.Load(write(t, "sink:\n  loki: {labels: {job: sf2loki}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Sink.Loki.Labels; len(got) != 2 || got["job"] != "sf2loki" || got["environment"] != "production" {
		t.Fatalf("labels %v, want the file's job and the environment's environment", got)
	}
	if got := cfg.Telemetry.Headers["authorization"]; got != "Bearer x" {
		t.Fatalf("headers %v", cfg.Telemetry.Headers)
	}
}

func TestLabelsOutsideTheAllowedSetAreRefused(t *testing.T) {
	_, _, err := config.Load(write(t, "sink:\n  loki: {labels: {job: sf2loki, user_id: u1}}\n"))
	if err == nil || !strings.Contains(err.Error(), "sink.loki.labels.user_id: not an allowed label") {
		t.Fatalf("got %v", err)
	}
}

func TestSalesforceValidation(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"client credentials on the generic host": {"salesforce: {auth_mode: client_credentials, client_id: ck, client_secret: s, login_url: https://login.salesforce.com}\n",
			"salesforce.login_url: client_credentials needs the org's My Domain URL, not login.salesforce.com"},
		"client credentials without login_url": {"salesforce: {auth_mode: client_credentials, client_id: ck, client_secret: s}\n",
			"salesforce.login_url: required when salesforce.auth_mode is client_credentials"},
		"blank secret": {"salesforce: {auth_mode: client_credentials, client_id: ck, client_secret: '  ', login_url: https://acme.my.salesforce.com}\n",
			"salesforce.client_secret: required when salesforce.auth_mode is client_credentials: set client_secret or client_secret_file"},
		"jwt without user and key": {"salesforce: {auth_mode: jwt_bearer, client_id: ck}\n",
			"salesforce.username: required"},
		"jwt without key": {"salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u}\n",
			"salesforce.private_key: required"},
		"bad api version": {"salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: /k, api_version: v60}\n",
			`salesforce.api_version: "v60" is not a version like 60.0`},
	} {
		_, _, err := config.Load(write(t, tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
	}
	cfg, _, err := config.Load(write(t, "salesforce: {auth_mode: jwt_bearer, environment: sandbox, client_id: ck, username: u, private_key_file: /run/secrets/key}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Salesforce.SalesforceLoginURL() != "https://test.salesforce.com" || cfg.Salesforce.TokenTTL != 2*time.Hour || cfg.Salesforce.APIVersion != "60.0" {
		t.Fatalf("%+v", cfg.Salesforce)
	}
}

func TestEventlogObjects(t *testing.T) {
	base := "salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: /k}\nsink: {loki: {url: http://loki/push}}\n"
	cfg, _, err := config.Load(write(t, base+"sources:\n  eventlog_objects:\n    objects:\n      - {name: LoginEvent}\n      - {name: LoginHistory, timestamp_field: LoginTime, poll_interval: 1m, settle: 30s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	objs := cfg.Sources.EventlogObjects.Objects
	if len(objs) != 2 || objs[0].TimestampField != "EventDate" || objs[0].PollInterval != 5*time.Minute || objs[0].Lookback != time.Hour ||
		objs[0].MaxCatchupRecords != 200000 || objs[1].TimestampField != "LoginTime" || objs[1].Settle != 30*time.Second || objs[1].Lookback != time.Hour {
		t.Fatalf("objects with defaults: %+v", objs)
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"unknown item key": {base + "sources: {eventlog_objects: {objects: [{name: A, timestamp_feld: X}]}}\n",
			"sources.eventlog_objects.objects[0].timestamp_feld: unknown key; did you mean sources.eventlog_objects.objects[].timestamp_field?"},
		"big object":   {base + "sources: {eventlog_objects: {objects: [{name: LoginEvent, big_object: maybe}]}}\n", `objects[0].big_object: "maybe" is not auto, true or false`},
		"bad name":     {base + "sources: {eventlog_objects: {objects: [{name: 'Login Event'}]}}\n", `"Login Event" is not an object API name`},
		"twice":        {base + "sources: {eventlog_objects: {objects: [{name: A}, {name: A}]}}\n", "A is listed twice"},
		"no auth":      {"sink: {loki: {url: http://l}}\nsources: {eventlog_objects: {objects: [{name: A}]}}\n", "salesforce.auth_mode: required when sources.eventlog_objects.objects is set"},
		"not a list":   {base + "sources: {eventlog_objects: {objects: {name: A}}}\n", "must be a list"},
		"fast polling": {base + "sources: {eventlog_objects: {objects: [{name: A, poll_interval: 1s}]}}\n", "sources.eventlog_objects.objects[0].poll_interval: must be at least 10s, got 1s"},
	} {
		_, _, err := config.Load(write(t, tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
	}
}

func TestEventLogFileConfig(t *testing.T) {
	base := "salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: /k}\nsink: {loki: {url: http://loki/push}}\n"
	cfg, _, err := config.Load(write(t, base+"sources: {eventlogfile: {event_types: [API, Login]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if e := cfg.Sources.EventLogFile; e.Interval != "auto" || e.PollInterval != time.Hour || e.Lookback != 24*time.Hour || e.SettleWindow != 5*time.Minute || e.Concurrency != 4 {
		t.Fatalf("defaults %+v", e)
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"bad type":     {base + "sources: {eventlogfile: {event_types: ['Report Export']}}\n", `"Report Export" is not an event type name`},
		"bad interval": {base + "sources: {eventlogfile: {event_types: [API], interval: Weekly}}\n", `"Weekly" is not one of [auto Hourly Daily]`},
		"no auth":      {"sink: {loki: {url: http://l}}\nsources: {eventlogfile: {event_types: ['*']}}\n", "salesforce.auth_mode: required when sources.eventlogfile.event_types is set"},
		"concurrency":  {base + "sources: {eventlogfile: {event_types: [API], concurrency: 0}}\n", "sources.eventlogfile.concurrency: must be > 0, got 0; the minimum is 1"},
	} {
		_, _, err := config.Load(write(t, tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
	}
}

func TestPubSubConfig(t *testing.T) {
	base := "salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: /k}\nsink: {loki: {url: http://loki/push}}\n"
	cfg, _, err := config.Load(write(t, base+"sources: {pubsub: {topics: [/event/LoginEventStream, '*'], exclude: ['*Api*']}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Sources.PubSub; p.ReplayPreset != "LATEST" || p.NumRequested != 100 || p.RediscoveryInterval != time.Hour ||
		p.StallTimeout != 5*time.Minute || p.Endpoint != "api.pubsub.salesforce.com:7443" || p.Plaintext || len(p.Exclude) != 1 {
		t.Fatalf("defaults %+v", p)
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"bad topic":      {base + "sources: {pubsub: {topics: [LoginEventStream]}}\n", `"LoginEventStream" is not a topic`},
		"bad preset":     {base + "sources: {pubsub: {topics: ['*'], replay_preset: OLDEST}}\n", `"OLDEST" is not one of [LATEST EARLIEST CUSTOM]`},
		"over 100":       {base + "sources: {pubsub: {topics: ['*'], num_requested: 500}}\n", "sources.pubsub.num_requested: must be at most 100, got 500"},
		"no auth":        {"sink: {loki: {url: http://l}}\nsources: {pubsub: {topics: ['*']}}\n", "salesforce.auth_mode: required when sources.pubsub.topics is set"},
		"remote no TLS":  {base + "sources: {pubsub: {topics: ['*'], plaintext: true}}\n", "plaintext is allowed only to a loopback endpoint"},
		"no port":        {base + "sources: {pubsub: {topics: ['*'], endpoint: api.pubsub.salesforce.com}}\n", "is not host:port"},
		"stall too fast": {base + "sources: {pubsub: {topics: ['*'], stall_timeout: 10ms}}\n", "sources.pubsub.stall_timeout: must be at least 1s, got 10ms"},
	} {
		_, _, err := config.Load(write(t, tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
	}
	if _, _, err := config.Load(write(t, base+"sources: {pubsub: {topics: ['*'], endpoint: '127.0.0.1:7443', plaintext: true}}\n")); err != nil {
		t.Fatalf("plaintext to loopback: %v", err)
	}
}

func TestJWTAudience(t *testing.T) {
	for _, tc := range []struct {
		s    config.Salesforce
		want string
	}{
		{config.Salesforce{LoginURL: "https://acme.my.salesforce.com"}, "https://login.salesforce.com"},
		{config.Salesforce{Environment: "sandbox", LoginURL: "https://acme--uat.my.salesforce.com"}, "https://test.salesforce.com"},
		{config.Salesforce{Environment: "production", LoginURL: "https://acme--uat.sandbox.my.salesforce.com"}, "https://test.salesforce.com"},
		{config.Salesforce{JWTAudienceURL: "https://community.example.com/partners/", LoginURL: "https://acme.my.salesforce.com"}, "https://community.example.com/partners"},
	} {
		if got := tc.s.JWTAudience(); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.s, got, tc.want)
		}
	}
}

// A liveness guard shorter than one batch can legitimately take would
// resign healthy leaders: it is raised, with a warning.
func TestStallTimeoutIsRaisedAboveOneBatch(t *testing.T) {
	cfg, warnings, err := config.Load(write(t, "service: {stall_timeout: 30s}\nsink: {loki: {timeout: 1m, batch: {max_wait: 5s}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.EffectiveStallTimeout(), 5*time.Second+5*time.Minute+config.DefaultFileCommitInterval+10*time.Second; got != want {
		t.Fatalf("effective stall timeout %s, want %s", got, want)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "service.stall_timeout 30s is shorter") {
		t.Fatalf("warnings %q", warnings)
	}
	if cfg, _, _ := config.Load(""); cfg.EffectiveStallTimeout() != 5*time.Minute {
		t.Fatalf("the default: %s", cfg.EffectiveStallTimeout())
	}
}

// The checkpoint commit interval defaults by store: a file at once, an
// object every 10s; gcs refuses an interval under its one write a second.
func TestCommitIntervalByStore(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want time.Duration
	}{
		{"", time.Second},
		{"state: {store: s3, s3: {bucket: b}}\n", 10 * time.Second},
		{"state: {store: gcs, gcs: {bucket: b}}\n", 10 * time.Second},
		{"state: {store: s3, s3: {bucket: b}, commit_interval: 500ms}\n", 500 * time.Millisecond},
		{"state: {commit_interval: 2s}\n", 2 * time.Second},
	} {
		cfg, _, err := config.Load(write(t, tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := cfg.EffectiveCommitInterval(); got != tc.want {
			t.Fatalf("%q: commit interval %s, want %s", tc.yaml, got, tc.want)
		}
	}
	_, _, err := config.Load(write(t, "state: {store: gcs, gcs: {bucket: b}, commit_interval: 500ms}\n"))
	if err == nil || !strings.Contains(err.Error(), "state.commit_interval") || !strings.Contains(err.Error(), "one write per second") {
		t.Fatalf("gcs with 500ms: %v", err)
	}
	cfg, _, _ := config.Load(write(t, "state: {store: s3, s3: {bucket: b}}\n"))
	if got, want := cfg.EffectiveStallTimeout(), 5*time.Minute; got != want {
		t.Fatalf("stall timeout %s, want %s (above the minimum, which now holds the commit interval: %s)", got, want, cfg.MinStallTimeout())
	}
}
