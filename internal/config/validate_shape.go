package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/sf2loki/sf2loki/internal/domain/shape"
)

// ShapeSources are the sources that take transforms and sample, by their
// key under sources.
var ShapeSources = []string{"synthetic", "eventlog_objects", "eventlogfile", "pubsub", "apexlog"}

// shapeOf returns a source's transforms and sample map.
func (s Sources) shapeOf(source string) ([]Transform, map[string]float64) {
	switch source {
	case "synthetic":
		return s.Synthetic.Transforms, s.Synthetic.Sample
	case "eventlog_objects":
		return s.EventlogObjects.Transforms, s.EventlogObjects.Sample
	case "eventlogfile":
		return s.EventLogFile.Transforms, s.EventLogFile.Sample
	case "pubsub":
		return s.PubSub.Transforms, s.PubSub.Sample
	case "apexlog":
		return s.ApexLog.Transforms, s.ApexLog.Sample
	}
	return nil, nil
}

// Shape is a source's (one of ShapeSources) transforms and sample as the
// shape engine takes them; the salt and the counters are the caller's.
// Pub/Sub's event types are topics: its rules and sample entries match a
// topic (/event/LoginEventStream) or its last element (LoginEventStream).
func (s Sources) Shape(source string) shape.Config {
	ts, sample := s.shapeOf(source)
	cfg := shape.Config{Sample: sample, PathTypes: source == "pubsub"}
	for _, t := range ts {
		cfg.Rules = append(cfg.Rules, shape.Rule{Action: t.Action, Fields: t.Fields, Match: t.Match, Pattern: t.Pattern,
			Replacement: t.Replacement, Name: t.Name, EventTypes: t.EventTypes})
	}
	return cfg
}

// Shaped reports whether any source has a transform or a sample entry.
func (s Sources) Shaped() bool {
	for _, src := range ShapeSources {
		if ts, sample := s.shapeOf(src); len(ts) > 0 || len(sample) > 0 {
			return true
		}
	}
	return false
}

// HashRule returns the path (under sources) of the first hash transform,
// "" when there is none.
func (s Sources) HashRule() string {
	for _, src := range ShapeSources {
		ts, _ := s.shapeOf(src)
		for i, t := range ts {
			if t.Action == shape.Hash {
				return fmt.Sprintf("sources.%s.transforms[%d]", src, i)
			}
		}
	}
	return ""
}

// Salted reports whether transform_salt or transform_salt_file is set.
func (s Sources) Salted() bool {
	return strings.TrimSpace(s.TransformSalt) != "" || s.TransformSaltFile != ""
}

// UnsaltedHashAdvice is the heart of the warning about a hash transform
// without a salt (check and doctor print it).
const UnsaltedHashAdvice = "an unsalted hash of a user id can be reversed by hashing every possible id"

// UnsaltedHashWarning is the warning about the hash transform at path (as
// HashRule gives it) of an org whose keys start with prefix ("" or
// "orgs[i].").
func UnsaltedHashWarning(prefix, path string) string {
	return fmt.Sprintf("%s%s hashes without a salt: %s; set %ssources.transform_salt_file (a file holding a long random secret)",
		prefix, path, UnsaltedHashAdvice, prefix)
}

