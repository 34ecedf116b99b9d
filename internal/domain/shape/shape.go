package shape

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// The actions of a rule.
const (
	Hash         = "hash"
	Mask         = "mask"
	DropField    = "drop_field"
	RegexReplace = "regex_replace"
	DropRow      = "drop_row"
)

// Actions lists the actions in the order the documentation gives them.
var Actions = []string{Hash, Mask, DropField, RegexReplace, DropRow}

// Rule is one transform, as a source's transforms list gives it.
type Rule struct {
	// Action is Hash, Mask, DropField, RegexReplace or DropRow.
	Action string
	// Fields are the field names or globs the action applies to (every
	// action but DropRow), matched case-sensitively against a row's
	// top-level field names. A dotted name (ChangeEventHeader.commitUser)
	// is a path into a decoded record's nested records, a segment per
	// dot, its last segment a name or a glob; on a flat (string) row it is
	// the name as written. A field a row lacks is left alone.
	Fields []string
	// Match (DropRow only) maps field names (a dotted one is a path, as in
	// Fields) to globs over the field's text: a row is dropped when every
	// field named is present and matches.
	Match map[string]string
	// Pattern (RegexReplace only) is an RE2 expression; Replacement
	// replaces each match, in Go's regexp.Expand syntax: $1 or ${1}, $name
	// or ${name} for groups, $$ for a literal $. Both are taken as
	// written; Validate refuses a reference to a group Pattern lacks and a
	// ${NAME} in Pattern whose $ is not escaped (it matches nothing).
	Pattern, Replacement string
	// Name names the rule in errors and in the Filtered counter; blank:
	// <action>#<position from 1>.
	Name string
	// EventTypes are globs over the event types the rule applies to,
	// matched without regard to case; empty: every event type.
	EventTypes []string
}

// Config is a source's transforms and sampling.
type Config struct {
	// Rules apply in order to every row of the event types they name.
	Rules []Rule
	// Sample maps globs over event types (matched without regard to case)
	// to the fraction of rows kept, 0 to 1: the event type's exact name
	// wins, else the longest glob that matches it (of two as long, the
	// one that sorts first), else every row is kept.
	Sample map[string]float64
	// Salt keys the hash action (HMAC-SHA-256). Empty is an empty key: a
	// hash of a low-entropy value can then be reversed by hashing every
	// candidate.
	Salt string
	// Filtered, if set, counts a row a DropRow rule dropped, by the rule's
	// name.
	Filtered func(rule string)
	// SampledOut, if set, counts a row sampling left out, by event type.
	SampledOut func(eventType string)
	// PathTypes: the event types are paths (Pub/Sub topics such as
	// /event/LoginEventStream), and a rule's EventTypes and the Sample's
	// globs match the whole path or its last element (LoginEventStream,
	// the event_type label's value). An exact name wins over a glob; of
	// two exact names, the whole path.
	PathTypes bool
}

// Errors of a configuration New refuses: every one it returns wraps one of
// them, as a *RuleError or a *SampleError.
var (
	ErrInvalidRule   = errors.New("invalid transform")
	ErrInvalidSample = errors.New("invalid sample fraction")
)

// RuleError is what is wrong with one rule.
type RuleError struct {
	// Index is the rule's position in the list, from 0.
	Index int
	// Name is the rule's name, or its default <action>#<position from 1>.
	Name string
	// Key is the rule's key at fault: action, fields, match, pattern,
	// replacement, name or event_types.
	Key string
	// Reason says what is wrong and what to do.
	Reason string
	// Err is the cause (a pattern's RE2 error), or nil.
	Err error
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("transforms[%d] (%s): %s: %s", e.Index, e.Name, e.Key, e.Reason)
}

// Unwrap returns ErrInvalidRule and the cause.
func (e *RuleError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalidRule, e.Err}
	}
	return []error{ErrInvalidRule}
}

// SampleError is what is wrong with one entry of a sample map.
type SampleError struct {
	// Key is the entry's glob.
	Key string
	// Reason says what is wrong and what to do.
	Reason string
}

func (e *SampleError) Error() string { return fmt.Sprintf("sample %q: %s", e.Key, e.Reason) }

// Unwrap returns ErrInvalidSample.
func (e *SampleError) Unwrap() error { return ErrInvalidSample }

// RuleName is the name a rule goes by: its Name, else <action>#<position
// from 1> (index is from 0).
func RuleName(r Rule, index int) string {
	if r.Name != "" {
		return r.Name
	}
	action := r.Action
	if action == "" {
		action = "transform"
	}
	return fmt.Sprintf("%s#%d", action, index+1)
}

