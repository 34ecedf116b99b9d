package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/config"
)

// kubeletServiceEnv is what kubelet puts into every new pod's environment
// for a Service named sf2loki with the one TCP port "http" 8080 that
// deploy/ creates (service links).
var kubeletServiceEnv = map[string]string{
	"SF2LOKI_SERVICE_HOST":        "10.96.0.10",
	"SF2LOKI_SERVICE_PORT":        "8080",
	"SF2LOKI_SERVICE_PORT_HTTP":   "8080",
	"SF2LOKI_PORT":                "tcp://10.96.0.10:8080",
	"SF2LOKI_PORT_8080_TCP":       "tcp://10.96.0.10:8080",
	"SF2LOKI_PORT_8080_TCP_PROTO": "tcp",
	"SF2LOKI_PORT_8080_TCP_PORT":  "8080",
	"SF2LOKI_PORT_8080_TCP_ADDR":  "10.96.0.10",
}

// TestEnvironmentOverridesOnlyWhatNamesAKey: a variable is an override
// when its name holds "__" or names a top-level key; Kubernetes' service
// links and other SF2LOKI_ variables are not sf2loki's and are ignored.
func TestEnvironmentOverridesOnlyWhatNamesAKey(t *testing.T) {
	for k, v := range kubeletServiceEnv {
		t.Setenv(k, v)
	}
	t.Setenv("SF2LOKI_REQUIRE_INTEGRATION", "1")
	t.Setenv("SF2LOKI_SERVICE__SHUTDOWN_GRACE", "7s")
	cfg, warnings, err := config.Load(write(t, "service: {health_addr: ':9090'}\n"))
	if err != nil {
		t.Fatalf("the service-link variables Kubernetes injects stop the load: %v", err)
	}
	if cfg.Service.ShutdownGrace != 7*time.Second || cfg.Service.HealthAddr != ":9090" {
		t.Fatalf("service %+v", cfg.Service)
	}
	if len(warnings) != 0 {
		t.Fatalf("warnings about variables that are not sf2loki's: %v", warnings)
	}

	// A key written with "_" between its levels is ignored, with a warning.
	t.Setenv("SF2LOKI_SERVICE_HEALTH_ADDR", "127.0.0.1:1")
	cfg, warnings, err = config.Load("")
	if err != nil || cfg.Service.HealthAddr != ":8080" {
		t.Fatalf("SF2LOKI_SERVICE_HEALTH_ADDR: %v %+v", err, cfg)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "SF2LOKI_SERVICE_HEALTH_ADDR is ignored") ||
		!strings.Contains(warnings[0], "did you mean SF2LOKI_SERVICE__HEALTH_ADDR?") {
		t.Fatalf("warnings %v", warnings)
	}

	// With "__", or naming a top-level key, it is meant for sf2loki: an
	// unknown key is still an error.
	t.Setenv("SF2LOKI_SERVICE__HEALTH_ADR", "x")
	t.Setenv("SF2LOKI_SERVICE", "x")
	t.Setenv("SF2LOKI_SOURCES__EVENTLOG_OBJECTS__OBJECTS", "x")
	t.Setenv("SF2LOKI_Service__Log_Level", "x")
	msg := problems(t, "")
	for _, want := range []string{
		"sources.eventlog_objects.objects: environment variable SF2LOKI_SOURCES__EVENTLOG_OBJECTS__OBJECTS names the list sources.eventlog_objects.objects, which only the configuration file can set",
		"service.log_level: environment variable SF2LOKI_Service__Log_Level is read only in upper case: write SF2LOKI_SERVICE__LOG_LEVEL",
		"service.health_adr: environment variable SF2LOKI_SERVICE__HEALTH_ADR names an unknown key; did you mean service.health_addr?",
		"service: environment variable SF2LOKI_SERVICE names the section service, not a key; set its keys, e.g. SF2LOKI_SERVICE__HEALTH_ADDR",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "SERVICE_HOST") || strings.Contains(msg, "PORT_8080") {
		t.Errorf("a service-link variable is reported:\n%s", msg)
	}
}

