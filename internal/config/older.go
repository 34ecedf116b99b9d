package config

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// The older implementation's configuration layout (docs/migrating.md) is
// read as it is: before anything else looks at a file, rewriteOlder turns
// its spellings into ours in the parsed YAML tree, noting each change. Load
// logs every note as a WARN naming the new spelling; `sf2loki config
// migrate` prints the rewritten tree (comments kept) and the notes as its
// report. Where a key would mean something different here, it is refused
// with the difference explained, never read silently another way.

// Note kinds.
const (
	NoteRenamed   = "renamed"   // the same setting under our spelling
	NoteConverted = "converted" // the same setting in another shape
	NoteDropped   = "dropped"   // not needed here (the note says why)
	NoteDiffers   = "differs"   // read as written, but behaves differently
)

// Note is one change rewriteOlder made, or one difference it found.
type Note struct {
	Kind string
	Path string // the older key's path
	Text string
}

func (n Note) String() string { return n.Path + ": " + n.Text }

// olderRewrite collects the notes and problems of one rewrite.
type olderRewrite struct {
	notes      []Note
	problems   []Problem
	older      bool // a spelling only the older layout has was found
	getenv     func(string) string
	sawEnabled map[string]bool // sections that had an enabled flag
	sections   []olderSection  // the sources sections, in file order
}

type olderSection struct {
	at  string
	src *yaml.Node
}

// note records a rewrite of a spelling only the older layout has: the file
// is in the older layout.
func (r *olderRewrite) note(kind, path, format string, args ...any) {
	r.older = true
	r.hint(kind, path, format, args...)
}

// hint records a note that says nothing about the layout (a value sf2loki
// reads another way, a consequence of the older layout).
func (r *olderRewrite) hint(kind, path, format string, args ...any) {
	r.notes = append(r.notes, Note{Kind: kind, Path: path, Text: fmt.Sprintf(format, args...)})
}

func (r *olderRewrite) refuse(path, format string, args ...any) {
	r.problems = append(r.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// rewriteOlder rewrites the older layout's spellings in doc (a parsed
// document of size bytes) into ours. getenv reads the environment: an
// older source's enabled flag may come from SF2LOKI_SOURCES__<S>__ENABLED,
// and a ${VAR} in a value the rewrite reads is expanded first, as the older
// implementation did.
func rewriteOlder(doc *yaml.Node, size int, getenv func(string) string) ([]Note, []Problem) {
	root := doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil, nil
		}
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, nil
	}
	// Every place is rewritten on its own: an alias or a merge key (<<)
	// shares a node between places, so each becomes a copy first.
	budget := 4*size + 100_000
	if err := unshare(root, &budget); err != nil {
		return nil, []Problem{{Path: "(file)", Message: err.Error()}}
	}
	r := &olderRewrite{sawEnabled: map[string]bool{}, getenv: getenv}
	r.sink(root)
	r.service(root)
	if src := mapValue(root, "sources"); src != nil {
		r.sources(src, "sources")
	}
	if orgs := mapValue(root, "orgs"); orgs != nil && orgs.Kind == yaml.SequenceNode {
		for i, org := range orgs.Content {
			if src := mapValue(org, "sources"); src != nil {
				r.sources(src, fmt.Sprintf("orgs[%d].sources", i))
			}
		}
	}
	// Only a file that shows the older layout by a spelling sf2loki's
	// layout never has can have meant the older defaults.
	if r.older {
		for _, s := range r.sections {
			r.offByDefault(s.src, s.at)
			r.hourly(s.src, s.at)
		}
		r.deploymentLabels(root)
	}
	return r.notes, r.problems
}

func (r *olderRewrite) sink(root *yaml.Node) {
	sink := mapValue(root, "sink")
	if sink == nil {
		return
	}
	if t := mapValue(sink, "type"); t != nil {
		if t.Kind != yaml.ScalarNode || t.Value != "loki" {
			r.refuse("sink.type", "only loki is a sink; remove sink.type")
			return
		}
		mapDelete(sink, "type")
		r.note(NoteDropped, "sink.type", "removed: Loki is the only sink, configured under sink.loki")
	}
	loki := mapValue(sink, "loki")
	batch := mapValue(loki, "batch")
	for _, rn := range [][2]string{{"queue_maxsize", "queue_entries"}, {"queue_max_bytes", "queue_bytes"}, {"flush_interval", "max_wait"}} {
		r.rename(batch, "sink.loki.batch", rn[0], batch, "sink.loki.batch", rn[1])
	}
	r.rename(batch, "sink.loki.batch", "max_line_bytes", loki, "sink.loki", "max_line_bytes")
}