// Validate returns every problem of cfg, each a *RuleError or a
// *SampleError, in the order of the rules then of the sample's sorted
// keys.
func Validate(cfg Config) []error {
	var errs []error
	names := map[string]int{}
	for i, r := range cfg.Rules {
		name := RuleName(r, i)
		bad := func(key, format string, args ...any) {
			errs = append(errs, &RuleError{Index: i, Name: name, Key: key, Reason: fmt.Sprintf(format, args...)})
		}
		if j, dup := names[name]; dup {
			bad("name", "transforms[%d] has the same name: give each rule its own name (it tells them apart in sf2loki_rows_filtered_total)", j)
		}
		names[name] = i
		switch {
		case r.Action == "":
			bad("action", "required: one of %s", strings.Join(Actions, ", "))
			continue
		case !slices.Contains(Actions, r.Action):
			bad("action", "%q is not one of %s", r.Action, strings.Join(Actions, ", "))
			continue
		}
		if r.Action == DropRow {
			if len(r.Fields) > 0 {
				bad("fields", "drop_row does not read fields: name the fields to compare in match (field: glob)")
			}
			if len(r.Match) == 0 {
				bad("match", "required by drop_row: the fields and the globs their text must match for the row to be dropped, e.g. {STATUS_CODE: \"200\"}")
			}
			for _, f := range slices.Sorted(maps.Keys(r.Match)) {
				if f == "" {
					bad("match", "an empty field name: name the field whose text is compared")
				} else if reason := badPath(f); reason != "" || IsGlob(f) && strings.Contains(f, ".") {
					bad("match", "%q: %s", f, cmp.Or(reason, "a dotted match field names one field: no glob"))
				}
			}
		} else {
			if len(r.Fields) == 0 {
				bad("fields", "required by %s: the field names or globs (* any characters, ? one) it applies to", r.Action)
			}
			if slices.Contains(r.Fields, "") {
				bad("fields", "an empty field name: write a name or a glob such as USER_* or *_IP")
			}
			for _, f := range r.Fields {
				if reason := badPath(f); reason != "" {
					bad("fields", "%q: %s", f, reason)
				}
			}
			if len(r.Match) > 0 {
				bad("match", "only drop_row reads match; %s applies to fields", r.Action)
			}
		}
		if r.Action == RegexReplace {
			for _, reason := range patternProblems(r.Pattern) {
				bad("pattern", "%s", reason)
			}
			if r.Pattern == "" {
				bad("pattern", "required by regex_replace: an RE2 regular expression")
			} else if re, err := regexp.Compile(r.Pattern); err != nil {
				errs = append(errs, &RuleError{Index: i, Name: name, Key: "pattern", Err: err,
					Reason: fmt.Sprintf("%q is not an RE2 regular expression: %q (RE2 has no lookaround or backreferences)", r.Pattern, err.Error())})
			} else {
				for _, reason := range replacementProblems(re, r.Replacement) {
					bad("replacement", "%s", reason)
				}
			}
		} else {
			if r.Pattern != "" {
				bad("pattern", "only regex_replace reads pattern; remove it or make the action regex_replace")
			}
			if r.Replacement != "" {
				bad("replacement", "only regex_replace reads replacement; remove it or make the action regex_replace")
			}
		}
		if slices.Contains(r.EventTypes, "") {
			bad("event_types", "an empty glob matches no event type: write a name or a glob such as *Event, or leave event_types out for every event type")
		}
	}
	seen := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(cfg.Sample)) {
		f := cfg.Sample[k]
		switch {
		case k == "":
			errs = append(errs, &SampleError{Key: k, Reason: "an empty glob matches no event type: write a name or a glob such as *Event"})
		case math.IsNaN(f) || f < 0 || f > 1:
			errs = append(errs, &SampleError{Key: k, Reason: fmt.Sprintf("%v is not a fraction from 0 (keep none) to 1 (keep all)", f)})
		}
		low := strings.ToLower(k)
		if other, dup := seen[low]; dup {
			errs = append(errs, &SampleError{Key: k, Reason: fmt.Sprintf("the same glob as %q (event types are matched without regard to case): keep one", other)})
		}
		seen[low] = k
	}
	return errs
}

// badPath says what is wrong with a dotted field name (a path into nested
// records, ChangeEventHeader.commitUser), "" when nothing is (or it has no
// dot).
func badPath(f string) string {
	if !strings.Contains(f, ".") {
		return ""
	}
	parents, leaf := splitPath(f)
	if leaf == "" || slices.Contains(parents, "") {
		return "an empty name between dots: a dotted name is a path into nested records, such as ChangeEventHeader.commitUser"
	}
	if slices.ContainsFunc(parents, IsGlob) {
		return "a glob before the last dot: the records on the path are named exactly (ChangeEventHeader.*User, not *.commitUser); to hide a whole nested record, hash or drop its top-level field"
	}
	return ""
}

