package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// A key has no effect when the part of the daemon that reads it does not
// run: the settings of a coordinator or a state store that is not
// selected, of a source that is off, a basic-auth user with no token. Each
// idleRule names such a part (a section, or one key) and says when it is
// off; every key under it set to something other than its default is then
// reported, once, by the first rule that claims it (broader rules first).

// idleRule is one part of the configuration that only some settings use.
type idleRule struct {
	// path is a section or a key; under an org's salesforce or sources
	// (org true) it is relative to the org's prefix ("" or "orgs[i].").
	path string
	org  bool
	// except are keys under path that are never reported: the switch
	// that turns the part on.
	except []string
	// idle says why the part is off and how to use or drop its keys; ""
	// when it is on.
	idle func(c *Config, o orgSection) (why, fix string)
}

// idleRules are checked in order: a section's rule comes before the rules
// of its keys, so that a source that is off is reported as one warning.
var idleRules = []idleRule{
	// Coordinators and state stores that are not selected.
	coordinatorRule("file_lease"), coordinatorRule("k8s_lease"), coordinatorRule("s3_lease"), coordinatorRule("gcs_lease"),
	storeRule("file"), storeRule("s3"), storeRule("gcs"),

	// An org's connection.
	{path: "salesforce", org: true, except: []string{"auth_mode"}, idle: func(_ *Config, o orgSection) (string, string) {
		if o.sf.AuthMode != "none" {
			return "", ""
		}
		return "salesforce.auth_mode is none (no connection to Salesforce)", "set salesforce.auth_mode (jwt_bearer or client_credentials), or remove them"
	}},
	{path: "salesforce.limits", org: true, except: []string{"enabled"}, idle: func(_ *Config, o orgSection) (string, string) {
		if o.sf.Limits.Enabled {
			return "", ""
		}
		return "salesforce.limits.enabled is false", "set it to true, or remove them"
	}},
	authModeRule("jwt_bearer", "client_credentials", "username", "private_key", "private_key_file", "jwt_audience"),
	authModeRule("client_credentials", "jwt_bearer", "client_secret", "client_secret_file"),

	// Sources that are off, and settings of a "*" without one.
	sourceRule("sources.pubsub", "topics", func(s Sources) bool { return len(s.PubSub.Topics) > 0 }, "sources.pubsub.topics is empty"),
	sourceRule("sources.eventlogfile", "event_types", func(s Sources) bool { return len(s.EventLogFile.EventTypes) > 0 }, "sources.eventlogfile.event_types is empty"),
	sourceRule("sources.eventlog_objects", "objects", func(s Sources) bool { return len(s.EventlogObjects.Objects) > 0 }, "sources.eventlog_objects.objects is empty"),
	sourceRule("sources.apexlog", "enabled", func(s Sources) bool { return s.ApexLog.Enabled }, "sources.apexlog.enabled is false"),
	sourceRule("sources.synthetic", "rate", func(s Sources) bool { return s.Synthetic.Rate > 0 }, "sources.synthetic.rate is 0"),
	{path: "sources.pubsub.rediscovery_interval", org: true, idle: func(_ *Config, o orgSection) (string, string) {
		if slices.Contains(o.src.PubSub.Topics, "*") {
			return "", ""
		}
		return `sources.pubsub.topics has no "*" (it is how often "*" is listed again)`, `add "*" to topics, or remove it`
	}},
	{path: "sources.eventlogfile.exclude", org: true, idle: func(_ *Config, o orgSection) (string, string) {
		if slices.Contains(o.src.EventLogFile.EventTypes, "*") {
			return "", ""
		}
		return `sources.eventlogfile.event_types has no "*" (exclude filters the discovered types, and a type listed by name is never excluded)`,
			"remove the excluded types from event_types and the exclude key"
	}},

	// A file beside the value it holds: the value wins, the file is never
	// read (a rotated file changes nothing).
	{path: "salesforce.private_key_file", org: true, idle: func(_ *Config, o orgSection) (string, string) {
		return shadowedFile(o.sf.PrivateKey, "salesforce.private_key")
	}},
	{path: "salesforce.client_secret_file", org: true, idle: func(_ *Config, o orgSection) (string, string) {
		return shadowedFile(o.sf.ClientSecret, "salesforce.client_secret")
	}},
	{path: "sources.transform_salt_file", org: true, idle: func(_ *Config, o orgSection) (string, string) {
		return shadowedFile(o.src.TransformSalt, "sources.transform_salt")
	}},
	{path: "sink.loki.auth_token_file", idle: func(c *Config, _ orgSection) (string, string) {
		return shadowedFile(c.Sink.Loki.AuthToken, "sink.loki.auth_token")
	}},
	{path: "service.telemetry.basic_auth_token_file", idle: func(c *Config, _ orgSection) (string, string) {
		return shadowedFile(c.Service.Telemetry.BasicAuthToken, "service.telemetry.basic_auth_token")
	}},

	// The Loki client.
	{path: "sink.loki.basic_auth_user", idle: func(c *Config, _ orgSection) (string, string) {
		if l := c.Sink.Loki; l.AuthToken != "" || l.AuthTokenFile != "" {
			return "", ""
		}
		return "neither sink.loki.auth_token nor auth_token_file is set, so no basic auth is sent",
			"set sink.loki.auth_token_file to the password, or remove it"
	}},
	{path: "sink.loki.egress.budget_action", idle: func(c *Config, _ orgSection) (string, string) {
		if c.Sink.Loki.Egress.DailyByteBudget > 0 {
			return "", ""
		}
		return "sink.loki.egress.daily_byte_budget is 0 (no budget)", "set a daily_byte_budget, or remove it"
	}},

	// Telemetry that is off.
	{path: "service.telemetry", except: []string{"enabled"}, idle: func(c *Config, _ orgSection) (string, string) {
		if c.Service.Telemetry.Enabled {
			return "", ""
		}
		return "service.telemetry.enabled is false", "set service.telemetry.enabled: true to push the metrics over OTLP, or remove them"
	}},
	{path: "telemetry", except: []string{"otlp_endpoint"}, idle: func(c *Config, _ orgSection) (string, string) {
		if c.Telemetry.OTLPEndpoint != "" {
			return "", ""
		}
		return "telemetry.otlp_endpoint is blank (no trace export)", "set telemetry.otlp_endpoint, or remove them"
	}},
}

