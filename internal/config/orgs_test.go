package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/config"
)

const orgsSink = "sink: {loki: {url: http://loki:3100/loki/api/v1/push}}\n"

// twoOrgs is a valid two-org file: prod (JWT, EventLogFile and Pub/Sub) and
// uat (client credentials on a sandbox, SOQL polling).
const twoOrgs = orgsSink + `
orgs:
  - name: prod
    salesforce:
      auth_mode: jwt_bearer
      client_id: ck-prod
      username: integration@acme.com
      private_key_file: /run/secrets/prod-key
    sources:
      eventlogfile: {event_types: ["*"]}
      pubsub: {topics: [/event/LoginEventStream]}
  - name: uat-2
    salesforce:
      auth_mode: client_credentials
      environment: sandbox
      login_url: https://acme--uat.sandbox.my.salesforce.com
      client_id: ck-uat
      client_secret_file: /run/secrets/uat-secret
      token_ttl: 30m
    sources:
      eventlog_objects:
        objects: [{name: LoginHistory, timestamp_field: LoginTime}, {name: LoginEvent, poll_interval: 1m}]
`

func TestOrgsParseWithDefaultsPerOrg(t *testing.T) {
	cfg, warnings, err := config.Load(write(t, twoOrgs))
	if err != nil || len(warnings) != 0 {
		t.Fatalf("%v %v", err, warnings)
	}
	if len(cfg.Orgs) != 2 || cfg.Orgs[0].Name != "prod" || cfg.Orgs[1].Name != "uat-2" {
		t.Fatalf("orgs %+v", cfg.Orgs)
	}
	prod, uat := cfg.Orgs[0], cfg.Orgs[1]
	// What each file set.
	if prod.Salesforce.AuthMode != "jwt_bearer" || prod.Salesforce.ClientID != "ck-prod" || prod.Salesforce.PrivateKeyFile != "/run/secrets/prod-key" ||
		uat.Salesforce.AuthMode != "client_credentials" || uat.Salesforce.ClientSecretFile != "/run/secrets/uat-secret" ||
		uat.Salesforce.TokenTTL != 30*time.Minute || uat.Salesforce.SalesforceLoginURL() != "https://acme--uat.sandbox.my.salesforce.com" {
		t.Fatalf("salesforce %+v / %+v", prod.Salesforce, uat.Salesforce)
	}
	// The defaults, applied per org, as at the top level.
	def := config.Defaults()
	if prod.Salesforce.Environment != "production" || prod.Salesforce.APIVersion != "60.0" || prod.Salesforce.TokenTTL != 2*time.Hour ||
		uat.Salesforce.APIVersion != def.Salesforce.APIVersion || uat.Salesforce.Environment != "sandbox" {
		t.Fatalf("salesforce defaults %+v / %+v", prod.Salesforce, uat.Salesforce)
	}
	if e := prod.Sources.EventLogFile; e.Interval != "auto" || e.PollInterval != time.Hour || e.Lookback != 24*time.Hour || e.Concurrency != 4 {
		t.Fatalf("eventlogfile defaults %+v", e)
	}
	if p := prod.Sources.PubSub; p.ReplayPreset != "LATEST" || p.NumRequested != 100 || p.Endpoint != "api.pubsub.salesforce.com:7443" || p.StallTimeout != 5*time.Minute {
		t.Fatalf("pubsub defaults %+v", p)
	}
	// Sources not set in an org keep their defaults there too.
	if uat.Sources.EventLogFile.Concurrency != 4 || uat.Sources.PubSub.NumRequested != 100 || prod.Sources.Synthetic.Rate != 0 {
		t.Fatalf("unset sources: %+v %+v", uat.Sources, prod.Sources.Synthetic)
	}
	// A list inside an org's list entry gets its item defaults.
	objs := uat.Sources.EventlogObjects.Objects
	if len(objs) != 2 || objs[0].TimestampField != "LoginTime" || objs[0].PollInterval != 5*time.Minute || objs[0].BigObject != "auto" ||
		objs[1].TimestampField != "EventDate" || objs[1].PollInterval != time.Minute || objs[1].MaxCatchupRecords != 200000 {
		t.Fatalf("objects %+v", objs)
	}
	// The top level stays at its defaults.
	if !reflect.DeepEqual(cfg.Salesforce, def.Salesforce) || cfg.ShardName != "" {
		t.Fatalf("top level %+v %q", cfg.Salesforce, cfg.ShardName)
	}
}