func (r *olderRewrite) service(root *yaml.Node) {
	svc := mapValue(root, "service")
	if svc == nil {
		return
	}
	if lv := mapValue(svc, "log_level"); lv != nil && lv.Kind == yaml.ScalarNode {
		want := strings.ToLower(r.expand(lv.Value))
		switch want {
		case "warning":
			want = "warn"
		case "critical":
			want = "error"
		case "debug", "info", "warn", "error":
		default:
			want = lv.Value // not a level (or an unset ${VAR}): the loader says so
		}
		if want != lv.Value {
			r.hint(NoteConverted, "service.log_level", "%q is read as %q; write %s", lv.Value, want, want)
			lv.Value = want
		}
	}
	if lf := mapValue(svc, "log_format"); lf != nil && lf.Kind == yaml.ScalarNode && lf.Value == "logfmt" {
		lf.Value = "text"
		r.hint(NoteConverted, "service.log_format", "logfmt is read as text (key=value lines); write text")
	}
}

// sources rewrites one sources section (the top-level one or an org's).
func (r *olderRewrite) sources(src *yaml.Node, at string) {
	r.sections = append(r.sections, olderSection{at, src})
	if ps := mapValue(src, "pubsub"); ps != nil {
		r.rename(ps, at+".pubsub", "default_num_requested", ps, at+".pubsub", "num_requested")
		r.enabled(ps, at+".pubsub", "topics")
	}
	if objs := mapValue(src, "eventlog_objects"); objs != nil {
		r.enabled(objs, at+".eventlog_objects", "objects")
		r.objectSamples(objs, at+".eventlog_objects")
	}
	if elf := mapValue(src, "eventlogfile"); elf != nil {
		r.enabled(elf, at+".eventlogfile", "event_types")
		r.eventTypes(elf, at+".eventlogfile")
		r.elfKeys(elf, at+".eventlogfile")
	}
	if apex := mapValue(src, "apexlog"); apex != nil {
		if s := mapValue(apex, "sample"); s != nil && s.Kind == yaml.ScalarNode {
			mapDelete(apex, "sample")
			r.addSample(apex, at+".apexlog", "ApexLog", s, at+".apexlog.sample")
		}
	}
}

// offByDefault turns off, in a file that shows the older layout, the
// sources the older implementation left off unless enabled: true said
// otherwise (eventlogfile, eventlog_objects): here a source runs when it
// lists something, so the list is emptied.
func (r *olderRewrite) offByDefault(src *yaml.Node, at string) {
	for _, s := range [][2]string{{"eventlogfile", "event_types"}, {"eventlog_objects", "objects"}} {
		sec := mapValue(src, s[0])
		if l := mapValue(sec, s[1]); l != nil && len(l.Content) > 0 && !r.sawEnabled[at+"."+s[0]] {
			mapSet(sec, s[1], &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle})
			r.hint(NoteConverted, at+"."+s[0], "off, as in the older implementation, which ran it only with enabled: true (not set here): %s is emptied. To run it, write enabled: true", s[1])
		}
	}
}

// hourly pins, in a file that shows the older layout, the older
// implementation's EventLogFile interval (Hourly) where the file relies on
// it: the positions it committed are those of Hourly files, and auto could
// read some types in Daily files instead.
func (r *olderRewrite) hourly(src *yaml.Node, at string) {
	elf := mapValue(src, "eventlogfile")
	if l := mapValue(elf, "event_types"); l == nil || len(l.Content) == 0 || mapValue(elf, "interval") != nil {
		return
	}
	mapSet(elf, "interval", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "Hourly"})
	r.hint(NoteConverted, at+".eventlogfile.interval", "Hourly, the older implementation's default, written out: sf2loki's default is auto (Hourly files where the org publishes them, else Daily)")
}