// shadowedFile is the idle reason of a *_file key when value, the key it
// stands for, is set (from the file or an SF2LOKI_* variable): the value
// is used and the file is never read.
func shadowedFile(value, key string) (why, fix string) {
	if strings.TrimSpace(value) == "" {
		return "", ""
	}
	return key + " is set too, and it is used: the file is never read (set by the file or an SF2LOKI_* variable)",
		"remove " + key + " (or its SF2LOKI_* variable) to use the file, or remove the file key"
}

func coordinatorRule(typ string) idleRule {
	return idleRule{path: "coordinate." + typ, idle: func(c *Config, _ orgSection) (string, string) {
		if c.Coordinate.Type == typ {
			return "", ""
		}
		return "coordinate.type is " + c.Coordinate.Type, "remove them, or set coordinate.type: " + typ + " to use them"
	}}
}

func storeRule(store string) idleRule {
	return idleRule{path: "state." + store, idle: func(c *Config, _ orgSection) (string, string) {
		if c.State.Store == store {
			return "", ""
		}
		return "state.store is " + c.State.Store, "remove them, or set state.store: " + store + " to use them"
	}}
}

// authModeRule: keys of salesforce that only auth_mode mode reads, idle
// under other.
func authModeRule(mode, other string, keys ...string) idleRule {
	return idleRule{path: "salesforce", org: true, except: exceptAll("salesforce", keys), idle: func(_ *Config, o orgSection) (string, string) {
		if o.sf.AuthMode != other {
			return "", ""
		}
		return "salesforce.auth_mode is " + other + " (they are " + mode + "'s)", "remove them"
	}}
}

// exceptAll lists every key of section but keys, so that a rule on section
// judges keys alone.
func exceptAll(section string, keys []string) []string {
	var out []string
	for _, f := range schema() {
		rel, ok := strings.CutPrefix(f.Path, section+".")
		if ok && !strings.Contains(rel, ".") && !slices.Contains(keys, rel) {
			out = append(out, rel)
		}
	}
	return out
}

func sourceRule(path, sw string, on func(Sources) bool, why string) idleRule {
	return idleRule{path: path, org: true, except: []string{sw}, idle: func(_ *Config, o orgSection) (string, string) {
		if on(o.src) {
			return "", ""
		}
		return why + ", so the source is off", "turn the source on with " + path + "." + sw + ", or remove them"
	}}
}

// noEffectWarnings names every key set to something other than its default
// that has no effect (see idleRules), one warning per rule and org.
func (c *Config) noEffectWarnings() []string {
	var set []string // keys as problems show them, list items as path[i].key
	c.eachLeaf(func(f Field, v reflect.Value, path string) {
		if !atDefault(f, v) {
			set = append(set, path)
		}
	})
	claimed := map[string]bool{}
	var warnings []string
	for _, r := range idleRules {
		sections := []orgSection{{}}
		if r.org {
			sections = c.orgSections()
		}
		for _, o := range sections {
			why, fix := r.idle(c, o)
			if why == "" {
				continue
			}
			base := o.prefix + r.path
			var keys []string
			for _, k := range set {
				rel, under := strings.CutPrefix(k, base+".")
				if k != base && !under || claimed[k] {
					continue
				}
				if top, _, _ := strings.Cut(rel, "."); under && slices.Contains(r.except, strings.SplitN(top, "[", 2)[0]) {
					continue
				}
				claimed[k] = true
				if j := strings.Index(k[len(base):], "["); j >= 0 {
					k = k[:len(base)+j] // a list item's keys are the list's
				}
				if !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
			if len(keys) == 0 {
				continue
			}
			if o.prefix != "" {
				at := strings.NewReplacer("salesforce.", o.prefix+"salesforce.", "sources.", o.prefix+"sources.")
				why, fix = at.Replace(why), at.Replace(fix)
			}
			verb := "are set, but have"
			if len(keys) == 1 {
				verb = "is set, but has"
				fix = strings.ReplaceAll(fix, " them", " it")
			}
			warnings = append(warnings, fmt.Sprintf("%s %s no effect: %s; %s", strings.Join(keys, ", "), verb, why, fix))
		}
	}
	return warnings
}

// atDefault reports whether v is f's default (an empty map or list for
// one that has none).
func atDefault(f Field, v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Map, reflect.Slice:
		return v.Len() == 0
	}
	d := reflect.New(v.Type()).Elem()
	if f.Default != "" {
		setDefault(d, f)
	}
	return v.Equal(d)
}
