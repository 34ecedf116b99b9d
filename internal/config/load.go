package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
	"gopkg.in/yaml.v3"

	"github.com/sf2loki/sf2loki/internal/domain"
)

// EnvPrefix starts every environment variable that overrides a key:
// SF2LOKI_ + the dotted path upper-cased with "__" between levels, e.g.
// SF2LOKI_COORDINATE__S3_LEASE__BUCKET.
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
// listing every problem.
func Load(path string) (*Config, []string, error) {
	var problems []Problem
	raw := map[string]any{}
	src := "configuration"
	if path != "" {
		src = path
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, &Error{Source: src, Problems: []Problem{{Path: "(file)", Message: fmt.Sprintf("cannot read: %v", err)}}}
		}
		var doc any
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return nil, nil, &Error{Source: src, Problems: []Problem{{Path: "(file)", Message: fmt.Sprintf("not valid YAML: %v", err)}}}
		}
		switch d := doc.(type) {
		case nil:
		case map[string]any:
			raw = d
		default:
			return nil, nil, &Error{Source: src, Problems: []Problem{{Path: "(file)", Message: fmt.Sprintf("the top level must be a mapping, not %T", doc)}}}
		}
	}
	problems = append(problems, interpolate(raw, "")...)
	problems = append(problems, unknownKeys(raw, "")...)
	problems = append(problems, unknownEnv(os.Environ())...)
	envMapEntries(raw, os.Environ())

	v := viper.New()
	for _, f := range Schema() {
		if !f.Section && !f.Item && f.Type != "map of string" && f.Type != "list of string" {
			v.SetDefault(f.Path, f.Default)
		}
	}
	if err := v.MergeConfigMap(raw); err != nil {
		problems = append(problems, Problem{Path: "(file)", Message: err.Error()})
	}
	v.SetEnvPrefix(strings.TrimSuffix(EnvPrefix, "_"))
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "__"))
	v.AutomaticEnv()
	cfg := &Config{}
	err := v.Unmarshal(cfg, viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		mapstructure.StringToTimeDurationHookFunc())))
	var warnings []string
	if err != nil {
		problems = append(problems, decodeProblems(err)...)
	} else {
		applyItemDefaults(cfg)
		// Report every problem at once: validation runs even when keys were
		// unknown.
		var vp []Problem
		warnings, vp = cfg.Validate()
		problems = append(problems, vp...)
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

// interpolate replaces ${NAME} in every string value with the environment
// variable NAME; an unset variable is a problem.
func interpolate(m map[string]any, prefix string) []Problem {
	var problems []Problem
	for _, k := range slices.Sorted(maps.Keys(m)) {
		path := join(prefix, k)
		switch v := m[k].(type) {
		case string:
			m[k] = placeholder.ReplaceAllStringFunc(v, func(s string) string {
				name := placeholder.FindStringSubmatch(s)[1]
				val, ok := os.LookupEnv(name)
				if !ok {
					problems = append(problems, Problem{Path: path, Message: fmt.Sprintf("${%s} is not set in the environment", name)})
				}
				return val
			})
		case map[string]any:
			problems = append(problems, interpolate(v, path)...)
		}
	}
	return problems
}

// unknownKeys reports every key of m that the schema does not declare.
func unknownKeys(m map[string]any, prefix string) []Problem {
	known := map[string]Field{}
	for _, f := range Schema() {
		known[f.Path] = f
	}
	var problems []Problem
	for _, k := range slices.Sorted(maps.Keys(m)) {
		path := join(prefix, k)
		f, ok := known[path]
		switch {
		case !ok:
			problems = append(problems, Problem{Path: path, Message: "unknown key" + suggest(path)})
		case f.List:
			items, isList := m[k].([]any)
			if !isList {
				if m[k] != nil {
					problems = append(problems, Problem{Path: path, Message: fmt.Sprintf("must be a list, not %T", m[k])})
				}
				continue
			}
			for i, it := range items {
				sub, isMap := it.(map[string]any)
				if !isMap {
					problems = append(problems, Problem{Path: fmt.Sprintf("%s[%d]", path, i), Message: fmt.Sprintf("must be a mapping, not %T", it)})
					continue
				}
				for _, p := range unknownKeys(sub, path+"[]") {
					p.Path = strings.Replace(p.Path, path+"[]", fmt.Sprintf("%s[%d]", path, i), 1)
					problems = append(problems, p)
				}
			}
		case f.Section:
			sub, isMap := m[k].(map[string]any)
			if !isMap {
				if m[k] != nil {
					problems = append(problems, Problem{Path: path, Message: fmt.Sprintf("must be a mapping, not %T", m[k])})
				}
				continue
			}
			problems = append(problems, unknownKeys(sub, path)...)
		}
	}
	return problems
}

// unknownEnv reports SF2LOKI_ variables that name no key.
func unknownEnv(environ []string) []Problem {
	keys := Keys()
	var problems []Problem
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		path := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, EnvPrefix), "__", "."))
		if _, _, ok := mapEntry(path); ok || slices.Contains(keys, path) {
			continue
		}
		problems = append(problems, Problem{Path: path, Message: fmt.Sprintf("environment variable %s names an unknown key%s", name, suggest(path))})
	}
	return problems
}

// mapEntry splits an environment path like sink.loki.labels.cluster into
// a map key's path and the entry name, when it names an entry of a map.
func mapEntry(path string) (field, key string, ok bool) {
	for _, f := range Schema() {
		if f.Type == "map of string" && !f.Item {
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
		if !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		path := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, EnvPrefix), "__", "."))
		field, key, ok := mapEntry(path)
		if !ok {
			continue
		}
		m := raw
		for _, part := range strings.Split(field, ".") {
			next, ok := m[part].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[part] = next
			}
			m = next
		}
		m[key] = value
	}
}

// suggest names the known key closest to path, if one is close.
func suggest(path string) string {
	best, bestD := "", 1<<30
	for _, f := range Schema() {
		if f.Section {
			continue
		}
		if d := distance(path, f.Path); d < bestD {
			best, bestD = f.Path, d
		}
	}
	if bestD <= max(2, len(path)/4) {
		return fmt.Sprintf("; did you mean %s?", best)
	}
	return ""
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
