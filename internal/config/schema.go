package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Field is one configuration key as the schema describes it.
type Field struct {
	// Path is the dotted key, e.g. coordinate.s3_lease.bucket.
	Path    string
	Type    string
	Default string
	Example string
	Enum    []string
	Doc     string
	// Section is true for a nested section (its fields follow it).
	Section bool
	// Depth is the nesting level (0 for top-level sections).
	Depth int
	// List marks a section that is a list of objects; Item marks a field of
	// such an object (its Path holds "[]", its index is within the item).
	List, Item bool
	// Min and Max bound a number or a duration (as written in the tags,
	// e.g. "2s", "100"); ZeroAllowed admits 0 below Min (it means "off").
	Min, Max    string
	ZeroAllowed bool
	// SameAs names the top-level section a section mirrors key for key
	// (orgs[].salesforce is salesforce): the reference refers to it
	// instead of repeating its keys.
	SameAs string
	// Format is what a string must look like: "url" (http or https with a
	// host), "hostport" (host:port), "listen" (a listen address, [host]:port).
	Format string
	// Secret marks a key whose value is a secret (the secret:"true" tag; a
	// map's values): shown redacted wherever the configuration is printed.
	Secret bool
	// Verbatim marks a key the loader never interpolates (the
	// verbatim:"true" tag): a transform's pattern and replacement, where
	// ${name} is regexp syntax, not an environment variable.
	Verbatim bool
	kind     reflect.Kind
	index    []int
	// min and max are Min and Max as numbers (nanoseconds for durations).
	min, max       int64
	hasMin, hasMax bool
}

// schema is computed once: it depends only on the Config type.
var schema = sync.OnceValue(func() []Field {
	var out []Field
	walk(reflect.TypeFor[Config](), "", 0, nil, nil, false, &out)
	return out
})

// fieldsByPath indexes the schema by dotted path (items by their "[]" path).
var fieldsByPath = sync.OnceValue(func() map[string]Field {
	m := make(map[string]Field, len(schema()))
	for _, f := range schema() {
		m[f.Path] = f
	}
	return m
})

// levelFields indexes the fields of each level of the configuration: ""
// for the top level (every field outside a list), and a list's path for
// the fields of one of its items (its nested sections' fields included,
// its nested lists' fields not: they are a level of their own).
var levelFields = sync.OnceValue(func() map[string][]Field {
	m := map[string][]Field{}
	for _, f := range schema() {
		level := ""
		if i := strings.LastIndex(f.Path, "[]."); i >= 0 {
			level = f.Path[:i]
		}
		m[level] = append(m[level], f)
	}
	return m
})

// rel is f's path within its level (the part after the last "[].").
func (f Field) rel() string {
	if i := strings.LastIndex(f.Path, "[]."); i >= 0 {
		return f.Path[i+3:]
	}
	return f.Path
}

// Schema returns every section and key in declaration order.
func Schema() []Field {
	return slices.Clone(schema())
}

