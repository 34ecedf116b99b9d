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
	// List marks a section that is a list of objects; Item marks a field of
	// such an object (its Path holds "[]", its index is within the item).
	List, Item bool
	kind       reflect.Kind
	index      []int
}

// Schema returns every section and key in declaration order.
func Schema() []Field {
	var out []Field
	walk(reflect.TypeFor[Config](), "", 0, nil, nil, false, &out)
	return out
}

func walk(t reflect.Type, prefix string, depth int, index []int, overrides map[string]string, item bool, out *[]Field) {
	for i := range t.NumField() {
		sf := t.Field(i)
		idx := append(append([]int(nil), index...), i)
		name := strings.Split(sf.Tag.Get("yaml"), ",")[0]
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
			*out = append(*out, Field{Path: path, Doc: sf.Tag.Get("doc"), Section: true, Item: item, Depth: depth, index: idx})
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
	for _, f := range Schema() {
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

// applyItemDefaults fills the zero fields of every list item with their
// defaults (the decoder applies defaults to keys, not to list items).
func applyItemDefaults(c *Config) {
	v := reflect.ValueOf(c).Elem()
	fields := Schema()
	for _, list := range fields {
		if !list.List || list.Item {
			continue
		}
		items := v.FieldByIndex(list.index)
		for i := range items.Len() {
			item := items.Index(i)
			for _, f := range fields {
				if f.Item && !f.Section && f.Default != "" && strings.HasPrefix(f.Path, list.Path+"[].") &&
					!strings.Contains(strings.TrimPrefix(f.Path, list.Path+"[]."), ".") && item.FieldByIndex(f.index).IsZero() {
					setDefault(item.FieldByIndex(f.index), f)
				}
			}
		}
	}
}