// Each org is checked as the top-level salesforce and sources are, with
// the org's index in the path.
func TestOrgsValidation(t *testing.T) {
	org := func(name, rest string) string {
		return fmt.Sprintf("  - name: %s\n    salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: /k}\n%s", name, rest)
	}
	sf := "salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: /k}\n"
	for name, tc := range map[string]struct{ yaml, want string }{
		"upper case name": {orgsSink + "orgs:\n" + org("prod", "") + org("Sandbox", ""),
			`orgs[1].name: "Sandbox" is not an org name: 1 to 40 of a-z, 0-9 and -`},
		"underscore": {orgsSink + "orgs:\n" + org("my_org", ""), `orgs[0].name: "my_org" is not an org name`},
		"dot":        {orgsSink + "orgs:\n" + org("a.b", ""), `orgs[0].name: "a.b" is not an org name`},
		"slash":      {orgsSink + "orgs:\n" + org("a/b", ""), `orgs[0].name: "a/b" is not an org name`},
		"too long":   {orgsSink + "orgs:\n" + org(strings.Repeat("a", 41), ""), `orgs[0].name: "` + strings.Repeat("a", 41) + `" is not an org name`},
		"no name":    {orgsSink + "orgs:\n  - salesforce: {auth_mode: none}\n", "orgs[0].name: required: every orgs entry needs a name"},
		"duplicate": {orgsSink + "orgs:\n" + org("prod", "") + org("uat", "") + org("prod", ""),
			`orgs[2].name: "prod" is also the name of orgs[0]; org names must be unique`},
		"top-level salesforce beside orgs": {orgsSink + sf + "orgs:\n" + org("prod", ""),
			"salesforce: set beside orgs (auth_mode, client_id, username, private_key_file): with orgs, each org's salesforce and sources belong in its orgs entry; move them into one (orgs[].salesforce)"},
		"top-level sources beside orgs": {orgsSink + "sources: {pubsub: {topics: ['*']}}\norgs:\n" + org("prod", ""),
			"sources: set beside orgs (pubsub.topics)"},
		"top-level objects beside orgs": {orgsSink + "sources: {eventlog_objects: {objects: [{name: A}]}}\norgs:\n" + org("prod", ""),
			"sources: set beside orgs (eventlog_objects.objects)"},
		"jwt without user": {orgsSink + "orgs:\n  - name: a\n    salesforce: {auth_mode: jwt_bearer, client_id: ck, private_key: k}\n",
			"orgs[0].salesforce.username: required when orgs[0].salesforce.auth_mode is jwt_bearer"},
		"missing secret": {orgsSink + "orgs:\n" + org("a", "") + "  - name: b\n    salesforce: {auth_mode: client_credentials, client_id: ck, login_url: https://b.my.salesforce.com}\n",
			"orgs[1].salesforce.client_secret: required when orgs[1].salesforce.auth_mode is client_credentials: set client_secret or client_secret_file"},
		"bad enum": {orgsSink + "orgs:\n  - name: a\n    salesforce: {auth_mode: password}\n",
			`orgs[0].salesforce.auth_mode: "password" is not one of [none jwt_bearer client_credentials]`},
		"short token ttl": {orgsSink + "orgs:\n  - name: a\n    salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key: k, token_ttl: 1m}\n",
			"orgs[0].salesforce.token_ttl: must be at least 2m (a token is re-minted 60s before it ends), got 1m"},
		"bad login url": {orgsSink + "orgs:\n  - name: a\n    salesforce: {login_url: 'acme.my.salesforce.com'}\n",
			`orgs[0].salesforce.login_url: "acme.my.salesforce.com" has no scheme`},
		"bare duration": {orgsSink + "orgs:\n" + org("a", "    sources: {eventlogfile: {event_types: [API], poll_interval: 60}}\n"),
			"orgs[0].sources.eventlogfile.poll_interval: 60 has no unit; write 60s"},
		"range": {orgsSink + "orgs:\n" + org("a", "    sources: {pubsub: {topics: ['*'], num_requested: 500}}\n"),
			"orgs[0].sources.pubsub.num_requested: must be at most 100, got 500"},
		"source without auth": {orgsSink + "orgs:\n" + org("a", "") + "  - name: b\n    sources: {pubsub: {topics: ['*']}}\n",
			"orgs[1].salesforce.auth_mode: required when orgs[1].sources.pubsub.topics is set"},
		"source without sink": {"orgs:\n" + org("a", "    sources: {eventlogfile: {event_types: [API]}}\n"),
			"sink.loki.url: required when a source is enabled (orgs[0].sources.eventlogfile.event_types is set)"},
		"nested item": {orgsSink + "orgs:\n" + org("a", "    sources: {eventlog_objects: {objects: [{name: A}, {name: B, poll_interval: 1s}]}}\n"),
			"orgs[0].sources.eventlog_objects.objects[1].poll_interval: must be at least 10s, got 1s"},
		"nested item twice": {orgsSink + "orgs:\n" + org("a", "    sources: {eventlog_objects: {objects: [{name: A}, {name: A}]}}\n"),
			"orgs[0].sources.eventlog_objects.objects[1].name: A is listed twice"},
		"unknown key": {orgsSink + "orgs:\n  - name: a\n    salesforce: {client_idd: x}\n",
			"orgs[0].salesforce.client_idd: unknown key; did you mean orgs[].salesforce.client_id?"},
		"not a mapping": {orgsSink + "orgs: [prod]\n", "orgs[0]: must be a mapping, not the string \"prod\""},
		"not a list":    {orgsSink + "orgs: {name: prod}\n", "orgs: must be a list, not a mapping"},
		"org label": {"sink: {loki: {url: http://l, labels: {org: x}}}\norgs:\n" + org("a", ""),
			"sink.loki.labels.org: set by each org when orgs are configured (org=<its name>, sf_org_id=<its org id>); remove it from sink.loki.labels"},
		"sf_org_id label": {"sink: {loki: {url: http://l, labels: {sf_org_id: x, job: j}}}\norgs:\n" + org("a", ""),
			"sink.loki.labels.sf_org_id: set by each org when orgs are configured"},
	} {
		t.Run(name, func(t *testing.T) {
			if msg := problems(t, tc.yaml); !strings.Contains(msg, tc.want) {
				t.Fatalf("want %q in:\n%s", tc.want, msg)
			}
		})
	}
	// The environment cannot address list entries: naming the list is an
	// error that says so.
	t.Setenv("SF2LOKI_ORGS", "x")
	if msg := problems(t, twoOrgs); !strings.Contains(msg, "environment variable SF2LOKI_ORGS names the list orgs, which only the configuration file can set") {
		t.Fatal(msg)
	}
}

