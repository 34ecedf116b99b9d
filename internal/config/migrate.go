package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"gopkg.in/yaml.v3"
)

// Migration is what Migrate made of a file in the older layout.
type Migration struct {
	YAML     []byte    // the file in sf2loki's layout, comments kept
	Notes    []Note    // every change, and the older defaults that differ here
	Problems []Problem // keys that cannot be carried over as they are
}

// Migrate rewrites a configuration file in the older implementation's
// layout into sf2loki's (as Load reads it, see rewriteOlder), keeping its
// comments, and notes the older defaults the file relies on that differ
// here. The result is not validated: run check on it.
func Migrate(data []byte) (*Migration, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	m := &Migration{}
	if len(doc.Content) == 0 {
		return nil, errors.New("the file is empty")
	}
	m.Notes, m.Problems = rewriteOlder(&doc, len(data), os.Getenv)
	m.Notes = append(m.Notes, olderDefaults(doc.Content[0])...)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	m.YAML = b.Bytes()
	return m, nil
}

// olderDefaults notes the older implementation's defaults that differ
// here, for the keys the (rewritten) file leaves unset.
func olderDefaults(root *yaml.Node) []Note {
	var out []Note
	differs := func(path, format string, args ...any) {
		out = append(out, Note{Kind: NoteDiffers, Path: path, Text: fmt.Sprintf(format, args...)})
	}
	unset := func(m *yaml.Node, path ...string) bool {
		for _, k := range path {
			m = mapValue(m, k)
		}
		return m == nil
	}
	listed := func(m *yaml.Node, path ...string) bool {
		for _, k := range path {
			m = mapValue(m, k)
		}
		return m != nil && m.Kind == yaml.SequenceNode && len(m.Content) > 0
	}
	type org struct {
		at      string
		sf, src *yaml.Node
	}
	orgs := []org{{"", mapValue(root, "salesforce"), mapValue(root, "sources")}}
	if l := mapValue(root, "orgs"); l != nil && l.Kind == yaml.SequenceNode {
		for i, o := range l.Content {
			orgs = append(orgs, org{fmt.Sprintf("orgs[%d].", i), mapValue(o, "salesforce"), mapValue(o, "sources")})
		}
	}
	for _, o := range orgs {
		if o.sf != nil && unset(o.sf, "limits", "enabled") {
			differs(o.at+"salesforce.limits.enabled", "on by default here (one API request every 5m for the org's limits as gauges); the older default was off. Write enabled: false to keep it off")
		}
		if o.src == nil {
			continue
		}
		if listed(o.src, "eventlogfile", "event_types") {
			if unset(o.src, "eventlogfile", "settle_window") {
				differs(o.at+"sources.eventlogfile.settle_window", "5m here; the older default was 0 (an Hourly file still being written could be read)")
			}
		}
		if listed(o.src, "pubsub", "topics") && unset(o.src, "pubsub", "bridge_max_bytes") {
			differs(o.at+"sources.pubsub.bridge_max_bytes", "the realtime lane holds sink.loki.batch.queue_bytes here; the older implementation kept a separate 128 MiB bridge before its lane")
		}
		for _, s := range []string{"pubsub", "eventlogfile", "eventlog_objects", "apexlog", "synthetic"} {
			if tr := mapValue(mapValue(o.src, s), "transforms"); tr != nil {
				for i, t := range tr.Content {
					switch a := mapValue(t, "action"); {
					case a != nil && a.Value == "hash":
						differs(fmt.Sprintf("%ssources.%s.transforms[%d]", o.at, s, i), "hash is HMAC-SHA-256(transform_salt, value) here, the older one SHA-256(salt+value): every pseudonym changes at the switch (dashboards that join on them see new values)")
					case a != nil && a.Value == "mask":
						differs(fmt.Sprintf("%ssources.%s.transforms[%d]", o.at, s, i), "mask keeps an IPv6 address's /48 here (the older one wrote ***); e-mail and IPv4 are masked as before")
					}
				}
			}
		}
	}
	if l := mapValue(mapValue(root, "sink"), "loki"); l != nil && (!unset(l, "auth_token") || !unset(l, "auth_token_file")) && unset(l, "basic_auth_user") {
		if unset(l, "tenant_id") {
			differs("sink.loki.auth_token", "sent as a bearer token here; the older implementation sent it as basic auth with an empty user. "+
				"If Loki's gateway needs that, set sink.loki.basic_auth_user, or send your own sink.loki.headers.Authorization without auth_token")
		} else {
			differs("sink.loki.tenant_id", "sent as X-Scope-OrgID here as well as being the basic-auth user of the token, as before (the older implementation sent no X-Scope-OrgID with a token); "+
				"on Grafana Cloud both carry the same id")
		}
	}
	if l := mapValue(mapValue(root, "sink"), "loki"); l != nil && unset(l, "batch", "queue_bytes") {
		differs("sink.loki.batch.queue_bytes", "64 MiB a lane here; the older default was 256 MiB, and lanes of 256 MiB need a container of about 1.4 GiB (docs/operations.md, Memory)")
	}
	return out
}