// validateShape checks every org's transforms and sample maps (each
// source's, as the daemon would build them) and returns the warnings: a
// hash without a salt, a drop_field of a field sink.loki promotes to
// structured metadata.
func (c *Config) validateShape(add func(path, format string, args ...any)) (warnings []string) {
	for _, o := range c.orgSections() {
		for _, src := range ShapeSources {
			base := fmt.Sprintf("%ssources.%s", o.prefix, src)
			for _, err := range shape.Validate(o.src.Shape(src)) {
				var re *shape.RuleError
				var se *shape.SampleError
				switch {
				case errors.As(err, &re):
					add(fmt.Sprintf("%s.transforms[%d].%s", base, re.Index, re.Key), "rule %s: %s", re.Name, re.Reason)
				case errors.As(err, &se):
					add(fmt.Sprintf("%s.sample.%s", base, se.Key), "%s", se.Reason)
				}
			}
			ts, _ := o.src.shapeOf(src)
			for i, t := range ts {
				if t.Action != shape.DropField {
					continue
				}
				for _, f := range c.Sink.Loki.StructuredMetadataFields {
					if slices.ContainsFunc(t.Fields, func(g string) bool { return shape.MatchGlob(g, f) }) {
						warnings = append(warnings, fmt.Sprintf("%s.transforms[%d] drops %s, which sink.loki.structured_metadata_fields promotes: "+
							"the rows it applies to carry no %s metadata", base, i, f, f))
					}
				}
			}
		}
		warnings = append(warnings, o.src.unmatchedShapeNames(o.prefix)...)
		if path := o.src.HashRule(); path != "" && !o.src.Salted() {
			warnings = append(warnings, UnsaltedHashWarning(o.prefix, path))
		}
	}
	return warnings
}

// listedNames are the names a source ingests as the configuration lists
// them: pubsub's topics, eventlogfile's event types, eventlog_objects'
// objects.
func (s Sources) listedNames(source string) []string {
	switch source {
	case "pubsub":
		return s.PubSub.Topics
	case "eventlogfile":
		return s.EventLogFile.EventTypes
	case "eventlog_objects":
		var names []string
		for _, o := range s.EventlogObjects.Objects {
			names = append(names, o.Name)
		}
		return names
	}
	return nil
}

// unmatchedShapeNames warns about each sample key and rule event_types
// glob of pubsub, eventlogfile and eventlog_objects that matches none of
// the names the source lists (a topic by its whole name or its last
// element, without regard to case): such an entry samples or shapes
// nothing. A source listing "*" or nothing is not checked.
func (s Sources) unmatchedShapeNames(prefix string) []string {
	var warnings []string
	for _, src := range []string{"pubsub", "eventlogfile", "eventlog_objects"} {
		listed := s.listedNames(src)
		if len(listed) == 0 || slices.Contains(listed, "*") {
			continue
		}
		var names []string
		for _, n := range listed {
			low := strings.ToLower(n)
			names = append(names, low)
			if i := strings.LastIndexByte(low, '/'); src == "pubsub" && i >= 0 && i < len(low)-1 {
				names = append(names, low[i+1:])
			}
		}
		none := func(glob string) bool {
			return glob != "" && !slices.ContainsFunc(names, shape.CompileGlob(strings.ToLower(glob)).Match)
		}
		ts, sample := s.shapeOf(src)
		for _, k := range slices.Sorted(maps.Keys(sample)) {
			if none(k) {
				warnings = append(warnings, fmt.Sprintf("%ssources.%s.sample.%s matches none of the names the source lists (%s): it samples nothing",
					prefix, src, k, strings.Join(listed, ", ")))
			}
		}
		for i, t := range ts {
			for _, e := range t.EventTypes {
				if none(e) {
					warnings = append(warnings, fmt.Sprintf("%ssources.%s.transforms[%d].event_types %q matches none of the names the source lists (%s): rule %s applies to no row",
						prefix, src, i, e, strings.Join(listed, ", "), shape.RuleName(shape.Rule{Action: t.Action, Name: t.Name}, i)))
				}
			}
		}
	}
	return warnings
}