func TestOrgsThatLoad(t *testing.T) {
	for name, yaml := range map[string]string{
		"one org":                 orgsSink + "orgs: [{name: a, salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: /k}}]\n",
		"40 characters":           "orgs: [{name: " + strings.Repeat("a-0", 13) + "z}]\n",
		"same credentials twice":  twoOrgs + "  - name: prod-elf\n    salesforce: {auth_mode: jwt_bearer, client_id: ck-prod, username: integration@acme.com, private_key_file: /run/secrets/prod-key}\n",
		"default top level named": orgsSink + "salesforce: {auth_mode: none}\nsources: {synthetic: {rate: 0}}\norgs: [{name: a}]\n",
		"other labels":            "sink: {loki: {labels: {job: sf2loki, environment: prod}}}\norgs: [{name: a}]\n",
		"empty orgs":              orgsSink + "salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: /k}\norgs: []\n",
		"labels without orgs":     "sink: {loki: {labels: {org: acme, sf_org_id: 00D}}}\n",
	} {
		if _, _, err := config.Load(write(t, yaml)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Each org keeps its own secret files; a blank inline secret with a file
// is fine, a blank one without is a missing secret, per org.
func TestOrgsSecretFilesPerOrg(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.pem", "b.secret"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("secret-"+f+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, _, err := config.Load(write(t, fmt.Sprintf(orgsSink+`orgs:
  - name: a
    salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key: "", private_key_file: %s/a.pem}
  - name: b
    salesforce: {auth_mode: client_credentials, client_id: ck, login_url: https://b.my.salesforce.com, client_secret_file: %s/b.secret}
`, dir, dir)))
	if err != nil {
		t.Fatal(err)
	}
	shards := cfg.Shards()
	if shards[0].Salesforce.PrivateKeyFile != filepath.Join(dir, "a.pem") || shards[0].Salesforce.ClientSecretFile != "" ||
		shards[1].Salesforce.ClientSecretFile != filepath.Join(dir, "b.secret") || shards[1].Salesforce.PrivateKeyFile != "" {
		t.Fatalf("secret files %+v / %+v", shards[0].Salesforce, shards[1].Salesforce)
	}
	msg := problems(t, orgsSink+`orgs:
  - name: a
    salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: /k}
  - name: b
    salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key: "  "}
`)
	if !strings.Contains(msg, "orgs[1].salesforce.private_key: required when orgs[1].salesforce.auth_mode is jwt_bearer: set private_key or private_key_file") ||
		strings.Contains(msg, "orgs[0]") {
		t.Fatal(msg)
	}
}

// shardNames are one shard's lease and checkpoint object names.
type shardNames struct {
	lease, state string
}

func TestShardNames(t *testing.T) {
	orgs := "orgs: [{name: prod}, {name: uat}, {name: dev-1}]\n"
	for name, tc := range map[string]struct {
		yaml    string
		get     func(c *config.Config) shardNames
		single  shardNames   // without orgs: exactly as configured
		shards  []shardNames // with orgs
		members string
	}{
		"s3": {
			yaml: "coordinate: {type: s3_lease, s3_lease: {bucket: b, key: sf2loki/leader.lease, endpoint_url: 'http://minio:9000'}}\n" +
				"state: {store: s3, s3: {bucket: b, key: sf2loki/state.json, endpoint_url: 'http://minio:9000'}}\n",
			get:    func(c *config.Config) shardNames { return shardNames{c.Coordinate.S3Lease.Key, c.State.S3.Key} },
			single: shardNames{"sf2loki/leader.lease", "sf2loki/state.json"},
			shards: []shardNames{{"sf2loki/leader.lease", "sf2loki/state.json"},
				{"sf2loki/shards/uat/leader.lease", "sf2loki/shards/uat/state.json"},
				{"sf2loki/shards/dev-1/leader.lease", "sf2loki/shards/dev-1/state.json"}},
			members: "sf2loki/shards/members.json",
		},
		"s3 keys without a directory": {
			yaml:   "coordinate: {type: s3_lease, s3_lease: {bucket: b, key: leader.lease}}\nstate: {store: s3, s3: {bucket: b, key: deep/er/state.json}}\n",
			get:    func(c *config.Config) shardNames { return shardNames{c.Coordinate.S3Lease.Key, c.State.S3.Key} },
			single: shardNames{"leader.lease", "deep/er/state.json"},
			shards: []shardNames{{"leader.lease", "deep/er/state.json"},
				{"shards/uat/leader.lease", "deep/er/shards/uat/state.json"},
				{"shards/dev-1/leader.lease", "deep/er/shards/dev-1/state.json"}},
			members: "shards/members.json",
		},
		"gcs": {
			yaml: "coordinate: {type: gcs_lease, gcs_lease: {bucket: b}}\nstate: {store: gcs, gcs: {bucket: b}}\n",
			get: func(c *config.Config) shardNames {
				return shardNames{c.Coordinate.GCSLease.ObjectName, c.State.GCS.ObjectName}
			},
			single: shardNames{"sf2loki/leader.lease", "sf2loki/state.json"},
			shards: []shardNames{{"sf2loki/leader.lease", "sf2loki/state.json"},
				{"sf2loki/shards/uat/leader.lease", "sf2loki/shards/uat/state.json"},
				{"sf2loki/shards/dev-1/leader.lease", "sf2loki/shards/dev-1/state.json"}},
			members: "sf2loki/shards/members.json",
		},
		"file": {
			yaml:   "coordinate: {type: file_lease, file_lease: {path: /var/lib/sf2loki/leader.lease}}\nstate: {file: {path: /var/lib/sf2loki/state.json}}\n",
			get:    func(c *config.Config) shardNames { return shardNames{c.Coordinate.FileLease.Path, c.State.File.Path} },
			single: shardNames{"/var/lib/sf2loki/leader.lease", "/var/lib/sf2loki/state.json"},
			shards: []shardNames{{"/var/lib/sf2loki/leader.lease", "/var/lib/sf2loki/state.json"},
				{"/var/lib/sf2loki/shards/uat/leader.lease", "/var/lib/sf2loki/shards/uat/state.json"},
				{"/var/lib/sf2loki/shards/dev-1/leader.lease", "/var/lib/sf2loki/shards/dev-1/state.json"}},
			members: "/var/lib/sf2loki/shards/members.json",
		},
		"relative files": {
			yaml:   "coordinate: {type: file_lease, file_lease: {path: leader.lease}}\nstate: {file: {path: ha/state.json}}\n",
			get:    func(c *config.Config) shardNames { return shardNames{c.Coordinate.FileLease.Path, c.State.File.Path} },
			single: shardNames{"leader.lease", "ha/state.json"},
			shards: []shardNames{{"leader.lease", "ha/state.json"},
				{"shards/uat/leader.lease", "ha/shards/uat/state.json"},
				{"shards/dev-1/leader.lease", "ha/shards/dev-1/state.json"}},
			members: "shards/members.json",
		},
		"k8s": {
			yaml:   "coordinate: {type: k8s_lease, k8s_lease: {namespace: ns, name: sf2loki-leader}}\nstate: {store: s3, s3: {bucket: b}}\n",
			get:    func(c *config.Config) shardNames { return shardNames{c.Coordinate.K8sLease.Name, c.State.S3.Key} },
			single: shardNames{"sf2loki-leader", "sf2loki/state.json"},
			shards: []shardNames{{"sf2loki-leader", "sf2loki/state.json"},
				{"sf2loki-leader-uat", "sf2loki/shards/uat/state.json"},
				{"sf2loki-leader-dev-1", "sf2loki/shards/dev-1/state.json"}},
			members: "sf2loki-leader-members",
		},
		"noop": {
			yaml:   "state: {file: {path: /s/state.json}}\n",
			get:    func(c *config.Config) shardNames { return shardNames{c.Coordinate.Type, c.State.File.Path} },
			single: shardNames{"noop", "/s/state.json"},
			shards: []shardNames{{"noop", "/s/state.json"}, {"noop", "/s/shards/uat/state.json"}, {"noop", "/s/shards/dev-1/state.json"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if name == "relative files" {
				// Set from the environment, a relative path stays relative
				// (to the working directory), and so do the shards' paths.
				t.Setenv("SF2LOKI_COORDINATE__FILE_LEASE__PATH", "leader.lease")
				t.Setenv("SF2LOKI_STATE__FILE__PATH", "ha/state.json")
			}
			// The single-org form: the configuration itself, unchanged.
			single, _, err := config.Load(write(t, tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			before := *single
			shards := single.Shards()
			if len(shards) != 1 || shards[0] != single || shards[0].ShardName != "" || tc.get(shards[0]) != tc.single ||
				!reflect.DeepEqual(*single, before) {
				t.Fatalf("single-org shards %+v", shards)
			}
			if single.MembersConfig() != nil {
				t.Fatal("a membership document in the single-org form")
			}

			cfg, _, err := config.Load(write(t, tc.yaml+orgs))
			if err != nil {
				t.Fatal(err)
			}
			shards = cfg.Shards()
			if len(shards) != len(tc.shards) {
				t.Fatalf("%d shards", len(shards))
			}
			for i, s := range shards {
				if s.ShardName != cfg.Orgs[i].Name || len(s.Orgs) != 0 {
					t.Errorf("shard %d: name %q, orgs %v", i, s.ShardName, s.Orgs)
				}
				if got := tc.get(s); got != tc.shards[i] {
					t.Errorf("shard %s: %+v, want %+v", s.ShardName, got, tc.shards[i])
				}
				// Everything else is the configuration's.
				if s.Coordinate.Type != cfg.Coordinate.Type || s.State.Store != cfg.State.Store || s.Sink.Loki.URL != cfg.Sink.Loki.URL ||
					s.Coordinate.S3Lease.Bucket != cfg.Coordinate.S3Lease.Bucket || s.State.S3.EndpointURL != cfg.State.S3.EndpointURL ||
					s.Coordinate.K8sLease.Namespace != cfg.Coordinate.K8sLease.Namespace {
					t.Errorf("shard %s differs beyond its names: %+v", s.ShardName, s)
				}
			}
			if tc.get(cfg) != tc.single {
				t.Fatalf("Shards changed the configuration: %+v", tc.get(cfg))
			}
			m := cfg.MembersConfig()
			if tc.members == "" {
				if m != nil {
					t.Fatalf("membership with noop: %+v", m.Coordinate)
				}
				return
			}
			l := m.Coordinate
			got := map[string]string{config.CoordinateS3Lease: l.S3Lease.Key, config.CoordinateGCSLease: l.GCSLease.ObjectName,
				config.CoordinateFileLease: l.FileLease.Path, config.CoordinateK8sLease: l.K8sLease.Name}[l.Type]
			if got != tc.members || l.S3Lease.Bucket != cfg.Coordinate.S3Lease.Bucket || l.S3Lease.EndpointURL != cfg.Coordinate.S3Lease.EndpointURL ||
				l.K8sLease.Namespace != cfg.Coordinate.K8sLease.Namespace || m.ShardName != "" {
				t.Fatalf("membership document %q, want %q (%+v)", got, tc.members, l)
			}
		})
	}
}

// Every coordinator's and store's object is derived, whichever is chosen:
// a shard's configuration never points at another's.
func TestShardsDeriveEveryType(t *testing.T) {
	cfg, _, err := config.Load(write(t, "orgs: [{name: a}, {name: b}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.Shards()[1]
	got := []string{b.Coordinate.FileLease.Path, b.Coordinate.K8sLease.Name, b.Coordinate.S3Lease.Key, b.Coordinate.GCSLease.ObjectName,
		b.State.File.Path, b.State.S3.Key, b.State.GCS.ObjectName}
	want := []string{"/var/lib/sf2loki/shards/b/leader.lease", "sf2loki-leader-b", "sf2loki/shards/b/leader.lease", "sf2loki/shards/b/leader.lease",
		"/var/lib/sf2loki/shards/b/state.json", "sf2loki/shards/b/state.json", "sf2loki/shards/b/state.json"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	m := *cfg
	m.Coordinate.Type = config.CoordinateS3Lease
	l := m.MembersConfig().Coordinate
	got = []string{l.FileLease.Path, l.K8sLease.Name, l.S3Lease.Key, l.GCSLease.ObjectName}
	want = []string{"/var/lib/sf2loki/shards/members.json", "sf2loki-leader-members", "sf2loki/shards/members.json", "sf2loki/shards/members.json"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("members got  %q\nwant %q", got, want)
	}
}

// Editing one shard's copy changes neither another's nor the
// configuration, maps and lists included.
func TestShardsAreIndependentCopies(t *testing.T) {
	cfg, _, err := config.Load(write(t, strings.Replace(twoOrgs, orgsSink, "sink: {loki: {url: http://l, labels: {job: j}, structured_metadata_fields: [a]}}\n", 1)+
		"telemetry: {headers: {x: y}}\ncoordinate: {type: s3_lease, s3_lease: {bucket: b}}\nstate: {store: s3, s3: {bucket: b}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	orig := fmt.Sprintf("%#v", cfg)
	shards := cfg.Shards()
	a, b := shards[0], shards[1]
	a.Sink.Loki.Labels["job"] = "changed"
	a.Sink.Loki.Labels["new"] = "x"
	a.Sink.Loki.StructuredMetadataFields[0] = "changed"
	a.Telemetry.Headers["x"] = "changed"
	a.Sources.PubSub.Topics[0] = "changed"
	a.Sources.EventLogFile.EventTypes = append(a.Sources.EventLogFile.EventTypes, "more")
	a.Salesforce.ClientID = "changed"
	a.State.S3.Key = "changed"
	b.Sources.EventlogObjects.Objects[0].Name = "changed"
	b.Coordinate.K8sLease.Name = "changed"
	if got := fmt.Sprintf("%#v", cfg); got != orig {
		t.Fatalf("editing the shards changed the configuration:\n%s\n%s", orig, got)
	}
	if b.Sink.Loki.Labels["job"] != "j" || len(b.Sink.Loki.Labels) != 1 || b.Sink.Loki.StructuredMetadataFields[0] != "a" || b.Telemetry.Headers["x"] != "y" {
		t.Fatalf("editing one shard changed another: %+v", b.Sink.Loki)
	}
	if again := cfg.Shards(); again[1].Sources.EventlogObjects.Objects[0].Name != "LoginHistory" || again[0].Salesforce.ClientID != "ck-prod" {
		t.Fatalf("Shards after edits: %+v", again)
	}
	m := cfg.MembersConfig()
	if m == nil {
		t.Fatal("no membership configuration")
	}
	m.Sink.Loki.Labels["job"] = "changed"
	m.Orgs[0].Name = "changed"
	if got := fmt.Sprintf("%#v", cfg); got != orig {
		t.Fatal("editing the membership configuration changed the configuration")
	}
}

// Derived objects that meet each other, or the membership document, are
// refused with what to do.
func TestShardObjectsMustNotAlias(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for name, tc := range map[string]struct{ yaml, want string }{
		"s3 state in the lease's shard directory": {
			"coordinate: {type: s3_lease, s3_lease: {bucket: b, key: sf2loki/state.json}}\n" +
				"state: {store: s3, s3: {bucket: b, key: sf2loki/shards/b/state.json}}\norgs: [{name: a}, {name: b}]\n",
			`coordinate.s3_lease.key: org "a"'s checkpoint document and org "b"'s lease are the same object (s3://b/sf2loki/shards/b/state.json); ` +
				"every org's lease and checkpoint document and the membership document must be separate objects"},
		"s3 state is the membership document": {
			"coordinate: {type: s3_lease, s3_lease: {bucket: b, key: x/leader.lease}}\n" +
				"state: {store: s3, s3: {bucket: b, key: x/shards/members.json}}\norgs: [{name: a}, {name: b}]\n",
			`coordinate.s3_lease.key: org "a"'s checkpoint document and the membership document are the same object (s3://b/x/shards/members.json)`},
		"s3 endpoints spelled differently": {
			"coordinate: {type: s3_lease, s3_lease: {bucket: b, key: k/leader.lease, endpoint_url: 'http://MinIO:80'}}\n" +
				"state: {store: s3, s3: {bucket: b, key: k/shards/members.json, endpoint_url: 'http://minio/'}}\norgs: [{name: a}, {name: b}]\n",
			"the membership document are the same object"},
		"gcs": {
			"coordinate: {type: gcs_lease, gcs_lease: {bucket: b, object_name: l/shards/a/s}}\n" +
				"state: {store: gcs, gcs: {bucket: b, object_name: l/s}}\norgs: [{name: x}, {name: a}]\n",
			`state.gcs.object_name: org "x"'s lease and org "a"'s checkpoint document are the same object (gs://b/l/shards/a/s)`},
		"k8s org named members": {
			"coordinate: {type: k8s_lease}\nstate: {store: s3, s3: {bucket: b}}\norgs: [{name: a}, {name: members}]\n",
			`orgs[1].name: the membership document and org "members"'s lease are both the Lease default/sf2loki-leader-members; ` +
				"every org's Lease and the membership Lease must differ"},
		"k8s name too long": {
			"coordinate: {type: k8s_lease, k8s_lease: {name: " + strings.Repeat("l", 220) + "}}\nstate: {store: s3, s3: {bucket: b}}\norgs: [{name: a}, {name: " + strings.Repeat("o", 40) + "}]\n",
			"coordinate.k8s_lease.name: 220 characters is too long with orgs: the Leases <name>-<org> and <name>-members must fit in 253 characters; shorten it to at most 212"},
		"file state is a lease's lock file": {
			"coordinate: {type: file_lease, file_lease: {path: d/s.json}}\nstate: {file: {path: d/shards/b/s.json.lock}}\norgs: [{name: a}, {name: b}]\n",
			`org "a"'s checkpoint document (file://` + filepath.Join(dir, "d/shards/b/s.json.lock") + `) is the lock file (<path>.lock) of org "b"'s lease`},
		"file lease inside a state file": {
			"coordinate: {type: file_lease, file_lease: {path: d/l}}\nstate: {file: {path: d/shards}}\norgs: [{name: a}, {name: b}]\n",
			"is inside org \"a\"'s checkpoint document (file://" + filepath.Join(dir, "d/shards") + "), which must be a file"},
		"noop states": {
			"state: {file: {path: d/shards/b/s}}\norgs: [{name: a}, {name: b}, {name: c}]\n",
			"", // nothing aliases: c's is d/shards/b/shards/c/s
		},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.want == "" {
				if _, _, err := config.Load(writeIn(t, dir, tc.yaml)); err != nil {
					t.Fatal(err)
				}
				return
			}
			if msg := problemsIn(t, dir, tc.yaml); !strings.Contains(msg, tc.want) {
				t.Fatalf("want %q in:\n%s", tc.want, msg)
			}
		})
	}
	// The configured pair still reports as before, once.
	msg := problems(t, "coordinate: {type: s3_lease, s3_lease: {bucket: b, key: k}}\nstate: {store: s3, s3: {bucket: b, key: k}}\norgs: [{name: a}, {name: b}]\n")
	if !strings.Contains(msg, "coordinate.s3_lease.key: the lease and the checkpoint document are the same object (s3://b/k)") || strings.Count(msg, "same object") != 1 {
		t.Fatal(msg)
	}
}

