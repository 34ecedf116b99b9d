package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"

	"github.com/sf2loki/sf2loki/internal/domain"
)

// EnvPrefix starts every environment variable that overrides a key:
// SF2LOKI_ + the dotted path upper-cased with "__" between levels, e.g.
// SF2LOKI_COORDINATE__S3_LEASE__BUCKET. Only names holding "__" or naming
// a top-level key are overrides; other SF2LOKI_ variables are ignored.
const EnvPrefix = "SF2LOKI_"

// Problem is one thing wrong with a configuration.
type Problem struct {
	Path    string
	Message string
}

func (p Problem) String() string { return p.Path + ": " + p.Message }

// Error lists every problem found, one per line. It unwraps to
// domain.ErrInvalidConfig.
type Error struct {
	Source   string
	Problems []Problem
}

func (e *Error) Error() string {
	lines := make([]string, 0, len(e.Problems)+1)
	src := e.Source
	if src == "" {
		src = "configuration"
	}
	lines = append(lines, fmt.Sprintf("%s is invalid (%d problem(s)):", src, len(e.Problems)))
	for _, p := range e.Problems {
		lines = append(lines, "  "+p.String())
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns domain.ErrInvalidConfig.
func (e *Error) Unwrap() error { return domain.ErrInvalidConfig }

// Load reads the YAML file at path (none when empty), applies environment
// overrides and defaults, and validates the result. It returns the
// configuration, warnings about risky but valid choices, and an *Error
// listing every problem. Each option changes the decoded configuration
// before it is validated (a command-line flag such as run --dry-run).
//
// Every step is linear in the size of the file: unknown keys and values of
// the wrong shape are reported and pruned before the rest is merged and
// decoded, so nothing downstream walks them.
func Load(path string, opts ...Option) (*Config, []string, error) {
	var problems []Problem
	var olderWarnings []string
	raw := map[string]any{}
	src := "configuration"
	if path != "" {
		src = path
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, &Error{Source: src, Problems: []Problem{{Path: "(file)", Message: fmt.Sprintf("cannot read: %v", err)}}}
		}
		doc, notes, older, err := parseOlderYAML(data)
		if err != nil {
			return nil, nil, &Error{Source: src, Problems: []Problem{{Path: "(file)", Message: fmt.Sprintf("not valid YAML: %v", err)}}}
		}
		problems = append(problems, older...)
		for _, n := range notes {
			olderWarnings = append(olderWarnings, n.String()+olderHint[n.Kind])
		}
		switch d := doc.(type) {
		case nil:
		case map[string]any:
			raw = d
		default:
			return nil, nil, &Error{Source: src, Problems: []Problem{{Path: "(file)", Message: fmt.Sprintf("the top level must be a mapping, not %s", shapeOf(doc))}}}
		}
	}
	sugg := &suggester{left: maxSuggestions}
	problems = append(problems, checkTree(raw, "", "", sugg)...)
	problems = append(problems, interpolate(raw, "", "")...)
	for _, f := range levelFields()[""] {
		if len(f.Enum) > 0 {
			enumBool(raw, f.Path)
		}
	}
	problems = append(problems, checkItems(raw)...)
	environ, envOlder, envOlderProblems := olderEnv(raw, os.Environ())
	problems = append(problems, envOlderProblems...)
	envProblems, warnings := checkEnv(environ, sugg)
	warnings = append(append(olderWarnings, envOlder...), warnings...)
	problems = append(problems, envProblems...)
	envMapEntries(raw, environ)
	problems = append(problems, numberMaps(raw)...)
	cased := shapeKeys(raw)
	attrs, attrProblems := takeResourceAttributes(raw)
	problems = append(problems, attrProblems...)

	v := viper.New()
	for _, f := range schema() {
		if !f.Section && !f.Item && !f.IsMap() && f.Type != "list of string" {
			v.SetDefault(f.Path, f.Default)
		}
	}
	if err := v.MergeConfigMap(raw); err != nil {
		problems = append(problems, Problem{Path: "(file)", Message: err.Error()})
	}
	v.SetEnvPrefix(strings.TrimSuffix(EnvPrefix, "_"))
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "__"))
	v.AutomaticEnv()
	problems = append(problems, checkValues(v)...)
	cfg := &Config{}
	err := v.Unmarshal(cfg, viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		durationHook())))
	if err != nil {
		problems = append(problems, decodeProblems(err)...)
	} else {
		restoreShapeKeys(cfg, cased)
		cfg.Service.Telemetry.ResourceAttributes = attrs
		warnings = append(warnings, cfg.resolvePaths(path)...)
		// Report every problem at once: validation runs even when keys were
		// unknown or values malformed (those were replaced by their
		// defaults above).
		for _, o := range opts {
			o(cfg)
		}
		w, vp := cfg.Validate()
		warnings = append(warnings, w...)
		warnings = append(warnings, cfg.noEffectWarnings()...)
		problems = append(problems, vp...)
		problems = append(problems, cfg.fileProblems()...)
	}
	if len(problems) > 0 {
		return nil, nil, &Error{Source: src, Problems: problems}
	}
	return cfg, warnings, nil
}