// deploymentLabels adds to sink.loki.labels, in a file that shows the older
// layout, the labels the older implementation set on every stream itself,
// so that its streams continue: job and service_name sf2loki, and with one
// org its environment and, when salesforce.org_id is set, sf_org_id (with
// orgs, sf2loki sets environment, org and sf_org_id per org itself).
func (r *olderRewrite) deploymentLabels(root *yaml.Node) {
	sink := mapValue(root, "sink")
	if sink == nil {
		sink = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		mapSet(root, "sink", sink)
	}
	loki := mapValue(sink, "loki")
	if loki == nil {
		loki = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		mapSet(sink, "loki", loki)
	}
	if sink.Kind != yaml.MappingNode || loki.Kind != yaml.MappingNode {
		return
	}
	labels := mapValue(loki, "labels")
	if labels == nil {
		labels = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle}
		mapSet(loki, "labels", labels)
	}
	if labels.Kind != yaml.MappingNode {
		return
	}
	add := [][2]string{{"job", "sf2loki"}, {"service_name", "sf2loki"}}
	if mapValue(root, "orgs") != nil && mapValue(labels, "environment") != nil {
		r.hint(NoteDiffers, "sink.loki.labels.environment", "with orgs, each org's streams are labelled with its own salesforce.environment, over this label (the older implementation let this label win); set each org's salesforce.environment, or expect these streams to change label")
	}
	if sf := mapValue(root, "salesforce"); sf != nil && mapValue(root, "orgs") == nil {
		env := "production"
		if e := mapValue(sf, "environment"); e != nil && e.Kind == yaml.ScalarNode {
			env = e.Value
		}
		add = append(add, [2]string{"environment", env})
		if id := mapValue(sf, "org_id"); id != nil && id.Kind == yaml.ScalarNode && id.Value != "" {
			add = append(add, [2]string{"sf_org_id", id.Value})
		} else if mapValue(labels, "sf_org_id") == nil {
			r.hint(NoteDiffers, "sink.loki.labels", "the older implementation labelled every stream sf_org_id=<the org's id>, which it asked Salesforce at start; set salesforce.org_id to keep the label (config migrate then writes it)")
		}
	}
	var added []string
	for _, kv := range add {
		if mapValue(labels, kv[0]) == nil {
			mapSet(labels, kv[0], &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: kv[1]})
			added = append(added, kv[0]+"="+kv[1])
		}
	}
	if len(added) > 0 {
		r.hint(NoteConverted, "sink.loki.labels", "gains %s, which the older implementation set on every stream, so its streams continue", strings.Join(added, ", "))
	}
}

// enabled reads an older source's enabled flag: true is the default here
// (a source runs when it lists something), false turns the source off by
// emptying what it lists. (offByDefault handles an older source that was
// off by default and has no flag.)
func (r *olderRewrite) enabled(sec *yaml.Node, at, list string) {
	flag := mapValue(sec, "enabled")
	value, fromEnv := "", ""
	if flag != nil {
		if flag.Kind != yaml.ScalarNode {
			mapDelete(sec, "enabled")
			r.refuse(at+".enabled", "must be true or false")
			return
		}
		value = r.expand(flag.Value)
	}
	if !strings.HasPrefix(at, "orgs[") { // the environment reaches the top-level sources only
		if v := r.getenv(envName(at + ".enabled")); v != "" {
			value, fromEnv = v, envName(at+".enabled")
		}
	}
	if flag == nil && fromEnv == "" {
		return
	}
	r.sawEnabled[at] = true
	mapDelete(sec, "enabled")
	on, ok := parseBoolWord(value)
	if !ok {
		r.refuse(at+".enabled", "%q is not true or false", value)
		return
	}
	say := r.hint // a flag only in the environment says nothing about the file
	if flag != nil {
		say = r.note
	}
	if on {
		say(NoteDropped, at+".enabled", "removed: a source runs when %s lists something", list)
		return
	}
	if l := mapValue(sec, list); l != nil && len(l.Content) > 0 {
		mapSet(sec, list, &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle})
		say(NoteConverted, at+".enabled", "false: the source is off, so %s is emptied (a source runs when %s lists something)", list, list)
		return
	}
	say(NoteDropped, at+".enabled", "removed: the source lists nothing, so it is off")
}

// expand replaces each ${VAR} that is set in v (the older implementation
// expanded them before reading a value), and $${VAR} with the text ${VAR}
// as the loader does; an unset one is left for the loader to report.
func (r *olderRewrite) expand(v string) string {
	return expandPlaceholders(v, func(name string) (string, bool) {
		val := r.getenv(name)
		return val, val != ""
	})
}