// The orgs example in the generated example file loads as written.
func TestOrgsExampleLoads(t *testing.T) {
	var b strings.Builder
	b.WriteString(orgsSink + "orgs:\n")
	in := false
	for line := range strings.SplitSeq(config.Example(), "\n") {
		switch {
		case line == "orgs: []":
			in = true
		case in && line == "# For example:":
		case in && strings.HasPrefix(line, "#   "):
			b.WriteString(strings.TrimPrefix(line, "# ") + "\n")
		default:
			in = false
		}
	}
	cfg, _, err := config.Load(write(t, b.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if len(cfg.Orgs) != 2 || cfg.Shards()[1].ShardName != "uat" {
		t.Fatalf("%+v", cfg.Orgs)
	}
}

// An org's sections mirror the top-level ones key for key, as the
// reference says (it lists them only once).
func TestOrgSectionsMirrorTheTopLevel(t *testing.T) {
	top := map[string]config.Field{}
	for _, f := range config.Schema() {
		top[f.Path] = f
	}
	n := 0
	for _, f := range config.Schema() {
		rest, ok := strings.CutPrefix(f.Path, "orgs[].")
		if !ok || rest == "name" {
			continue
		}
		g, ok := top[rest]
		if !ok {
			t.Errorf("%s has no top-level %s", f.Path, rest)
			continue
		}
		if f.Depth == 1 { // orgs[].salesforce, orgs[].sources: their own doc
			if f.SameAs != rest {
				t.Errorf("%s mirrors %q, not %s", f.Path, f.SameAs, rest)
			}
			continue
		}
		if g.Type != f.Type || g.Default != f.Default || g.Doc != f.Doc || g.Min != f.Min || g.Max != f.Max || g.Format != f.Format {
			t.Errorf("%s differs from %s: %+v / %+v", f.Path, rest, f, g)
		}
		n++
	}
	if n < 40 {
		t.Fatalf("only %d keys under orgs[]", n)
	}
}
