package config_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/sf2loki/sf2loki/internal/config"
)

// compiledSchema compiles config.JSONSchema with a JSON Schema validator
// (which also checks it against the draft 2020-12 meta-schema).
func compiledSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(config.JSONSchema()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("sf2loki.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("sf2loki.schema.json")
	if err != nil {
		t.Fatalf("the schema does not compile: %v", err)
	}
	return sch
}

// validateYAML validates a YAML configuration, read as the loader reads
// it, against the schema.
func validateYAML(t *testing.T, sch *jsonschema.Schema, src string) error {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(src), &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return sch.Validate(inst)
}

func readRepo(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// shippedConfigs returns the configurations the repository ships, by
// name: the example, the Kubernetes manifests' one, the Helm chart's
// values (config:), and every YAML block of the documentation whose keys
// are configuration sections; plus this package's two-org fixture.
func shippedConfigs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{
		"configs/sf2loki.example.yaml": readRepo(t, "configs/sf2loki.example.yaml"),
		"twoOrgs":                      twoOrgs,
	}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal([]byte(readRepo(t, "deploy/kubernetes/configmap.yaml")), &cm); err != nil || cm.Data["config.yaml"] == "" {
		t.Fatalf("deploy/kubernetes/configmap.yaml: %v", err)
	}
	out["deploy/kubernetes/configmap.yaml"] = cm.Data["config.yaml"]
	values, _ := filepath.Glob("../../deploy/helm/sf2loki/ci/*.yaml")
	for _, f := range append(values, "../../deploy/helm/sf2loki/values.yaml") {
		var v struct {
			Config any `yaml:"config"`
		}
		rel := strings.TrimPrefix(f, "../../")
		if err := yaml.Unmarshal([]byte(readRepo(t, rel)), &v); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if v.Config != nil {
			b, err := yaml.Marshal(v.Config)
			if err != nil {
				t.Fatal(err)
			}
			out[rel] = string(b)
		}
	}
	sections := map[string]bool{}
	for _, f := range config.Schema() {
		if f.Depth == 0 {
			sections[f.Path] = true
		}
	}
	docs, _ := filepath.Glob("../../docs/*.md")
	block := regexp.MustCompile("(?s)```yaml\n(.*?)```")
	for _, f := range append(docs, "../../README.md") {
		rel := strings.TrimPrefix(f, "../../")
		for i, m := range block.FindAllStringSubmatch(readRepo(t, rel), -1) {
			var top map[string]any
			if yaml.Unmarshal([]byte(m[1]), &top) != nil || len(top) == 0 {
				continue
			}
			isConfig := true
			for k := range top {
				isConfig = isConfig && sections[k]
			}
			if isConfig {
				out[rel+"#"+string(rune('1'+i))] = m[1]
			}
		}
	}
	return out
}

// The configurations the repository ships validate against the schema
// (the ones that are whole also load).
func TestJSONSchemaAcceptsShippedConfigurations(t *testing.T) {
	sch := compiledSchema(t)
	configs := shippedConfigs(t)
	for _, must := range []string{"configs/sf2loki.example.yaml", "deploy/kubernetes/configmap.yaml",
		"deploy/helm/sf2loki/ci/multi-org-values.yaml", "docs/config-reference.md#1", "README.md#1"} {
		if configs[must] == "" {
			t.Errorf("no configuration found in %s", must)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(configs)) {
		if err := validateYAML(t, sch, configs[name]); err != nil {
			t.Errorf("%s does not validate: %v", name, err)
		}
	}
	for _, name := range []string{"configs/sf2loki.example.yaml", "deploy/kubernetes/configmap.yaml", "twoOrgs"} {
		if _, _, err := config.Load(write(t, configs[name])); err != nil {
			t.Errorf("%s does not load: %v", name, err)
		}
	}
}

// Each configuration here loads, and the schema accepts it: the value
// forms the loader accepts, in their own YAML type.
func TestJSONSchemaAcceptsWhatLoads(t *testing.T) {
	sch := compiledSchema(t)
	t.Setenv("LOKI_URL", "http://loki:3100/loki/api/v1/push")
	t.Setenv("LOKI_TIMEOUT", "10s")
	const sf = "salesforce: {auth_mode: client_credentials, client_id: a, client_secret: b, login_url: \"https://a.my.salesforce.com\"}"
	const sink = "\nsink: {loki: {url: http://loki:3100/loki/api/v1/push}}"
	for _, y := range []string{
		"",
		"sink:\ntelemetry:\norgs:\n",
		"state: {commit_interval: 0}",
		"state: {commit_interval: 0.0}",
		"state: {commit_interval: 0s}",
		"state: {commit_interval: 1m30s}",
		"service: {stall_timeout: 0}",
		"coordinate: {file_lease: {ttl: 1h30m, renew_interval: 1.5s}}",
		"coordinate: {file_lease: {ttl: +45s}}",
		"sink: {loki: {batch: {max_wait: 250ms}, timeout: 1m}}",
		"sink: {loki: {url: \"${LOKI_URL}\", timeout: \"${LOKI_TIMEOUT}\"}}",
		"sink: {loki: {url: \"http://[::1]:3100/loki/api/v1/push\", tenant_id: \"12345\", labels: {job: sf2loki}}}",
		"sink: {loki: {url: \"HTTPS://user:pw@loki.example.com\"}}",
		"sink: {loki: {egress: {daily_byte_budget: 1099511627776000, max_lines_per_second: 1e3}}}",
		sf + sink + "\nsources: {pubsub: {endpoint: \"[::1]:7443\", plaintext: true, topics: [/event/LoginEventStream], sample: {\"*\": 0.5}}}",
		sf + sink + "\nsources: {eventlog_objects: {objects: [{name: LoginHistory, settle: 0, big_object: \"false\"}]}}",
		"sources: {synthetic: {rate: 10, transforms: [{action: hash, fields: [USER_ID]}, {action: drop_row, match: {TYPE: x}}]}}" + sink,
		"orgs: [{name: a, salesforce: null, sources: null}, {name: b, " + sf + ", sources: {eventlogfile: {event_types: [\"*\"], " +
			"transforms: [{action: mask, fields: [\"*_IP\"]}]}}}]" + sink,
		"service: {health_addr: \"127.0.0.1:0\"}\ntelemetry: {headers: {authorization: Bearer x}}",
	} {
		if _, _, err := config.Load(write(t, y)); err != nil {
			t.Errorf("%q does not load: %v", y, err)
		}
		if err := validateYAML(t, sch, y); err != nil {
			t.Errorf("%q does not validate: %v", y, err)
		}
	}
}

// What the schema refuses, the loader refuses too: an unknown key at any
// level (list items and the orgs entries' shared sections included), a
// value outside its enumeration, a value of the wrong type, a whole number
// out of range, a duration without a unit.
func TestJSONSchemaRefusesWhatDoesNotLoad(t *testing.T) {
	sch := compiledSchema(t)
	for name, y := range map[string]string{
		"unknown top-level key":          "sinks: {}",
		"unknown key":                    "sink: {loki: {urls: http://loki}}",
		"unknown key in an inline lease": "coordinate: {s3_lease: {bucket: b, ttl: 30s, tll: 1m}}",
		"unknown key in an org":          "orgs: [{name: a, salesforce: {auth_mode: none, secret: x}}]",
		"unknown key in an org item":     "orgs: [{name: a, sorces: {}}]",
		"unknown key in a transform":     "sources: {synthetic: {transforms: [{action: hash, field: [X]}]}}",
		"unknown key in an object":       "sources: {eventlog_objects: {objects: [{name: LoginHistory, interval: 5m}]}}",
		"bad enum value":                 "coordinate: {type: etcd_lease}",
		"bad enum value in an org":       "orgs: [{name: a, salesforce: {auth_mode: password}}]",
		"bad enum value in a transform":  "sources: {synthetic: {transforms: [{action: encrypt}]}}",
		"wrong type: text for a number":  "sink: {loki: {batch: {max_entries: lots}}}",
		"wrong type: list for text":      "sink: {loki: {url: [http://loki]}}",
		"wrong type: mapping for a list": "sources: {pubsub: {topics: {a: b}}}",
		"wrong type: text for a boolean": "sources: {pubsub: {plaintext: maybe}}",
		"wrong type: list for a section": "state: [file]",
		"wrong type: text for a map":     "sink: {loki: {labels: job}}",
		"wrong type: a list item":        "orgs: [prod]",
		"integer above its maximum":      "sink: {loki: {max_in_flight: 65}}",
		"integer below its minimum":      "sink: {loki: {batch: {max_entries: 0}}}",
		"integer out of range in an org": "orgs: [{name: a, sources: {eventlogfile: {concurrency: 17}}}]",
		"a fraction for an integer":      "sink: {loki: {max_in_flight: 1.5}}",
		"a duration without a unit":      "coordinate: {file_lease: {ttl: 30}}",
		"a duration as bare text":        "coordinate: {file_lease: {ttl: \"30\"}}",
		"a duration with a bad unit":     "sources: {eventlogfile: {lookback: 2y}}",
		"a URL without a scheme":         "sink: {loki: {url: loki:3100/loki/api/v1/push}}",
		"an address without a port":      "service: {health_addr: localhost}",
	} {
		if err := validateYAML(t, sch, y); err == nil {
			t.Errorf("%s: the schema accepts %q", name, y)
		}
		if _, _, err := config.Load(write(t, y)); err == nil {
			t.Errorf("%s: the loader accepts %q (the schema must not be stricter)", name, y)
		}
	}
}

// The duration pattern is ParseDuration's syntax (without a sign: every
// duration key has a minimum of 0 or more).
func TestJSONSchemaDurationPatternIsGoSyntax(t *testing.T) {
	var s struct {
		Properties struct {
			Coordinate struct {
				Properties struct {
					FileLease struct {
						Properties struct {
							TTL struct {
								Pattern string `json:"pattern"`
							} `json:"ttl"`
						} `json:"properties"`
					} `json:"file_lease"`
				} `json:"properties"`
			} `json:"coordinate"`
		} `json:"properties"`
	}
	if err := json.Unmarshal([]byte(config.JSONSchema()), &s); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(s.Properties.Coordinate.Properties.FileLease.Properties.TTL.Pattern)
	for _, d := range []string{"0", "+0", "30s", "1h30m", "1h0m0s", "500ms", "1.5h", ".5s", "5.s", "100ns", "3us", "3µs", "3μs",
		"2h45m30.5s", "1m1m", "", "30", "0s0", "1d", "1w", "1.5d", "1d12h", "d", "1 d", "1D", "1 h", " 1s", "1s ", "1H", "s", ".s", "1.5", "-5s", "+-5s", "1e3s", "0x10s"} {
		_, err := config.ParseDuration(d)
		want := err == nil && !strings.HasPrefix(d, "-")
		if got := re.MatchString(d); got != want {
			t.Errorf("%q: the pattern matches %v, ParseDuration accepts %v", d, got, want)
		}
	}
	if !re.MatchString("${TTL}") {
		t.Error("a ${NAME} placeholder does not match")
	}
}