// parseBoolWord reads a boolean as the older implementation's YAML did:
// true/false, yes/no, on/off, 1/0, in any case.
func parseBoolWord(s string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "yes", "on", "1", "y":
		return true, true
	case "false", "no", "off", "0", "n":
		return false, true
	}
	return false, false
}

// objectSamples moves each object's sample (a fraction) into the source's
// sample mapping under the object's name.
func (r *olderRewrite) objectSamples(objs *yaml.Node, at string) {
	list := mapValue(objs, "objects")
	if list == nil || list.Kind != yaml.SequenceNode {
		return
	}
	for i, o := range list.Content {
		s, name := mapValue(o, "sample"), mapValue(o, "name")
		if s == nil || name == nil {
			continue
		}
		mapDelete(o, "sample")
		r.addSample(objs, at, name.Value, s, fmt.Sprintf("%s.objects[%d].sample", at, i))
	}
}

// addSample sets sample[name] = fraction in sec, unless the fraction keeps
// every row.
func (r *olderRewrite) addSample(sec *yaml.Node, at, name string, fraction *yaml.Node, from string) {
	if f, err := strconv.ParseFloat(fraction.Value, 64); err == nil && f == 1 {
		r.note(NoteDropped, from, "removed: 1 keeps every row, the default")
		return
	}
	m := mapValue(sec, "sample")
	if m == nil {
		m = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		mapSet(sec, "sample", m)
	}
	if old := mapValue(m, name); old != nil && old.Value != fraction.Value {
		r.refuse(from, "%s is also sampled at %s in %s.sample; keep one", name, old.Value, at)
		return
	}
	mapSet(m, name, fraction)
	r.note(NoteConverted, from, "written %s.sample: {%s: %s}", at, name, fraction.Value)
}

// eventTypes turns the object form of event types into names, moving each
// type's sample, structured_metadata_fields and labels to the keys that
// hold them here.
func (r *olderRewrite) eventTypes(elf *yaml.Node, at string) {
	list := mapValue(elf, "event_types")
	if list == nil || list.Kind != yaml.SequenceNode {
		return
	}
	for i, it := range list.Content {
		if it.Kind != yaml.MappingNode {
			continue
		}
		from := fmt.Sprintf("%s.event_types[%d]", at, i)
		name := mapValue(it, "name")
		if name == nil || name.Kind != yaml.ScalarNode || name.Value == "" {
			r.refuse(from, "an event type written as a mapping needs its name")
			continue
		}
		for j := 0; j+1 < len(it.Content); j += 2 {
			k, v := it.Content[j].Value, it.Content[j+1]
			switch k {
			case "name":
			case "sample":
				r.addSample(elf, at, name.Value, v, from+".sample")
			case "structured_metadata_fields", "labels":
				r.typeOption(elf, at, name.Value, k, v)
				r.note(NoteConverted, from+"."+k, "written %s.types[] {name: %s, %s: …}", at, name.Value, k)
			default:
				r.refuse(from+"."+k, "unknown key of an event type (name, structured_metadata_fields, labels, sample)")
			}
		}
		list.Content[i] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: name.Value, HeadComment: it.HeadComment, LineComment: it.LineComment}
	}
}

// typeOption sets key to v in the types entry named name, adding it.
func (r *olderRewrite) typeOption(elf *yaml.Node, at, name, key string, v *yaml.Node) {
	types := mapValue(elf, "types")
	if types == nil {
		types = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		mapSet(elf, "types", types)
	}
	if types.Kind != yaml.SequenceNode {
		r.refuse(at+".types", "must be a list of {name, structured_metadata_fields, labels}")
		return
	}
	for _, t := range types.Content {
		if n := mapValue(t, "name"); n != nil && n.Value == name {
			if mapValue(t, key) != nil {
				r.refuse(at+".types", "%s sets %s for %s, which event_types sets too; keep one", at+".types", key, name)
				return
			}
			mapSet(t, key, v)
			return
		}
	}
	t := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	mapSet(t, "name", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: name})
	mapSet(t, key, v)
	types.Content = append(types.Content, t)
}