// TestCheckRefusesWhatRunCannotSurvive: each configuration here passed
// Load before and broke run (aliased lease and checkpoint, nanosecond
// durations, unallocatable queues, URLs run retries forever). Each
// problem names the key and says what to do.
func TestCheckRefusesWhatRunCannotSurvive(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "real"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	s3pair := func(leaseEndpoint, stateEndpoint string) string {
		return fmt.Sprintf("coordinate: {type: s3_lease, s3_lease: {bucket: b, key: k, region: r, endpoint_url: %q}}\n"+
			"state: {store: s3, s3: {bucket: b, key: k, region: r, endpoint_url: %q}}\n", leaseEndpoint, stateEndpoint)
	}
	filePair := func(lease, state string) string {
		return fmt.Sprintf("coordinate: {type: file_lease, file_lease: {path: %q}}\nstate: {file: {path: %q}}\n", lease, state)
	}
	sink := "sink: {loki: {url: http://loki:3100/loki/api/v1/push}}\n"
	sf := "salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: /k}\n"
	cases := map[string]struct{ yaml, want string }{
		// The lease and the checkpoint document aliased through spelling.
		"s3 endpoint trailing slash": {s3pair("http://minio:9000", "http://minio:9000/"),
			"coordinate.s3_lease.key: the lease and the checkpoint document are the same object (s3://b/k)"},
		"s3 endpoint case and default port": {s3pair("http://MinIO", "http://minio:80"),
			"coordinate.s3_lease.key: the lease and the checkpoint document are the same object"},
		"s3 endpoint loopback names": {s3pair("http://localhost:9000", "http://127.0.0.1:9000"),
			"coordinate.s3_lease.key: the lease and the checkpoint document are the same object"},
		"file relative and absolute": {filePair("state.json", filepath.Join(dir, "state.json")),
			"coordinate.file_lease.path: the lease and the checkpoint document are the same object (file://" + filepath.Join(dir, "state.json") + ")"},
		"file dot segments": {filePair("./real/../real/./s.json", "real/s.json"),
			"coordinate.file_lease.path: the lease and the checkpoint document are the same object"},
		"file through a symlinked directory": {filePair("link/s.json", filepath.Join(dir, "real", "s.json")),
			"coordinate.file_lease.path: the lease and the checkpoint document are the same object (file://" + filepath.Join(dir, "real", "s.json") + ")"},
		"file lease is the state's lock file": {filePair("link/s.json.lock", "real/s.json"),
			"coordinate.file_lease.path: the lease file " + filepath.Join(dir, "real", "s.json.lock") + " and the checkpoint file " +
				filepath.Join(dir, "real", "s.json") + ": one is the other's lock file"},
		"file state is the lease's lock file": {filePair("l", "l.lock"), "one is the other's lock file (<path>.lock); point coordinate.file_lease.path at another file"},
		"file inside the other":               {filePair("a", "a/state.json"), "coordinate.file_lease.path: the lease file " + filepath.Join(dir, "a") + " and the checkpoint file"},

		// Durations without a unit are nanoseconds.
		"bare ttl":            {"coordinate: {type: file_lease, file_lease: {ttl: 30, renew_interval: 10}}\n", "coordinate.file_lease.ttl: 30 has no unit; write 30s"},
		"bare renew":          {"coordinate: {type: file_lease, file_lease: {ttl: 30, renew_interval: 10}}\n", "coordinate.file_lease.renew_interval: 10 has no unit; write 10s"},
		"bare quoted":         {"sink: {loki: {timeout: '30'}}\n", "sink.loki.timeout: 30 has no unit; write 30s"},
		"bare float":          {"sink: {loki: {batch: {max_wait: 1.5}}}\n", "sink.loki.batch.max_wait: 1.5 has no unit; write 1.5s"},
		"bare in a list item": {sf + sink + "sources: {eventlog_objects: {objects: [{name: A, poll_interval: 60}]}}\n", "sources.eventlog_objects.objects[0].poll_interval: 60 has no unit; write 60s"},
		"not a duration":      {"service: {shutdown_grace: soon}\n", `service.shutdown_grace: "soon" is not a duration; write it like 30s, 1m30s, 500ms or 1d`},

		// Minimums.
		"ttl too short":          {"coordinate: {type: s3_lease, s3_lease: {bucket: b, ttl: 1s, renew_interval: 400ms}}\nstate: {store: s3, s3: {bucket: c}}\n", "coordinate.s3_lease.ttl: must be at least 2s, got 1s"},
		"renew too short":        {"coordinate: {type: s3_lease, s3_lease: {bucket: b, ttl: 1s, renew_interval: 400ms}}\nstate: {store: s3, s3: {bucket: c}}\n", "coordinate.s3_lease.renew_interval: must be at least 500ms, got 400ms"},
		"k8s lease too short":    {"coordinate: {type: k8s_lease, k8s_lease: {lease_duration: 1s, renew_interval: 100ms}}\n", "coordinate.k8s_lease.lease_duration: must be at least 2s, got 1s"},
		"max_wait too short":     {"sink: {loki: {batch: {max_wait: 1ms}}}\n", "sink.loki.batch.max_wait: must be at least 10ms, got 1ms"},
		"loki timeout too short": {"sink: {loki: {timeout: 10ms}}\n", "sink.loki.timeout: must be at least 1s, got 10ms"},
		"shutdown_grace zero":    {"service: {shutdown_grace: 0s}\n", "service.shutdown_grace: must be > 0, got 0s; the minimum is 1s"},
		"stall_timeout short":    {"service: {stall_timeout: 10s}\n", "service.stall_timeout: must be at least 30s, got 10s (or 0)"},
		"elf poll too fast":      {"sources: {eventlogfile: {poll_interval: 10s}}\n", "sources.eventlogfile.poll_interval: must be at least 1m, got 10s"},
		"rediscovery too fast":   {"sources: {pubsub: {rediscovery_interval: 1s}}\n", "sources.pubsub.rediscovery_interval: must be at least 1m, got 1s (or 0)"},
		"negative settle":        {sf + sink + "sources: {eventlog_objects: {objects: [{name: A, settle: -1s}]}}\n", "sources.eventlog_objects.objects[0].settle: must be at least 0s, got -1s"},

		// Sizes and counts.
		"queue_entries max int64":   {"sink: {loki: {batch: {queue_entries: 9223372036854775807}}}\n", "sink.loki.batch.queue_entries: must be at most 1000000, got 9223372036854775807"},
		"queue_entries 4e9":         {"sink: {loki: {batch: {queue_entries: 4000000000}}}\n", "sink.loki.batch.queue_entries: must be at most 1000000, got 4000000000"},
		"queue_entries beyond int":  {"sink: {loki: {batch: {queue_entries: 99999999999999999999}}}\n", "sink.loki.batch.queue_entries: 1e+20 is not a whole number (allowed: 1 to 1000000)"},
		"queue_entries fraction":    {"sink: {loki: {batch: {queue_entries: 1.5}}}\n", "sink.loki.batch.queue_entries: 1.5 is not a whole number"},
		"queue_bytes":               {"sink: {loki: {batch: {queue_bytes: 1099511627776}}}\n", "sink.loki.batch.queue_bytes: must be at most 4294967296 (4 GiB), got 1099511627776"},
		"max_entries":               {"sink: {loki: {batch: {max_entries: 10000000}}}\n", "sink.loki.batch.max_entries: must be at most 100000"},
		"max_bytes":                 {"sink: {loki: {batch: {max_bytes: 1073741824}}}\n", "sink.loki.batch.max_bytes: must be at most 67108864 (64 MiB)"},
		"max_line_bytes":            {"sink: {loki: {max_line_bytes: 1073741824}}\n", "sink.loki.max_line_bytes: must be at most 16777216 (16 MiB)"},
		"concurrency":               {"sources: {eventlogfile: {concurrency: 1000}}\n", "sources.eventlogfile.concurrency: must be at most 16, got 1000"},
		"num_requested":             {"sources: {pubsub: {num_requested: 0}}\n", "sources.pubsub.num_requested: must be > 0, got 0; the minimum is 1"},
		"bridge_max_bytes":          {"sources: {pubsub: {bridge_max_bytes: -1}}\n", "sources.pubsub.bridge_max_bytes: must be at least 0, got -1"},
		"max_catchup_records":       {sf + sink + "sources: {eventlog_objects: {objects: [{name: A, max_catchup_records: 2000000000}]}}\n", "sources.eventlog_objects.objects[0].max_catchup_records: must be at most 10000000"},
		"synthetic rate":            {"sources: {synthetic: {rate: 2000000000}}\n" + "sink: {loki: {url: http://l}}\n", "sources.synthetic.rate: must be at most 1000000"},
		"synthetic rate from env":   {"", "sources.synthetic.rate: abc is not a whole number (allowed: 0 to 1000000) (from SF2LOKI_SOURCES__SYNTHETIC__RATE)"},
		"bool not a bool":           {"sources: {pubsub: {plaintext: maybe}}\n", `sources.pubsub.plaintext: "maybe" is not true or false`},
		"mapping for a number":      {"sink: {loki: {batch: {max_entries: {a: 1}}}}\n", "sink.loki.batch.max_entries: must be a whole number, not a mapping"},
		"list for a string":         {"sink: {loki: {url: [a]}}\n", "sink.loki.url: must be a string, not a list"},
		"nested label":              {"sink: {loki: {labels: {job: {a: b}}}}\n", "sink.loki.labels.job: must be a string, not a mapping"},
		"nested list of strings":    {"sources: {pubsub: {topics: [[a]]}}\n", "sources.pubsub.topics[0]: must be a string, not a list"},
		"duration for a mapping":    {"coordinate: {file_lease: {ttl: {a: 1}}}\n", "coordinate.file_lease.ttl: must be a duration like 30s, not a mapping"},
		"loki url garbage":          {"sink: {loki: {url: 'ht!tp://::::/push'}}\n", `sink.loki.url: "ht!tp://::::/push" is not a URL: first path segment in URL cannot contain colon`},
		"loki url without scheme":   {"sink: {loki: {url: '127.0.0.1:3100/loki/api/v1/push'}}\n", `sink.loki.url: "127.0.0.1:3100/loki/api/v1/push" has no scheme; write http://127.0.0.1:3100/loki/api/v1/push or https://`},
		"loki url other scheme":     {"sink: {loki: {url: 'ftp://loki/push'}}\n", `sink.loki.url: "ftp://loki/push": the scheme must be http or https, not "ftp"`},
		"loki url without host":     {"sink: {loki: {url: 'http://:3100/push'}}\n", `sink.loki.url: "http://:3100/push" has no host`},
		"loki url bad port":         {"sink: {loki: {url: 'http://loki:99999/push'}}\n", `sink.loki.url: "http://loki:99999/push": the port must be a number from 1 to 65535`},
		"s3 endpoint without host":  {"state: {store: s3, s3: {bucket: b, endpoint_url: 'minio:9000'}}\n", `state.s3.endpoint_url: "minio:9000" has no scheme`},
		"lease endpoint":            {"coordinate: {s3_lease: {endpoint_url: 'http//minio'}}\n", `coordinate.s3_lease.endpoint_url: "http//minio" has no scheme`},
		"otlp endpoint":             {"telemetry: {otlp_endpoint: 'otel:4318'}\n", `telemetry.otlp_endpoint: "otel:4318" has no scheme`},
		"login url":                 {"salesforce: {login_url: 'acme.my.salesforce.com'}\n", `salesforce.login_url: "acme.my.salesforce.com" has no scheme`},
		"pubsub endpoint no host":   {"sources: {pubsub: {endpoint: ':7443'}}\n", `sources.pubsub.endpoint: ":7443" has no host`},
		"pubsub endpoint bad port":  {"sources: {pubsub: {endpoint: 'api.pubsub.salesforce.com:grpc'}}\n", "sources.pubsub.endpoint: \"api.pubsub.salesforce.com:grpc\": the port must be a number from 1 to 65535"},
		"health_addr without colon": {"service: {health_addr: '8080'}\n", `service.health_addr: "8080" is not host:port (missing port in address)`},
	}
	t.Setenv("SF2LOKI_SOURCES__SYNTHETIC__RATE", "")
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if name == "synthetic rate from env" {
				t.Setenv("SF2LOKI_SOURCES__SYNTHETIC__RATE", "abc")
			}
			// The configuration file sits in the working directory: its
			// relative paths mean the same against either.
			if msg := problemsIn(t, dir, tc.yaml); !strings.Contains(msg, tc.want) {
				t.Fatalf("want %q in:\n%s", tc.want, msg)
			}
		})
	}
}