// maxPlans bounds the plans a Shaper caches (one per event type seen);
// event types past it get a plan built on each call.
const maxPlans = 4096

// maxCachedNames bounds the field names a rule remembers the verdict of
// its field globs for; names past it are matched on each row.
const maxCachedNames = 4096

// Shaper applies one source's transforms and sampling. It is safe for
// concurrent use. A nil *Shaper does nothing.
type Shaper struct {
	source     string
	rules      []*rule
	exact      map[string]float64 // sample entries without a glob, by lower-case name
	globs      []sampleGlob       // the others, longest first
	hasher     *hasher
	filtered   func(string)
	sampledOut func(string)
	plans      sync.Map // event type → *Plan
	planCount  atomic.Int32
	pathTypes  bool
}

type sampleGlob struct {
	glob     Glob // over lower-case names
	fraction float64
}

// New validates cfg (every problem, joined, each wrapping ErrInvalidRule
// or ErrInvalidSample and naming the rule by position and name) and
// compiles it for source (its name in errors).
func New(source string, cfg Config) (*Shaper, error) {
	if errs := Validate(cfg); len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", source, errors.Join(errs...))
	}
	s := &Shaper{source: source, hasher: newHasher([]byte(cfg.Salt)), exact: map[string]float64{},
		filtered: cfg.Filtered, sampledOut: cfg.SampledOut, pathTypes: cfg.PathTypes}
	if s.filtered == nil {
		s.filtered = func(string) {}
	}
	if s.sampledOut == nil {
		s.sampledOut = func(string) {}
	}
	for i, r := range cfg.Rules {
		s.rules = append(s.rules, compile(r, i))
	}
	for k, f := range cfg.Sample {
		low := strings.ToLower(k)
		if IsGlob(low) {
			s.globs = append(s.globs, sampleGlob{CompileGlob(low), f})
		} else {
			s.exact[low] = f
		}
	}
	slices.SortFunc(s.globs, func(a, b sampleGlob) int {
		return cmp.Or(cmp.Compare(len(b.glob.pattern), len(a.glob.pattern)), strings.Compare(a.glob.pattern, b.glob.pattern))
	})
	return s, nil
}

// Source is the name the Shaper was built for.
func (s *Shaper) Source() string {
	if s == nil {
		return ""
	}
	return s.source
}

// For returns the plan of eventType: the rules whose event types match it,
// in order, and its sample fraction. Plans are cached; nil for a nil
// Shaper.
func (s *Shaper) For(eventType string) *Plan {
	if s == nil {
		return nil
	}
	if p, ok := s.plans.Load(eventType); ok {
		return p.(*Plan)
	}
	p := s.plan(eventType)
	if s.planCount.Load() < maxPlans {
		if prev, loaded := s.plans.LoadOrStore(eventType, p); loaded {
			return prev.(*Plan)
		}
		s.planCount.Add(1)
	}
	return p
}

func (s *Shaper) plan(eventType string) *Plan {
	names := []string{strings.ToLower(eventType)}
	if i := strings.LastIndexByte(names[0], '/'); s.pathTypes && i >= 0 && i < len(names[0])-1 {
		names = append(names, names[0][i+1:])
	}
	matches := func(g Glob) bool { return slices.ContainsFunc(names, g.Match) }
	p := &Plan{shaper: s, eventType: eventType, keepAll: true}
	for _, r := range s.rules {
		if len(r.events) == 0 || slices.ContainsFunc(r.events, matches) {
			p.rules = append(p.rules, r)
		}
	}
	var f float64
	ok := false
	for _, n := range names {
		if f, ok = s.exact[n]; ok {
			break
		}
	}
	if !ok {
		for _, g := range s.globs {
			if matches(g.glob) {
				f, ok = g.fraction, true
				break
			}
		}
	}
	if ok && f < 1 {
		p.keepAll = false
		p.threshold = uint64(math.Ceil(f * sampleScale))
	}
	return p
}

// sampleScale is the resolution of a sample fraction: a row is kept when
// its key's hash modulo sampleScale is below fraction × sampleScale.
const sampleScale = 10000

// Plan is what one event type's rows go through. A nil *Plan does nothing.
type Plan struct {
	shaper    *Shaper
	eventType string
	rules     []*rule
	keepAll   bool
	threshold uint64 // keep when hash % sampleScale < threshold
}