func walk(t reflect.Type, prefix string, depth int, index []int, overrides map[string]string, item bool, out *[]Field) {
	for i := range t.NumField() {
		sf := t.Field(i)
		idx := append(append([]int(nil), index...), i)
		name := strings.Split(sf.Tag.Get("yaml"), ",")[0]
		if name == "-" {
			continue // not configuration (e.g. Config.ShardName)
		}
		if sf.Anonymous {
			walk(sf.Type, prefix, depth, idx, overrides, item, out)
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		if sf.Type.Kind() == reflect.Slice && sf.Type.Elem().Kind() == reflect.Struct {
			*out = append(*out, Field{Path: path, Doc: sf.Tag.Get("doc"), Section: true, List: true, Item: item, Depth: depth,
				index: idx, Type: "list of object"})
			walk(sf.Type.Elem(), path+"[]", depth+1, nil, nil, true, out)
			continue
		}
		if sf.Type.Kind() == reflect.Struct && sf.Type != reflect.TypeFor[time.Duration]() {
			*out = append(*out, Field{Path: path, Doc: sf.Tag.Get("doc"), Section: true, Item: item, Depth: depth, index: idx,
				SameAs: sf.Tag.Get("sameas")})
			walk(sf.Type, path, depth+1, idx, parseOverrides(sf.Tag.Get("defaults")), item, out)
			continue
		}
		f := Field{Path: path, Doc: sf.Tag.Get("doc"), Default: sf.Tag.Get("default"), Example: sf.Tag.Get("example"),
			Depth: depth, kind: sf.Type.Kind(), index: idx, Type: typeName(sf.Type), Item: item}
		if d, ok := overrides[name]; ok {
			f.Default = d
		}
		if e := sf.Tag.Get("enum"); e != "" {
			f.Enum = strings.Split(e, ",")
			f.Type = "enum"
		}
		f.Min, f.Max, f.Format = sf.Tag.Get("min"), sf.Tag.Get("max"), sf.Tag.Get("format")
		f.ZeroAllowed = sf.Tag.Get("zero") == "allowed"
		f.Secret = sf.Tag.Get("secret") == "true"
		f.Verbatim = sf.Tag.Get("verbatim") == "true"
		f.min, f.hasMin = bound(f, f.Min)
		f.max, f.hasMax = bound(f, f.Max)
		*out = append(*out, f)
	}
}

// bound parses a min or max tag of f (a duration for a duration key, else
// an integer); a malformed tag is a programming error.
func bound(f Field, tag string) (int64, bool) {
	if tag == "" {
		return 0, false
	}
	if f.Type == "duration" {
		d, err := time.ParseDuration(tag)
		if err != nil {
			panic(fmt.Sprintf("config: bound of %s: %v", f.Path, err))
		}
		return int64(d), true
	}
	n, err := strconv.ParseInt(tag, 10, 64)
	if err != nil {
		panic(fmt.Sprintf("config: bound of %s: %v", f.Path, err))
	}
	return n, true
}

func parseOverrides(tag string) map[string]string {
	m := map[string]string{}
	for kv := range strings.SplitSeq(tag, ";") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

func typeName(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "duration"
	case t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Float64:
		return "map of number"
	case t.Kind() == reflect.Map:
		return "map of string"
	case t.Kind() == reflect.Slice:
		return "list of string"
	}
	return t.Kind().String()
}

// Keys returns every leaf key's dotted path.
func Keys() []string {
	var keys []string
	for _, f := range schema() {
		if !f.Section && !f.Item {
			keys = append(keys, f.Path)
		}
	}
	return keys
}

// Defaults returns the configuration with every default applied.
func Defaults() *Config {
	c := &Config{}
	v := reflect.ValueOf(c).Elem()
	for _, f := range schema() {
		if f.Section || f.Item || f.Default == "" {
			continue
		}
		setDefault(v.FieldByIndex(f.index), f)
	}
	return c
}

// setDefault stores f's default in fv.
func setDefault(fv reflect.Value, f Field) {
	switch f.kind {
	case reflect.String:
		fv.SetString(f.Default)
	case reflect.Int:
		n, err := strconv.Atoi(f.Default)
		if err != nil {
			panic(fmt.Sprintf("config: default of %s: %v", f.Path, err))
		}
		fv.SetInt(int64(n))
	case reflect.Int64:
		d, err := time.ParseDuration(f.Default)
		if err != nil {
			panic(fmt.Sprintf("config: default of %s: %v", f.Path, err))
		}
		fv.SetInt(int64(d))
	case reflect.Bool:
		fv.SetBool(f.Default == "true")
	}
}

// Limits describes what values f accepts beyond its type (its range or
// format), for the reference and the example; "" when nothing more.
func (f Field) Limits() string {
	var parts []string
	if r := f.rangeText(); r != "" {
		parts = append(parts, "Allowed: "+r+".")
	}
	switch f.Format {
	case "url":
		parts = append(parts, "An http:// or https:// URL with a host.")
	case "hostport":
		parts = append(parts, "Written host:port.")
	case "listen":
		parts = append(parts, "Written [host]:port.")
	}
	return strings.Join(parts, " ")
}

// Description is the key's documentation followed by its limits.
func (f Field) Description() string {
	if l := f.Limits(); l != "" {
		return f.Doc + " " + l
	}
	return f.Doc
}

// rangeText is f's range in words, e.g. "2s to 1h" or "0, or 1m to 24h".
func (f Field) rangeText() string {
	var r string
	switch {
	case f.hasMin && f.hasMax:
		r = f.boundText(f.Min) + " to " + f.boundText(f.Max)
	case f.hasMin:
		r = "at least " + f.boundText(f.Min)
	case f.hasMax:
		r = "at most " + f.boundText(f.Max)
	default:
		return ""
	}
	if f.ZeroAllowed {
		r = "0, or " + r
	}
	return r
}

// boundText writes a bound as in its tag, byte sizes also in binary units.
func (f Field) boundText(tag string) string {
	n, err := strconv.ParseInt(tag, 10, 64)
	if err != nil || !strings.HasSuffix(f.Path, "bytes") || n < 1024 {
		return tag
	}
	for _, u := range []struct {
		name  string
		scale int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n%u.scale == 0 {
			return fmt.Sprintf("%s (%d %s)", tag, n/u.scale, u.name)
		}
	}
	return tag
}

// rangeHint is f's range in parentheses, for problems, or "".
func rangeHint(f Field) string {
	if r := f.rangeText(); r != "" {
		return " (allowed: " + r + ")"
	}
	return ""
}

// IsMap reports whether f is a map (of strings or of numbers).
func (f Field) IsMap() bool { return strings.HasPrefix(f.Type, "map of ") }