func decodeProblems(err error) []Problem {
	var out []Problem
	var joined interface{ Unwrap() []error }
	errs := []error{err}
	if errors.As(err, &joined) {
		errs = joined.Unwrap()
	}
	for _, e := range errs {
		msg := e.Error()
		path := "(value)"
		if m := decodePath.FindStringSubmatch(msg); m != nil {
			path = m[1]
		}
		out = append(out, Problem{Path: path, Message: msg})
	}
	return out
}

var decodePath = regexp.MustCompile(`'([a-z0-9_.]+)'`)

var placeholder = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// dollarsBeforePlaceholder matches a run of $ and the {NAME} after it: the
// last $ of an odd run starts a placeholder, and each pair before it is the
// escape of one literal $.
var dollarsBeforePlaceholder = regexp.MustCompile(`(\$+)\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandPlaceholders replaces each ${NAME} in s with value(NAME), or
// leaves it as written when value reports false. $$ before {NAME} is the
// escape of a literal $, so $${NAME} is the text ${NAME} and $$${NAME} a $
// then NAME's value (Terraform's and Apache NiFi's rule). Every other $ is
// left alone, $$ included: a password such as pa$$word, a regular
// expression's $ or a Go replacement's $$ need no escape.
func expandPlaceholders(s string, value func(name string) (string, bool)) string {
	if !strings.Contains(s, "${") {
		return s
	}
	return dollarsBeforePlaceholder.ReplaceAllStringFunc(s, func(m string) string {
		sub := dollarsBeforePlaceholder.FindStringSubmatch(m)
		n, name := len(sub[1]), sub[2]
		literal := strings.Repeat("$", n/2)
		if n%2 == 0 {
			return literal + "{" + name + "}"
		}
		if val, ok := value(name); ok {
			return literal + val
		}
		return literal + "${" + name + "}"
	})
}

// interpolate replaces ${NAME} in every string value (in mappings and
// lists) with the environment variable NAME, and $${NAME} with the text
// ${NAME} (expandPlaceholders); an unset variable is a problem. A key
// marked verbatim (a transform's pattern and replacement, whose ${name}
// is a regexp group) is left as written. prefix is m's path as shown in
// problems ("orgs[0].sources"), schemaPrefix its path in the schema
// ("orgs[].sources").
func interpolate(m map[string]any, prefix, schemaPrefix string) []Problem {
	var problems []Problem
	for _, k := range slices.Sorted(maps.Keys(m)) {
		var p []Problem
		m[k], p = interpolateValue(m[k], join(prefix, k), join(schemaPrefix, k))
		problems = append(problems, p...)
	}
	return problems
}

func interpolateValue(v any, path, schemaPath string) (any, []Problem) {
	switch v := v.(type) {
	case string:
		if fieldsByPath()[schemaPath].Verbatim {
			return v, nil
		}
		var problems []Problem
		out := expandPlaceholders(v, func(name string) (string, bool) {
			val, ok := os.LookupEnv(name)
			if !ok {
				problems = append(problems, Problem{Path: path, Message: fmt.Sprintf("${%s} is not set in the environment (write $${%s} for the text ${%s})", name, name, name)})
			}
			return val, true
		})
		return out, problems
	case map[string]any:
		return v, interpolate(v, path, schemaPath)
	case []any:
		var problems []Problem
		for i := range v {
			var p []Problem
			v[i], p = interpolateValue(v[i], fmt.Sprintf("%s[%d]", path, i), schemaPath+"[]")
			problems = append(problems, p...)
		}
		return v, problems
	}
	return v, nil
}

// checkTree reports every key of m that the schema does not declare and
// every value whose shape cannot be its key's (a mapping for a number, a
// list for a section), and deletes them from m so that nothing later walks
// them. schemaPrefix is m's path in the schema ("[]" for list items),
// shown the path in problems ("[3]").
func checkTree(m map[string]any, schemaPrefix, shown string, sugg *suggester) []Problem {
	known := fieldsByPath()
	var problems []Problem
	add := func(path, format string, args ...any) {
		problems = append(problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		path, show := join(schemaPrefix, k), join(shown, k)
		f, ok := known[path]
		val := m[k]
		switch {
		case !ok:
			add(show, "unknown key%s", sugg.suggest(path, val))
			delete(m, k)
		case val == nil:
			delete(m, k) // "key:" with no value: the default applies
		case f.List:
			items, isList := val.([]any)
			if !isList {
				add(show, "must be a list, not %s", shapeOf(val))
				delete(m, k)
				continue
			}
			kept := items[:0]
			for i, it := range items {
				sub, isMap := it.(map[string]any)
				if !isMap {
					add(fmt.Sprintf("%s[%d]", show, i), "must be a mapping, not %s", shapeOf(it))
					continue
				}
				problems = append(problems, checkTree(sub, path+"[]", fmt.Sprintf("%s[%d]", show, i), sugg)...)
				kept = append(kept, sub)
			}
			m[k] = kept
		case f.Section:
			sub, isMap := val.(map[string]any)
			if !isMap {
				add(show, "must be a mapping, not %s", shapeOf(val))
				delete(m, k)
				continue
			}
			problems = append(problems, checkTree(sub, path, show, sugg)...)
		case f.IsMap():
			sub, isMap := val.(map[string]any)
			if !isMap {
				add(show, "must be a mapping of names to %ss, not %s", strings.TrimPrefix(f.Type, "map of "), shapeOf(val))
				delete(m, k)
				continue
			}
			for _, name := range slices.Sorted(maps.Keys(sub)) {
				if !scalar(sub[name]) {
					add(show+"."+name, "must be a %s, not %s", strings.TrimPrefix(f.Type, "map of "), shapeOf(sub[name]))
					delete(sub, name)
				}
			}
		case f.Type == "list of string":
			items, isList := val.([]any)
			if !isList {
				if !scalar(val) {
					add(show, "must be a list of strings, not %s", shapeOf(val))
					delete(m, k)
				}
				continue
			}
			for i, it := range items {
				if !scalar(it) {
					add(fmt.Sprintf("%s[%d]", show, i), "must be a string, not %s", shapeOf(it))
					delete(m, k)
					break
				}
			}
		case !scalar(val):
			add(show, "must be %s, not %s", typeWithArticle(f), shapeOf(val))
			delete(m, k)
		}
	}
	return problems
}

// olderHint ends the WARN of each kind of note on the older layout.
var olderHint = map[string]string{
	NoteRenamed:   ", read as it; rename it (sf2loki config migrate rewrites the file)",
	NoteConverted: " (sf2loki config migrate rewrites the file)",
	NoteDropped:   " (sf2loki config migrate rewrites the file)",
	NoteDiffers:   "",
}

// enumBool writes a YAML boolean given to an enumeration key (big_object:
// false) as the word it is: decoded into a string it would become "0".
func enumBool(m map[string]any, rel string) {
	parent, name := parentOf(m, rel)
	if b, ok := parent[name].(bool); ok {
		parent[name] = strconv.FormatBool(b)
	}
}

// checkItems checks the values of list items (which the environment
// cannot set), nested sections and nested lists included, and fills in
// their defaults. A malformed value is a problem and is replaced by its
// default, so that validation still runs.
func checkItems(raw map[string]any) []Problem {
	var problems []Problem
	for _, list := range levelFields()[""] {
		if list.List {
			items, _ := lookup(raw, list.Path).([]any)
			problems = append(problems, checkListItems(items, list.Path, list.Path)...)
		}
	}
	return problems
}

// checkListItems checks the items of the list whose schema path is list,
// shown in problems as shown.
func checkListItems(items []any, list, shown string) []Problem {
	var problems []Problem
	for i, it := range items {
		item := it.(map[string]any) // checkTree kept only mappings
		at := fmt.Sprintf("%s[%d]", shown, i)
		for _, f := range levelFields()[list] {
			rel := f.rel()
			if len(f.Enum) > 0 {
				enumBool(item, rel)
			}
			switch {
			case f.List:
				sub, _ := lookup(item, rel).([]any)
				problems = append(problems, checkListItems(sub, f.Path, at+"."+rel)...)
				continue
			case f.Section || f.IsMap() || f.Type == "list of string":
				continue // checkTree checked their shape
			}
			parent, name := parentOf(item, rel)
			if val, set := parent[name]; set {
				if msg := checkScalar(f, val); msg != "" {
					problems = append(problems, Problem{Path: at + "." + rel, Message: msg})
					delete(parent, name)
				}
			}
			if _, set := parent[name]; !set && f.Default != "" {
				parent[name] = f.Default
			}
		}
	}
	return problems
}

// parentOf returns the mapping of m that holds the dotted path's last key,
// creating the sections on the way (checkTree left only mappings there),
// and that key.
func parentOf(m map[string]any, path string) (map[string]any, string) {
	parts := strings.Split(path, ".")
	for _, part := range parts[:len(parts)-1] {
		next, ok := m[part].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[part] = next
		}
		m = next
	}
	return m, parts[len(parts)-1]
}

// lookup returns the value at a dotted path of raw, or nil.
func lookup(raw map[string]any, path string) any {
	var cur any = raw
	for part := range strings.SplitSeq(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
}

// checkValues checks every scalar key's value, from the file or the
// environment, against its type. A malformed value is a problem and is
// replaced by the key's default, so that decoding and validation still
// run and report everything else.
func checkValues(v *viper.Viper) []Problem {
	var problems []Problem
	for _, f := range schema() {
		if f.Section || f.Item || f.IsMap() || f.Type == "list of string" {
			continue
		}
		msg := checkScalar(f, v.Get(f.Path))
		if msg == "" {
			continue
		}
		if name := envName(f.Path); os.Getenv(name) != "" {
			msg += " (from " + name + ")"
		}
		problems = append(problems, Problem{Path: f.Path, Message: msg})
		v.Set(f.Path, f.Default)
	}
	return problems
}

// envName is the environment variable that overrides path.
func envName(path string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "__"))
}

// checkScalar says what is wrong with val as a value of f, or "".
func checkScalar(f Field, val any) string {
	if val == nil {
		return ""
	}
	if !scalar(val) {
		return fmt.Sprintf("must be %s, not %s", typeWithArticle(f), shapeOf(val))
	}
	switch f.Type {
	case "duration":
		return checkDuration(val)
	case "int":
		if _, ok := toInt(val); !ok {
			return fmt.Sprintf("%v is not a whole number%s", val, rangeHint(f))
		}
	case "bool":
		switch b := val.(type) {
		case bool:
		case string:
			if _, err := strconv.ParseBool(strings.TrimSpace(b)); err != nil {
				return fmt.Sprintf("%q is not true or false", b)
			}
		default:
			return fmt.Sprintf("%v is not true or false", val)
		}
	}
	return ""
}

// checkDuration accepts a duration with a unit, or a bare 0. A bare number
// would be read as nanoseconds: 30 is almost certainly meant as 30s.
func checkDuration(val any) string {
	var s string
	switch d := val.(type) {
	case time.Duration:
		return ""
	case string:
		s = strings.TrimSpace(d)
		if _, err := ParseDuration(s); err == nil {
			return ""
		}
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			return fmt.Sprintf("%q is not a duration; write it like 30s, 1m30s, 500ms or 1d", d)
		}
	case int, int64, uint64, float64:
		s = fmt.Sprint(d)
		if f, _ := strconv.ParseFloat(s, 64); f == 0 {
			return ""
		}
	default:
		return fmt.Sprintf("%v is not a duration; write it like 30s, 1m30s, 500ms or 1d", val)
	}
	return fmt.Sprintf("%s has no unit; write %ss (or ms, m, h, d)", s, s)
}

// toInt converts a decoded YAML or environment value to an int, if it is a
// whole number that fits.
func toInt(val any) (int64, bool) {
	switch n := val.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case uint64:
		return int64(n), n <= math.MaxInt64
	case float64:
		return int64(n), n == math.Trunc(n) && n >= math.MinInt64 && n < math.MaxInt64
	case string:
		i, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
		return i, err == nil
	}
	return 0, false
}

// scalar reports whether v is a single value: not a mapping, not a list.
func scalar(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return false
	}
	return true
}

func shapeOf(v any) string {
	switch v := v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", v)
	}
	return fmt.Sprintf("%v", v)
}

func typeWithArticle(f Field) string {
	switch f.Type {
	case "duration":
		return "a duration like 30s"
	case "int":
		return "a whole number"
	case "bool":
		return "true or false"
	case "enum":
		return "one of " + strings.Join(f.Enum, ", ")
	}
	return "a string"
}

// checkEnv reports SF2LOKI_ variables that are meant as overrides but name
// no key. A variable is an override when its name holds the "__" level
// separator or names a top-level key exactly; any other SF2LOKI_ variable
// is not sf2loki's (Kubernetes injects SF2LOKI_SERVICE_HOST,
// SF2LOKI_PORT_8080_TCP, … for a Service named sf2loki) and is ignored,
// with a warning when it looks like a key written with "_" for "__".
func checkEnv(environ []string, sugg *suggester) (problems []Problem, warnings []string) {
	known := fieldsByPath()
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		rest, ok := strings.CutPrefix(name, EnvPrefix)
		if !ok {
			continue
		}
		path := strings.ToLower(strings.ReplaceAll(rest, "__", "."))
		f, isKey := known[path]
		if isKey && f.Item {
			isKey = false
		}
		switch {
		case (isKey || strings.Contains(rest, "__")) && rest != strings.ToUpper(rest):
			problems = append(problems, Problem{Path: path, Message: fmt.Sprintf(
				"environment variable %s is read only in upper case: write %s", name, EnvPrefix+strings.ToUpper(rest))})
		case isKey && f.List:
			problems = append(problems, Problem{Path: path, Message: fmt.Sprintf(
				"environment variable %s names the list %s, which only the configuration file can set", name, path)})
		case isKey && f.Section:
			problems = append(problems, Problem{Path: path, Message: fmt.Sprintf(
				"environment variable %s names the section %s, not a key; set its keys, e.g. %s", name, path, envName(firstKey(path)))})
		case isKey:
		case !strings.Contains(rest, "__"):
			if k, ok := squashedKeys()[squash(rest)]; ok {
				warnings = append(warnings, fmt.Sprintf("environment variable %s is ignored: levels are separated by __; did you mean %s?", name, envName(k)))
			}
		default:
			if _, _, entry := mapEntry(path); entry {
				continue
			}
			problems = append(problems, Problem{Path: path, Message: fmt.Sprintf("environment variable %s names an unknown key%s", name, sugg.suggest(path, ""))})
		}
	}
	return problems, warnings
}

// firstKey is the first key under section path.
func firstKey(path string) string {
	for _, f := range schema() {
		if !f.Section && !f.Item && strings.HasPrefix(f.Path, path+".") {
			return f.Path
		}
	}
	return path
}

// squash drops case, "_" and "." so that a key written with the wrong
// separators still matches.
func squash(s string) string {
	return strings.NewReplacer("_", "", ".", "").Replace(strings.ToLower(s))
}

var squashedKeys = sync.OnceValue(func() map[string]string {
	m := map[string]string{}
	for _, k := range Keys() {
		m[squash(k)] = k
	}
	return m
})

// mapEntry splits an environment path like sink.loki.labels.cluster into
// a map key's path and the entry name, when it names an entry of a map.
func mapEntry(path string) (field, key string, ok bool) {
	for _, f := range schema() {
		if f.IsMap() && !f.Item {
			if k, found := strings.CutPrefix(path, f.Path+"."); found && k != "" {
				return f.Path, k, true
			}
		}
	}
	return "", "", false
}

// envMapEntries adds SF2LOKI_<MAP>__<ENTRY>=value variables to the maps in
// raw (entry names are lower-cased: environment names are upper case), so
// labels and headers can be set on platforms configured by environment
// alone. The environment wins over the file, as for every key.
func envMapEntries(raw map[string]any, environ []string) {
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		rest, ok := strings.CutPrefix(name, EnvPrefix)
		if !ok || !strings.Contains(rest, "__") {
			continue
		}
		path := strings.ToLower(strings.ReplaceAll(rest, "__", "."))
		field, key, ok := mapEntry(path)
		if !ok {
			continue
		}
		m := raw
		for part := range strings.SplitSeq(field, ".") {
			next, ok := m[part].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[part] = next
			}
			m = next
		}
		for k := range m { // the file's entry in another case: the environment wins
			if strings.EqualFold(k, key) {
				delete(m, k)
			}
		}
		m[key] = value
	}
}

// maxSuggestions bounds the did-you-mean searches of one load: a file of
// thousands of unknown keys is not a typo, and each search costs a pass
// over the schema.
const maxSuggestions = 100

// suggester names the known key closest to an unknown one, for the first
// maxSuggestions unknown keys.
type suggester struct{ left int }

// suggest names the known key closest to path, if one is close, among the
// keys that take a value of val's shape: a section or a map for a mapping
// (a misspelt section, salesfroce:), a list for a list, else a plain key;
// failing those, any key.
func (s *suggester) suggest(path string, val any) string {
	if s.left <= 0 {
		return ""
	}
	s.left--
	fits := func(f Field) bool { return !f.Section }
	switch val.(type) {
	case map[string]any:
		fits = func(f Field) bool { return f.Section && !f.List || f.IsMap() }
	case []any:
		fits = func(f Field) bool { return f.List || f.Type == "list of string" }
	}
	best := closest(path, fits)
	if best == "" {
		best = closest(path, func(Field) bool { return true })
	}
	if best != "" {
		return fmt.Sprintf("; did you mean %s?", best)
	}
	return ""
}

// closest is the key among those fits accepts nearest to path, within an
// edit distance of a quarter of its length (at least 2); "" when none is.
func closest(path string, fits func(Field) bool) string {
	limit := max(2, len(path)/4)
	best, bestD := "", limit+1
	for _, f := range schema() {
		if !fits(f) {
			continue
		}
		// The distance is at least the difference in length: skip keys
		// that cannot be close (and a megabyte-long key costs nothing).
		if d := len(path) - len(f.Path); d > limit || -d > limit {
			continue
		}
		if d := distance(path, f.Path); d < bestD {
			best, bestD = f.Path, d
		}
	}
	return best
}

// distance is the Levenshtein edit distance.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}