// TestValidSpellingsStillLoad: the limits leave every ordinary value alone.
func TestValidSpellingsStillLoad(t *testing.T) {
	dir := t.TempDir()
	for name, yaml := range map[string]string{
		"zero durations and counts": "sources: {pubsub: {rediscovery_interval: 0, bridge_max_bytes: 0}}\nservice: {stall_timeout: 0}\n",
		"separate s3 objects":       "coordinate: {type: s3_lease, s3_lease: {bucket: b, key: l, endpoint_url: 'http://minio:9000/'}}\nstate: {store: s3, s3: {bucket: b, key: s, endpoint_url: 'http://minio:9000'}}\n",
		"other s3 endpoint":         "coordinate: {type: s3_lease, s3_lease: {bucket: b, key: k, endpoint_url: 'http://minio-a:9000'}}\nstate: {store: s3, s3: {bucket: b, key: k, endpoint_url: 'http://minio-b:9000'}}\n",
		"separate files":            fmt.Sprintf("coordinate: {type: file_lease, file_lease: {path: %s/leader.lease}}\nstate: {file: {path: %s/state.json}}\n", dir, dir),
		"limits":                    "coordinate: {type: file_lease, file_lease: {ttl: 2s, renew_interval: 500ms}}\nsink: {loki: {batch: {queue_entries: 1000000, max_wait: 10ms}}}\n",
		"listen on any port":        "service: {health_addr: '127.0.0.1:0'}\n",
		"loopback login over http":  "salesforce: {login_url: 'http://127.0.0.1:8443'}\n",
	} {
		if _, _, err := config.Load(write(t, yaml)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// An explicit 0 in a list item is kept (0 is unbounded), not replaced
	// by the item's default.
	cfg, _, err := config.Load(write(t, "salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: /k}\n"+
		"sink: {loki: {url: http://loki/push}}\nsources: {eventlog_objects: {objects: [{name: A, max_catchup_records: 0}]}}\n"))
	if err != nil || cfg.Sources.EventlogObjects.Objects[0].MaxCatchupRecords != 0 {
		t.Fatalf("max_catchup_records: 0: %v %+v", err, cfg)
	}
}

// TestEveryProblemAtOnce: a value that does not decode is one problem
// among the others, not the only one reported.
func TestEveryProblemAtOnce(t *testing.T) {
	msg := problems(t, `
coordinate:
  type: s3_lease
  s3_lease: {ttl: 5x, renew_interval: 10}
sink:
  loki: {batch: {queue_entries: lots}, url: 'loki:3100'}
state:
  store: s3
servce: {}
`)
	for _, want := range []string{
		`coordinate.s3_lease.ttl: "5x" is not a duration`,
		"coordinate.s3_lease.renew_interval: 10 has no unit; write 10s",
		"sink.loki.batch.queue_entries: lots is not a whole number",
		`sink.loki.url: "loki:3100" has no scheme`,
		"servce: unknown key",
		"coordinate.s3_lease.bucket: required when coordinate.type is s3_lease",
		"state.s3.bucket: required when state.store is s3",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
}

// TestLoadIsLinear: a megabyte of unknown keys, a megabyte of keys in one
// section and 2,000 levels of nesting each load in well under the seconds
// they took when yaml.v3 compared every key with every other, viper walked
// every unknown path and every unknown key was compared with every known
// one (69s for the first before).
func TestLoadIsLinear(t *testing.T) {
	var unknown, section strings.Builder
	section.WriteString("coordinate:\n")
	for i := 0; unknown.Len() < 1<<20; i++ {
		fmt.Fprintf(&unknown, "unknown_key_%06d: value\n", i)
		fmt.Fprintf(&section, "  s3_leese_%06d: value\n", i)
	}
	var deep, flow strings.Builder
	deep.WriteString("coordinate:\n")
	for i := range 2000 {
		fmt.Fprintf(&deep, "%sk%d:\n", strings.Repeat("  ", i+1), i)
	}
	fmt.Fprintf(&deep, "%sv: 1\n", strings.Repeat("  ", 2001))
	flow.WriteString("sink: {loki: {labels: " + strings.Repeat("{a: ", 2000) + "1" + strings.Repeat("}", 2000) + "}}\n")
	for name, tc := range map[string]struct{ yaml, want string }{
		"1 MiB of unknown keys":         {unknown.String(), "unknown_key_000000: unknown key"},
		"1 MiB of unknown section keys": {section.String(), "coordinate.s3_leese_000000: unknown key"},
		"2000 levels of nesting":        {deep.String(), "coordinate.k0: unknown key"},
		"2000 levels in a map value":    {flow.String(), "sink.loki.labels.a: must be a string, not a mapping"},
	} {
		t.Run(name, func(t *testing.T) {
			path := write(t, tc.yaml)
			start, cpu := time.Now(), cpuTime(t)
			_, _, err := config.Load(path)
			took, used := time.Since(start), cpuTime(t)-cpu
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want %q, got %.300v", tc.want, err)
			}
			// The CPU time this process spent, not the wall time, which a
			// busy machine stretches. 3s is generous under -race; the
			// quadratic versions took 13 to 80 seconds.
			if used > 3*time.Second {
				t.Fatalf("Load used %s of CPU (%s wall)", used, took)
			}
			t.Logf("%d bytes in %s of CPU (%s wall)", len(tc.yaml), used, took)
		})
	}
}

// cpuTime is the CPU time this process has used.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestYAMLDocuments(t *testing.T) {
	cfg, _, err := config.Load(write(t, `
coordinate:
  type: file_lease
  file_lease:
    <<: {ttl: 12s, renew_interval: 3s, path: /from/merge}
    path: /x/leader.lease
state: {file: {path: /x/state.json}}
sink: {loki: {labels: &l {job: sf2loki}}}
telemetry: {headers: *l}
`))
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Coordinate.FileLease; l.TTL != 12*time.Second || l.RenewInterval != 3*time.Second || l.Path != "/x/leader.lease" {
		t.Fatalf("merge key: %+v", l)
	}
	if cfg.Telemetry.Headers["job"] != "sf2loki" {
		t.Fatalf("alias: %+v", cfg.Telemetry.Headers)
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"duplicate key": {"service: {}\nsink: {}\nservice: {}\n", `(file): not valid YAML: line 3: mapping key "service" already defined at line 1`},
		"alias bomb": {"a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n" +
			"d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
			"aliases expand the document too far"},
		"numeric key": {"sink: {loki: {labels: {1: x}}}\n", "sink.loki.labels.1: not an allowed label"},
	} {
		if msg := problems(t, tc.yaml); !strings.Contains(msg, tc.want) {
			t.Errorf("%s: want %q in:\n%s", name, tc.want, msg)
		}
	}
}