// elfKeys handles the older EventLogFile keys with no counterpart here.
func (r *olderRewrite) elfKeys(elf *yaml.Node, at string) {
	if v := mapValue(elf, "page_size"); v != nil {
		mapDelete(elf, "page_size")
		r.note(NoteDropped, at+".page_size", "removed: files are listed in Salesforce's own pages (nextRecordsUrl), with no LIMIT to size")
	}
	if v := mapValue(elf, "timestamp_column"); v != nil {
		if v.Value != "TIMESTAMP_DERIVED" {
			r.refuse(at+".timestamp_column", "%s is not read here: a row's time is TIMESTAMP_DERIVED, else TIMESTAMP, else its file's LogDate; remove the key (a transform cannot change which column is the time)", v.Value)
			return
		}
		mapDelete(elf, "timestamp_column")
		r.note(NoteDropped, at+".timestamp_column", "removed: TIMESTAMP_DERIVED (then TIMESTAMP) is always the row's time")
	}
	if v := mapValue(elf, "download_max_age"); v != nil {
		mapDelete(elf, "download_max_age")
		r.note(NoteDropped, at+".download_max_age", "removed: a failing download is retried at every poll and no file is abandoned, so no rows are skipped (the older implementation moved past a file that failed for longer than this); a file Salesforce deletes is no longer listed")
	}
}

// rename moves from[oldKey] to to[newKey], refusing when both are set.
func (r *olderRewrite) rename(from *yaml.Node, fromAt, oldKey string, to *yaml.Node, toAt, newKey string) {
	v := mapValue(from, oldKey)
	if v == nil {
		return
	}
	if mapValue(to, newKey) != nil {
		r.refuse(fromAt+"."+oldKey, "the older spelling of %s.%s, which is set too; keep %s.%s", toAt, newKey, toAt, newKey)
		return
	}
	k := mapKey(from, oldKey)
	if from != to {
		mapDelete(from, oldKey)
		to.Content = append(to.Content, k, v)
	}
	k.Value = newKey
	r.note(NoteRenamed, fromAt+"."+oldKey, "the older spelling of %s.%s", toAt, newKey)
}

// mapValue returns m[key] (nil when m is not a mapping or has no key).
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if k := mapKey(m, key); k != nil {
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i] == k {
				return resolveAlias(m.Content[i+1])
			}
		}
	}
	return nil
}

func mapKey(m *yaml.Node, key string) *yaml.Node {
	if m == nil {
		return nil
	}
	m = resolveAlias(m)
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i]
		}
	}
	return nil
}

func mapDelete(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

func mapSet(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
}

// olderEnvRenames are the older spellings an SF2LOKI_ variable may use, by
// path, with ours.
var olderEnvRenames = map[string]string{
	"sources.pubsub.default_num_requested": "sources.pubsub.num_requested",
	"sink.loki.batch.queue_maxsize":        "sink.loki.batch.queue_entries",
	"sink.loki.batch.queue_max_bytes":      "sink.loki.batch.queue_bytes",
	"sink.loki.batch.flush_interval":       "sink.loki.batch.max_wait",
	"sink.loki.batch.max_line_bytes":       "sink.loki.max_line_bytes",
}

// olderEnvLists are the older sources' enabled flags, by path, with the
// list that turns each source on here.
var olderEnvLists = map[string]string{
	"sources.pubsub.enabled":           "sources.pubsub.topics",
	"sources.eventlogfile.enabled":     "sources.eventlogfile.event_types",
	"sources.eventlog_objects.enabled": "sources.eventlog_objects.objects",
}

// olderEnv reads the older spellings among the SF2LOKI_ variables: a
// renamed key's value is set in raw under our path (the environment beats
// the file, as any override does), an enabled flag turns its source off
// when false, SF2LOKI_SINK__TYPE=loki is dropped; one WARN each. It
// returns the environment without them, so that they are not reported as
// unknown.
func olderEnv(raw map[string]any, environ []string) (rest, warnings []string, problems []Problem) {
	set := map[string]bool{}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		set[name] = true
	}
	for _, kv := range environ {
		name, val, _ := strings.Cut(kv, "=")
		path, ok := strings.CutPrefix(name, EnvPrefix)
		if !ok {
			rest = append(rest, kv)
			continue
		}
		path = strings.ToLower(strings.ReplaceAll(path, "__", "."))
		newPath, renamed := olderEnvRenames[path]
		list, flag := olderEnvLists[path]
		switch {
		case renamed:
			if set[envName(newPath)] {
				problems = append(problems, Problem{Path: name, Message: fmt.Sprintf("the older spelling of %s, which is set too; keep %s", envName(newPath), envName(newPath))})
				continue
			}
			setPath(raw, newPath, val)
			warnings = append(warnings, fmt.Sprintf("%s: the older spelling of %s, read as it; rename it", name, envName(newPath)))
		case flag:
			on, ok := parseBoolWord(val)
			switch {
			case !ok:
				problems = append(problems, Problem{Path: name, Message: fmt.Sprintf("%q is not true or false", val)})
			case on:
				warnings = append(warnings, fmt.Sprintf("%s: read as the older source's enabled flag (a source runs when %s lists something); remove the variable", name, list))
			default:
				setPath(raw, list, []any{})
				warnings = append(warnings, fmt.Sprintf("%s=false: the source is off, so %s is emptied; remove the variable and the list instead", name, list))
			}
		case path == "sink.type":
			if strings.TrimSpace(val) != "loki" {
				problems = append(problems, Problem{Path: name, Message: "only loki is a sink; unset the variable"})
				continue
			}
			warnings = append(warnings, name+": ignored: Loki is the only sink; unset the variable")
		default:
			rest = append(rest, kv)
		}
	}
	return rest, warnings, problems
}

