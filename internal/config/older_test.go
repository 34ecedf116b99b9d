package config_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sf2loki/sf2loki/internal/config"
)

// olderEnv provides what the older-layout files under testdata/older
// reference: ${SECRETS} (a key and secret files) and ${STATE_DIR}.
func olderEnv(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	files := map[string][]byte{"server.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})}
	for _, f := range []string{"transform-salt", "loki-token", "otlp-token", "client-secret"} {
		files[f] = []byte("s3cret-" + f + "\n")
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("SECRETS", dir)
	t.Setenv("STATE_DIR", dir)
}

func hasWarning(ws []string, parts ...string) bool {
	return slices.ContainsFunc(ws, func(w string) bool {
		for _, p := range parts {
			if !strings.Contains(w, p) {
				return false
			}
		}
		return true
	})
}

// TestOlderSingleOrgFileLoads loads a full single-org file in the older
// layout (every key of its key tables): it passes, each older spelling
// gives one WARN naming ours, and every value lands where it means the
// same.
func TestOlderSingleOrgFileLoads(t *testing.T) {
	olderEnv(t)
	cfg, warnings, err := config.Load("testdata/older/single-org.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range [][]string{
		{"sink.loki.batch.queue_maxsize", "sink.loki.batch.queue_entries", "rename it"},
		{"sink.loki.batch.queue_max_bytes", "sink.loki.batch.queue_bytes"},
		{"sink.loki.batch.flush_interval", "sink.loki.batch.max_wait"},
		{"sink.loki.batch.max_line_bytes", "sink.loki.max_line_bytes"},
		{"sources.pubsub.default_num_requested", "sources.pubsub.num_requested"},
		{"sources.pubsub.enabled", "removed"},
		{"sources.eventlogfile.enabled", "removed"},
		{"sources.eventlog_objects.enabled", "removed"},
		{"sources.eventlogfile.event_types[1].sample", "sources.eventlogfile.sample"},
		{"sources.eventlogfile.event_types[1].labels", "sources.eventlogfile.types"},
		{"sources.eventlogfile.page_size", "nextRecordsUrl"},
		{"sources.eventlogfile.download_max_age", "retried"},
		{"sink.type", "removed"},
		{"service.log_level", `"info"`},
	} {
		if !hasWarning(warnings, w...) {
			t.Errorf("no WARN holding %q in:\n%s", w, strings.Join(warnings, "\n"))
		}
	}
	for _, w := range warnings {
		if strings.Count(w, "sink.loki.batch.queue_maxsize") > 0 && strings.Count(strings.Join(warnings, "\n"), "queue_maxsize") != 1 {
			t.Errorf("more than one WARN for queue_maxsize: %v", warnings)
		}
	}
	src, sink := cfg.Sources, cfg.Sink.Loki
	checks := []struct {
		name      string
		got, want any
	}{
		{"num_requested", src.PubSub.NumRequested, 50},
		{"queue_entries", sink.Batch.QueueEntries, 10000},
		{"queue_bytes", sink.Batch.QueueBytes, 268435456},
		{"max_wait", sink.Batch.MaxWait, time.Second},
		{"max_line_bytes", sink.MaxLineBytes, 262144},
		{"event_types", strings.Join(src.EventLogFile.EventTypes, ","), "Report,ReportExport"},
		{"elf sample", src.EventLogFile.Sample["ReportExport"], 0.5},
		{"elf lookback 1w", src.EventLogFile.Lookback, 7 * 24 * time.Hour},
		{"object lookback 1d", src.EventlogObjects.Objects[0].Lookback, 24 * time.Hour},
		{"object big_object false", src.EventlogObjects.Objects[0].BigObject, "false"},
		{"object sample 1 dropped", len(src.EventlogObjects.Sample), 0},
		{"apexlog on", src.ApexLog.Enabled, true},
		{"compression", sink.Compression, "snappy"},
		{"unready_after_sink_failing", cfg.Service.UnreadyAfterSinkFailing, 15 * time.Minute},
		{"log_level", cfg.Service.LogLevel, "info"},
		{"topics", len(src.PubSub.Topics), 2},
		// The streams continue: the older implementation's own labels.
		{"job label", sink.Labels["job"], "sf2loki"},
		{"service_name label", sink.Labels["service_name"], "sf2loki"},
		{"environment label (the file's own wins)", sink.Labels["environment"], "prod"},
		{"sf_org_id label", sink.Labels["sf_org_id"], "00D5g000000ABCDEAA"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	if ty := src.EventLogFile.Types; len(ty) != 1 || ty[0].Name != "ReportExport" ||
		!slices.Equal(ty[0].StructuredMetadataFields, []string{"REPORT_ID"}) || !slices.Equal(ty[0].Labels, []string{"DELEGATED_USER"}) {
		t.Errorf("types %+v, want ReportExport with REPORT_ID metadata and the DELEGATED_USER label", ty)
	}
}

// TestOlderMultiOrgFileLoads loads a full multi-org file in the older
// layout: the orgs, each org's enabled flags, the shared sections.
func TestOlderMultiOrgFileLoads(t *testing.T) {
	olderEnv(t)
	cfg, warnings, err := config.Load("testdata/older/multi-org.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Orgs) != 2 {
		t.Fatalf("%d orgs, want 2", len(cfg.Orgs))
	}
	prod, sandbox := cfg.Orgs[0].Sources, cfg.Orgs[1].Sources
	if len(prod.EventlogObjects.Objects) != 0 || !hasWarning(warnings, "orgs[0].sources.eventlog_objects.enabled", "off") {
		t.Errorf("enabled: false kept %d objects (warnings %v)", len(prod.EventlogObjects.Objects), warnings)
	}
	if !slices.Equal(prod.EventLogFile.Exclude, []string{"Login", "ApexCallout"}) || prod.PubSub.NumRequested != 100 {
		t.Errorf("prod: exclude %v, num_requested %d", prod.EventLogFile.Exclude, prod.PubSub.NumRequested)
	}
	if len(sandbox.PubSub.Topics) != 0 || sandbox.EventLogFile.Sample["API"] != 0.1 || sandbox.ApexLog.Sample["ApexLog"] != 0.5 {
		t.Errorf("sandbox: topics %v, samples %v %v", sandbox.PubSub.Topics, sandbox.EventLogFile.Sample, sandbox.ApexLog.Sample)
	}
	if cfg.Service.LogLevel != "warn" || cfg.Service.LogFormat != "text" || cfg.Service.UnreadyAfterSinkFailing != 0 {
		t.Errorf("service %+v", cfg.Service)
	}
	if l := cfg.Sink.Loki.Labels; l["job"] != "sf2loki" || l["service_name"] != "sf2loki" || l["environment"] != "shared" || l["sf_org_id"] != "" {
		t.Errorf("labels %v: want job and service_name added (sf2loki labels each org itself)", l)
	}
	if cfg.Sink.Loki.Batch.MaxWait != 2*time.Second || cfg.Sink.Loki.Batch.QueueEntries != 20000 || cfg.Sink.Loki.Compression != "gzip" {
		t.Errorf("sink %+v", cfg.Sink.Loki.Batch)
	}
}

// TestMigratedOlderFilesPassCheckWithoutWarnings: what config migrate
// prints loads with no warning at all and means what the older file meant.
func TestMigratedOlderFilesPassCheckWithoutWarnings(t *testing.T) {
	olderEnv(t)
	for _, f := range []string{"single-org.yaml", "multi-org.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata/older", f))
		if err != nil {
			t.Fatal(err)
		}
		m, err := config.Migrate(data)
		if err != nil || len(m.Problems) > 0 {
			t.Fatalf("%s: %v %v", f, err, m.Problems)
		}
		if !strings.Contains(string(m.YAML), "# A full ") {
			t.Errorf("%s: the file's comments were not kept", f)
		}
		cfg, warnings, err := config.Load(write(t, string(m.YAML)))
		if err != nil {
			t.Fatalf("%s migrated: %v\n%s", f, err, m.YAML)
		}
		if len(warnings) > 0 {
			t.Errorf("%s migrated: warnings %v", f, warnings)
		}
		old, _, err := config.Load(filepath.Join("testdata/older", f))
		if err != nil {
			t.Fatal(err)
		}
		// Same meaning: the effective configurations are the same.
		if a, b := docString(t, old), docString(t, cfg); a != b {
			t.Errorf("%s: the migrated file means something else than the older one", f)
		}
	}
}

func docString(t *testing.T, c *config.Config) string {
	t.Helper()
	b, err := yaml.Marshal(c.Document())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOlderSpellings covers each alias, flag and value the older layout
// writes differently, one at a time.
func TestOlderSpellings(t *testing.T) {
	t.Setenv("SF2LOKI_SINK__LOKI__URL", "http://loki:3100/loki/api/v1/push")
	base := "salesforce: {auth_mode: client_credentials, login_url: https://acme.my.salesforce.com, client_id: ck, client_secret: s3cret}\n"
	for name, tc := range map[string]struct {
		yaml  string
		warn  string
		check func(*config.Config) bool
	}{
		"default_num_requested": {"sources: {pubsub: {topics: [/event/LoginEventStream], default_num_requested: 7}}", "sources.pubsub.num_requested",
			func(c *config.Config) bool { return c.Sources.PubSub.NumRequested == 7 }},
		"queue_maxsize": {"sink: {loki: {batch: {queue_maxsize: 500}}}", "queue_entries", func(c *config.Config) bool { return c.Sink.Loki.Batch.QueueEntries == 500 }},
		"queue_max_bytes": {"sink: {loki: {batch: {queue_max_bytes: 1048576}}}", "queue_bytes",
			func(c *config.Config) bool { return c.Sink.Loki.Batch.QueueBytes == 1048576 }},
		"flush_interval": {"sink: {loki: {batch: {flush_interval: 3s}}}", "max_wait", func(c *config.Config) bool { return c.Sink.Loki.Batch.MaxWait == 3*time.Second }},
		"max_line_bytes": {"sink: {loki: {batch: {max_line_bytes: 1000}}}", "sink.loki.max_line_bytes",
			func(c *config.Config) bool { return c.Sink.Loki.MaxLineBytes == 1000 }},
		"pubsub enabled false": {"sources: {pubsub: {enabled: false, topics: [/event/LoginEventStream]}}", "the source is off",
			func(c *config.Config) bool { return len(c.Sources.PubSub.Topics) == 0 }},
		"eventlogfile enabled true": {"sources: {eventlogfile: {enabled: true, event_types: [API]}}", "removed",
			func(c *config.Config) bool { return slices.Equal(c.Sources.EventLogFile.EventTypes, []string{"API"}) }},
		"eventlogfile off without enabled in an older file": {"sources: {pubsub: {enabled: true}, eventlogfile: {event_types: [API]}}", "ran it only with enabled: true",
			func(c *config.Config) bool { return len(c.Sources.EventLogFile.EventTypes) == 0 }},
		"object sample": {"sources: {eventlog_objects: {objects: [{name: LoginHistory, timestamp_field: LoginTime, sample: 0.2}]}}", "sources.eventlog_objects.sample",
			func(c *config.Config) bool { return c.Sources.EventlogObjects.Sample["LoginHistory"] == 0.2 }},
		"apexlog sample": {"sources: {apexlog: {enabled: true, sample: 0.3}}", "{ApexLog: 0.3}",
			func(c *config.Config) bool { return c.Sources.ApexLog.Sample["ApexLog"] == 0.3 }},
		"event type object": {"sources: {eventlogfile: {enabled: true, event_types: [{name: API, labels: [USER_TYPE]}]}}", "types",
			func(c *config.Config) bool {
				return slices.Equal(c.Sources.EventLogFile.EventTypes, []string{"API"}) && c.Sources.EventLogFile.Types[0].Labels[0] == "USER_TYPE"
			}},
		"sink.type":          {"sink: {type: loki}", "sink.type", func(*config.Config) bool { return true }},
		"log_level critical": {"service: {log_level: CRITICAL}", `"error"`, func(c *config.Config) bool { return c.Service.LogLevel == "error" }},
		"log_format logfmt":  {"service: {log_format: logfmt}", "text", func(c *config.Config) bool { return c.Service.LogFormat == "text" }},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, warnings, err := config.Load(write(t, base+tc.yaml+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			if !hasWarning(warnings, tc.warn) {
				t.Errorf("no WARN naming %q: %v", tc.warn, warnings)
			}
			if !tc.check(cfg) {
				t.Errorf("the value was not read as the older implementation meant it")
			}
		})
	}
}

// TestOlderSpellingsRefused: where the older spelling cannot mean the same
// here, the file is refused with the difference explained.
func TestOlderSpellingsRefused(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"both spellings": {"sink: {loki: {url: http://l/loki/api/v1/push, batch: {queue_maxsize: 5, queue_entries: 6}}}",
			"sink.loki.batch.queue_maxsize: the older spelling of sink.loki.batch.queue_entries, which is set too"},
		"another sink type": {"sink: {type: kafka, loki: {url: http://l/loki/api/v1/push}}", "sink.type: only loki is a sink"},
		"another timestamp column": {"sources: {eventlogfile: {enabled: true, event_types: [API], timestamp_column: TIMESTAMP}}",
			"sources.eventlogfile.timestamp_column: TIMESTAMP is not read here"},
		"two samples for one type": {"sources: {eventlogfile: {event_types: [{name: API, sample: 0.5}], sample: {API: 0.2}}}",
			"API is also sampled at 0.2"},
		"not a bool":     {"sources: {pubsub: {enabled: maybe}}", `sources.pubsub.enabled: "maybe" is not true or false`},
		"reserved label": {"sources: {eventlogfile: {event_types: [{name: API, labels: [source]}]}}", "source is a label sf2loki sets itself"},
		"dropped label": {"sources: {eventlogfile: {event_types: [{name: API, labels: [USER_TYPE]}], transforms: [{action: drop_field, fields: [USER_TYPE]}]}}",
			"a drop_field transform of sources.eventlogfile removes USER_TYPE"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := problems(t, tc.yaml+"\n"); !strings.Contains(got, tc.want) {
				t.Errorf("want %q in:\n%s", tc.want, got)
			}
		})
	}
}

func TestParseDurationDaysAndWeeks(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"1d": 24 * time.Hour, "1w": 7 * 24 * time.Hour, "1.5d": 36 * time.Hour, "1d12h": 36 * time.Hour, "2w1d": 15 * 24 * time.Hour,
		"-1d": -24 * time.Hour, "30s": 30 * time.Second, "1h30m": 90 * time.Minute, "0": 0,
	} {
		if got, err := config.ParseDuration(in); err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"d", "1 d", "1D", "1dd", "1x", "", ".d", "1d-2h", "99999999999w"} {
		if _, err := config.ParseDuration(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

// The older spellings work in SF2LOKI_ variables too.
func TestOlderSpellingsInTheEnvironment(t *testing.T) {
	t.Setenv("SF2LOKI_SINK__LOKI__URL", "http://loki:3100/loki/api/v1/push")
	t.Setenv("SF2LOKI_SINK__LOKI__BATCH__QUEUE_MAXSIZE", "700")
	t.Setenv("SF2LOKI_SINK__LOKI__BATCH__FLUSH_INTERVAL", "2s")
	t.Setenv("SF2LOKI_SOURCES__PUBSUB__ENABLED", "false")
	t.Setenv("SF2LOKI_SINK__TYPE", "loki")
	cfg, warnings, err := config.Load(write(t, "salesforce: {auth_mode: client_credentials, login_url: https://acme.my.salesforce.com, client_id: ck, client_secret: s}\n"+
		"sources: {pubsub: {topics: [/event/LoginEventStream]}}\nsink: {loki: {batch: {queue_entries: 5}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b := cfg.Sink.Loki.Batch; b.QueueEntries != 700 || b.MaxWait != 2*time.Second || len(cfg.Sources.PubSub.Topics) != 0 {
		t.Errorf("queue_entries %d (the environment beats the file), max_wait %s, topics %v", b.QueueEntries, b.MaxWait, cfg.Sources.PubSub.Topics)
	}
	for _, w := range []string{"SF2LOKI_SINK__LOKI__BATCH__QUEUE_ENTRIES", "SF2LOKI_SINK__LOKI__BATCH__MAX_WAIT", "SF2LOKI_SOURCES__PUBSUB__ENABLED=false", "SF2LOKI_SINK__TYPE"} {
		if !hasWarning(warnings, w) {
			t.Errorf("no WARN naming %s: %v", w, warnings)
		}
	}
	t.Setenv("SF2LOKI_SINK__LOKI__BATCH__QUEUE_ENTRIES", "800")
	if got := problems(t, "sink: {loki: {url: http://l/loki/api/v1/push}}\n"); !strings.Contains(got, "SF2LOKI_SINK__LOKI__BATCH__QUEUE_MAXSIZE: the older spelling of SF2LOKI_SINK__LOKI__BATCH__QUEUE_ENTRIES, which is set too") {
		t.Errorf("both spellings set: %s", got)
	}
}