// numberMaps reads the entries of every map of numbers (the sample maps,
// orgs' included): a number, or text holding one (an environment override
// such as SF2LOKI_SOURCES__PUBSUB__SAMPLE__API=0.5 arrives as text), is
// stored as a float64; anything else is a problem and is removed.
func numberMaps(raw map[string]any) []Problem {
	var problems []Problem
	for _, f := range schema() {
		if f.Type != "map of number" {
			continue
		}
		for _, at := range mapsAt(raw, strings.Split(f.Path, "."), "") {
			for _, k := range slices.Sorted(maps.Keys(at.m)) {
				n, ok := number(at.m[k])
				if ok {
					at.m[k] = n
					continue
				}
				msg := fmt.Sprintf("%v is not a number (a fraction from 0 to 1)", at.m[k])
				if s, isText := at.m[k].(string); isText {
					msg = fmt.Sprintf("%q is not a number (a fraction from 0 to 1)", s)
				}
				if name := envName(at.shown + "." + k); !strings.Contains(at.shown, "[") && os.Getenv(name) != "" {
					msg += " (from " + name + ")"
				}
				problems = append(problems, Problem{Path: at.shown + "." + k, Message: msg})
				delete(at.m, k)
			}
		}
	}
	return problems
}

// mapAt is a map of raw and its path as problems show it.
type mapAt struct {
	m     map[string]any
	shown string
}

// mapsAt returns the maps at the schema path parts under v (a list's
// part ends in [] and stands for each of its items).
func mapsAt(v any, parts []string, shown string) []mapAt {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	if len(parts) == 0 {
		return []mapAt{{m, shown}}
	}
	name, list := strings.CutSuffix(parts[0], "[]")
	next := join(shown, name)
	if !list {
		return mapsAt(m[name], parts[1:], next)
	}
	items, _ := m[name].([]any)
	var out []mapAt
	for i, it := range items {
		out = append(out, mapsAt(it, parts[1:], fmt.Sprintf("%s[%d]", next, i))...)
	}
	return out
}

// number reads a decoded YAML or environment value as a float64.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case string:
		f, err := strconv.ParseFloat(n, 64)
		return f, err == nil
	}
	return 0, false
}

// shapeKeys copies what restoreShapeKeys needs of raw (its sources and
// orgs) before the decoder lowers every key of raw in place.
func shapeKeys(raw map[string]any) map[string]any {
	return map[string]any{"sources": copyRaw(raw["sources"]), "orgs": copyRaw(raw["orgs"])}
}

func copyRaw(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = copyRaw(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = copyRaw(e)
		}
		return out
	}
	return v
}

// restoreShapeKeys puts back the case of the keys of every sample map and
// transforms' match map, which the decoder lowered: a match names fields
// case-sensitively, and a sample's globs read better as written. raw is
// shapeKeys' copy; the values are its too (numberMaps made the sample's
// numbers; a match's scalars become their text).
func restoreShapeKeys(cfg *Config, raw map[string]any) {
	secs := []struct {
		raw any
		src *Sources
	}{{raw["sources"], &cfg.Sources}}
	items, _ := raw["orgs"].([]any)
	for i := range cfg.Orgs {
		if i < len(items) {
			item, _ := items[i].(map[string]any)
			secs = append(secs, struct {
				raw any
				src *Sources
			}{item["sources"], &cfg.Orgs[i].Sources})
		}
	}
	for _, sec := range secs {
		rawSrc, _ := sec.raw.(map[string]any)
		for _, name := range ShapeSources {
			rs, _ := rawSrc[name].(map[string]any)
			ts, sample := sec.src.shapeOf(name)
			if m, ok := rs["sample"].(map[string]any); ok && len(sample) > 0 {
				clear(sample)
				for k, v := range m {
					if f, ok := v.(float64); ok {
						sample[k] = f
					}
				}
			}
			rawTs, _ := rs["transforms"].([]any)
			for i := range ts {
				if i >= len(rawTs) || ts[i].Match == nil {
					continue
				}
				item, _ := rawTs[i].(map[string]any)
				m, ok := item["match"].(map[string]any)
				if !ok {
					continue
				}
				clear(ts[i].Match)
				for k, v := range m {
					if s, ok := v.(string); ok {
						ts[i].Match[k] = s
					} else if v != nil {
						ts[i].Match[k] = fmt.Sprint(v)
					}
				}
			}
		}
	}
}