// setPath sets the dotted path in m, making the mappings on the way.
func setPath(m map[string]any, path string, v any) {
	parent, key := parentOf(m, path)
	parent[key] = v
}

// unshare replaces, under n, every alias by a copy of the node it names and
// every merge key (<<) by the keys it merges (the mapping's own keys win,
// then the earlier merged mappings, as the loader reads them), and drops
// the anchors. It stops past budget nodes (aliases can expand a document
// far beyond its size).
func unshare(n *yaml.Node, budget *int) error {
	if *budget--; *budget < 0 {
		return errAliasExpansion
	}
	n.Anchor = ""
	if n.Kind == yaml.MappingNode {
		if err := mergeKeys(n, budget); err != nil {
			return err
		}
	}
	for i, c := range n.Content {
		if c.Kind == yaml.AliasNode {
			cp, err := copyNode(resolveAlias(c), budget)
			if err != nil {
				return err
			}
			n.Content[i] = cp
		}
		if err := unshare(n.Content[i], budget); err != nil {
			return err
		}
	}
	return nil
}

// mergeKeys writes the keys a mapping's merge keys bring in as its own.
func mergeKeys(n *yaml.Node, budget *int) error {
	var own, merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := resolveAlias(n.Content[i]); k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, n.Content[i+1])
			continue
		}
		own = append(own, n.Content[i], n.Content[i+1])
	}
	if len(merges) == 0 {
		return nil
	}
	present := map[string]bool{}
	for i := 0; i < len(own); i += 2 {
		present[resolveAlias(own[i]).Value] = true
	}
	for _, m := range merges {
		srcs := []*yaml.Node{m}
		if r := resolveAlias(m); r.Kind == yaml.SequenceNode {
			srcs = r.Content
		}
		for _, src := range srcs {
			cp, err := copyNode(resolveAlias(src), budget)
			if err != nil {
				return err
			}
			if cp.Kind != yaml.MappingNode {
				return fmt.Errorf("line %d: << must merge a mapping or a list of mappings", src.Line)
			}
			if err := mergeKeys(cp, budget); err != nil {
				return err
			}
			for i := 0; i+1 < len(cp.Content); i += 2 {
				if k := resolveAlias(cp.Content[i]).Value; !present[k] {
					present[k] = true
					own = append(own, cp.Content[i], cp.Content[i+1])
				}
			}
		}
	}
	n.Content = own
	return nil
}

// copyNode copies n deeply (aliases inside stay aliases: unshare replaces
// them in turn).
func copyNode(n *yaml.Node, budget *int) (*yaml.Node, error) {
	if *budget--; *budget < 0 {
		return nil, errAliasExpansion
	}
	cp := *n
	cp.Anchor = ""
	cp.Content = make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		if c.Kind == yaml.AliasNode {
			cp.Content[i] = c
			continue
		}
		cc, err := copyNode(c, budget)
		if err != nil {
			return nil, err
		}
		cp.Content[i] = cc
	}
	return &cp, nil
}