// Noop reports whether the plan leaves every row as it is: no rule and
// every row kept. The sources skip a no-op plan without touching the row.
func (p *Plan) Noop() bool { return p == nil || (len(p.rules) == 0 && p.keepAll) }

// Sampling reports whether the plan keeps only some rows (Keep needs the
// row's key).
func (p *Plan) Sampling() bool { return p != nil && !p.keepAll }

// Keep reports whether the row whose stable key is key is kept: when the
// first 8 bytes of SHA-256(key), read as a big-endian unsigned integer,
// modulo 10000, are below fraction × 10000. The same key is always kept or
// always left out, by every replica and after every restart. A row left
// out is counted (SampledOut). Fraction 1 keeps without hashing, 0 keeps
// nothing.
func (p *Plan) Keep(key string) bool {
	if p == nil || p.keepAll {
		return true
	}
	if p.threshold > 0 && sampleBucket(key) < p.threshold {
		return true
	}
	p.shaper.sampledOut(p.eventType)
	return false
}

// sampleBucket is key's place among the sampleScale buckets.
func sampleBucket(key string) uint64 {
	sum := sha256.Sum256([]byte(key))
	return binary.BigEndian.Uint64(sum[:8]) % sampleScale
}

// Strings applies the plan's rules to an EventLogFile row, in place. It
// returns false when a drop_row rule dropped the row (counted: Filtered).
func (p *Plan) Strings(row map[string]string) bool {
	if p == nil {
		return true
	}
	h := p.shaper.hasher
	for _, r := range p.rules {
		if r.action == DropRow {
			if r.matchStrings(row) {
				p.shaper.filtered(r.name)
				return false
			}
			continue
		}
		for _, fp := range r.paths {
			if v, ok := row[fp.name]; ok && fp.glob == nil { // a flat row: the dotted name as it is
				if r.action == DropField {
					delete(row, fp.name)
				} else {
					row[fp.name] = r.applyString(h, v)
				}
			}
		}
		if len(r.globs) == 0 {
			for _, f := range r.exact {
				if v, ok := row[f]; ok {
					if r.action == DropField {
						delete(row, f)
					} else {
						row[f] = r.applyString(h, v)
					}
				}
			}
			continue
		}
		for k, v := range row {
			if !r.wants(k) {
				continue
			}
			if r.action == DropField {
				delete(row, k)
			} else {
				row[k] = r.applyString(h, v)
			}
		}
	}
	return true
}

// Values applies the plan's rules to a decoded record (a SOQL row, a
// Pub/Sub event), in place, by the rules for values that are not strings
// (see the package documentation). It returns false when a drop_row rule
// dropped the record (counted: Filtered).
func (p *Plan) Values(rec map[string]any) bool {
	if p == nil {
		return true
	}
	h := p.shaper.hasher
	for _, r := range p.rules {
		if r.action == DropRow {
			if r.matchValues(rec) {
				p.shaper.filtered(r.name)
				return false
			}
			continue
		}
		for _, fp := range r.paths {
			if m, ok := nested(rec, fp.parents); ok {
				r.values(h, m, fp.leaf, fp.glob)
			}
		}
		if len(r.globs) == 0 {
			for _, f := range r.exact {
				if v, ok := rec[f]; ok {
					if r.action == DropField {
						delete(rec, f)
					} else {
						rec[f] = r.applyValue(h, v)
					}
				}
			}
			continue
		}
		for k, v := range rec {
			if !r.wants(k) {
				continue
			}
			if r.action == DropField {
				delete(rec, k)
			} else {
				rec[k] = r.applyValue(h, v)
			}
		}
	}
	return true
}

// values applies the rule to the field leaf of m, or to each field the
// glob g (when set) matches.
func (r *rule) values(h *hasher, m map[string]any, leaf string, g *Glob) {
	apply := func(k string, v any) {
		if r.action == DropField {
			delete(m, k)
		} else {
			m[k] = r.applyValue(h, v)
		}
	}
	if g == nil {
		if v, ok := m[leaf]; ok {
			apply(leaf, v)
		}
		return
	}
	for k, v := range m {
		if g.Match(k) {
			apply(k, v)
		}
	}
}

// nested is the record at the path parents under rec (rec itself for no
// parents); ok is false when a step is missing or not a record.
func nested(rec map[string]any, parents []string) (map[string]any, bool) {
	for _, p := range parents {
		next, ok := rec[p].(map[string]any)
		if !ok {
			return nil, false
		}
		rec = next
	}
	return rec, true
}

