package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
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
	kind  reflect.Kind
	index []int
}

// Schema returns every section and key in declaration order.
func Schema() []Field {
	var out []Field
	walk(reflect.TypeFor[Config](), "", 0, nil, nil, &out)
	return out
}

func walk(t reflect.Type, prefix string, depth int, index []int, overrides map[string]string, out *[]Field) {
	for i := range t.NumField() {
		sf := t.Field(i)
		idx := append(append([]int(nil), index...), i)
		name := strings.Split(sf.Tag.Get("yaml"), ",")[0]
		if sf.Anonymous {
			walk(sf.Type, prefix, depth, idx, overrides, out)
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		if sf.Type.Kind() == reflect.Struct && sf.Type != reflect.TypeFor[time.Duration]() {
			*out = append(*out, Field{Path: path, Doc: sf.Tag.Get("doc"), Section: true, Depth: depth, index: idx})
			walk(sf.Type, path, depth+1, idx, parseOverrides(sf.Tag.Get("defaults")), out)
			continue
		}
		f := Field{Path: path, Doc: sf.Tag.Get("doc"), Default: sf.Tag.Get("default"), Example: sf.Tag.Get("example"),
			Depth: depth, kind: sf.Type.Kind(), index: idx, Type: typeName(sf.Type)}
		if d, ok := overrides[name]; ok {
			f.Default = d
		}
		if e := sf.Tag.Get("enum"); e != "" {
			f.Enum = strings.Split(e, ",")
			f.Type = "enum"
		}
		*out = append(*out, f)
	}
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
	for _, f := range Schema() {
		if !f.Section {
			keys = append(keys, f.Path)
		}
	}
	return keys
}

// Defaults returns the configuration with every default applied.
func Defaults() *Config {
	c := &Config{}
	v := reflect.ValueOf(c).Elem()
	for _, f := range Schema() {
		if f.Section || f.Default == "" {
			continue
		}
		fv := v.FieldByIndex(f.index)
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
		}
	}
	return c
}