// lookup is the value at a field's path under rec.
func lookup(rec map[string]any, parents []string, leaf string) any {
	m, ok := nested(rec, parents)
	if !ok {
		return nil
	}
	return m[leaf]
}

// rule is a compiled Rule.
type rule struct {
	action string
	name   string
	exact  []string // field names without a glob, once each
	globs  []Glob   // field globs
	// names caches, for a rule with field globs, whether a field name is
	// one of the rule's (copy on write, at most maxCachedNames).
	names  atomic.Pointer[map[string]bool]
	paths  []fieldPath // dotted field names
	match  []fieldGlob // drop_row
	re     *regexp.Regexp
	repl   string
	events []Glob // over lower-case event types
}

type fieldGlob struct {
	field   string
	parents []string // a dotted field's path to its record
	leaf    string   // the field's name in that record
	glob    Glob
}

// fieldPath is a dotted field name: the path through nested records to
// the field (or, when glob is set, the fields it matches).
type fieldPath struct {
	name    string // as written
	parents []string
	leaf    string
	glob    *Glob
}

// splitPath cuts a field name at its dots: the records leading to the
// field, and its name in the last one.
func splitPath(f string) (parents []string, leaf string) {
	parts := strings.Split(f, ".")
	return parts[:len(parts)-1], parts[len(parts)-1]
}

// compile compiles a validated rule.
func compile(r Rule, index int) *rule {
	c := &rule{action: r.Action, name: RuleName(r, index), repl: r.Replacement}
	for _, f := range r.Fields {
		switch {
		case strings.Contains(f, "."):
			fp := fieldPath{name: f}
			fp.parents, fp.leaf = splitPath(f)
			if IsGlob(fp.leaf) {
				g := CompileGlob(fp.leaf)
				fp.glob = &g
			}
			if !slices.ContainsFunc(c.paths, func(p fieldPath) bool { return p.name == f }) {
				c.paths = append(c.paths, fp)
			}
		case IsGlob(f):
			c.globs = append(c.globs, CompileGlob(f))
		case !slices.Contains(c.exact, f):
			c.exact = append(c.exact, f)
		}
	}
	for _, f := range slices.Sorted(maps.Keys(r.Match)) {
		parents, leaf := splitPath(f)
		c.match = append(c.match, fieldGlob{field: f, parents: parents, leaf: leaf, glob: CompileGlob(r.Match[f])})
	}
	if r.Action == RegexReplace {
		c.re = regexp.MustCompile(r.Pattern) // validated
	}
	for _, e := range r.EventTypes {
		c.events = append(c.events, CompileGlob(strings.ToLower(e)))
	}
	return c
}

// wants reports whether field is one of the rule's fields.
func (r *rule) wants(field string) bool {
	cached := r.names.Load()
	if cached != nil {
		if w, ok := (*cached)[field]; ok {
			return w
		}
	}
	w := slices.Contains(r.exact, field) || slices.ContainsFunc(r.globs, func(g Glob) bool { return g.Match(field) })
	var next map[string]bool
	switch {
	case cached == nil:
		next = map[string]bool{}
	case len(*cached) < maxCachedNames:
		next = maps.Clone(*cached)
	default:
		return w
	}
	next[field] = w
	r.names.CompareAndSwap(cached, &next) // a lost race only leaves this name uncached
	return w
}

// applyString is the action on a string.
func (r *rule) applyString(h *hasher, v string) string {
	switch r.action {
	case Hash:
		if v == "" {
			return v
		}
		return h.sum(v)
	case Mask:
		return maskString(v)
	case RegexReplace:
		return r.re.ReplaceAllString(v, r.repl)
	}
	return v
}

// applyValue is the action on a decoded value.
func (r *rule) applyValue(h *hasher, v any) any {
	if s, ok := v.(string); ok {
		return r.applyString(h, s)
	}
	t, ok := text(v)
	if !ok {
		return v // nil: nothing to hide
	}
	switch r.action {
	case Hash:
		return h.sum(t)
	case Mask:
		return masked
	case RegexReplace:
		if out := r.re.ReplaceAllString(t, r.repl); out != t {
			return out
		}
	}
	return v
}

func (r *rule) matchStrings(row map[string]string) bool {
	for _, m := range r.match {
		v, ok := row[m.field]
		if !ok || !m.glob.Match(v) {
			return false
		}
	}
	return true
}

func (r *rule) matchValues(rec map[string]any) bool {
	for _, m := range r.match {
		t, ok := text(lookup(rec, m.parents, m.leaf))
		if !ok || !m.glob.Match(t) {
			return false
		}
	}
	return true
}
