package config

import (
	"maps"
	"math"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Redacted is what a secret's value is shown as when it is set.
const Redacted = "<redacted>"

// Document returns c as a YAML document: every key in declaration order,
// defaults included, durations in their shortest form (1h, 1h30m, 500ms),
// every secret that is set (see Field.Secret) as <redacted>, and the
// password of a URL as <redacted>. It loads again as the same
// configuration, secrets aside.
func (c *Config) Document() *yaml.Node {
	return &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{document(reflect.ValueOf(c).Elem(), "")}}
}

// document renders one level (see levelFields) of v, a Config or a list
// item.
func document(v reflect.Value, level string) *yaml.Node {
	root := &yaml.Node{Kind: yaml.MappingNode}
	sections := map[string]*yaml.Node{"": root}
	for _, f := range levelFields()[level] {
		rel := f.rel()
		parent, name := "", rel
		if i := strings.LastIndex(rel, "."); i >= 0 {
			parent, name = rel[:i], rel[i+1:]
		}
		var n *yaml.Node
		switch {
		case f.List:
			n = &yaml.Node{Kind: yaml.SequenceNode}
			items := v.FieldByIndex(f.index)
			for i := range items.Len() {
				n.Content = append(n.Content, document(items.Index(i), f.Path))
			}
			if len(n.Content) == 0 {
				n.Style = yaml.FlowStyle
			}
		case f.Section:
			n = &yaml.Node{Kind: yaml.MappingNode}
			sections[rel] = n
		default:
			n = leafNode(f, v.FieldByIndex(f.index))
		}
		p := sections[parent]
		p.Content = append(p.Content, str(name), n)
	}
	return root
}

// leafNode renders one key's value.
func leafNode(f Field, v reflect.Value) *yaml.Node {
	str := str
	if !f.Verbatim { // the loader reads "$${X}" as the text "${X}"
		str = func(s string) *yaml.Node { return yamlScalar("!!str", escapePlaceholders(s)) }
	}
	switch {
	case f.Type == "duration":
		return yamlScalar("!!str", FormatDuration(time.Duration(v.Int())))
	case f.IsMap():
		n := &yaml.Node{Kind: yaml.MappingNode}
		for _, k := range slices.Sorted(maps.Keys(mapKeys(v))) {
			e := v.MapIndex(reflect.ValueOf(k))
			val := str(Redacted)
			switch {
			case f.Secret:
			case e.Kind() == reflect.Float64:
				val = yamlScalar("!!float", formatFloat(e.Float()))
			default:
				val = str(e.String())
			}
			n.Content = append(n.Content, str(k), val)
		}
		if len(n.Content) == 0 {
			n.Style = yaml.FlowStyle
		}
		return n
	case f.Type == "list of string":
		n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for i := range v.Len() {
			n.Content = append(n.Content, str(v.Index(i).String()))
		}
		return n
	case v.Kind() == reflect.Bool:
		return yamlScalar("!!bool", strconv.FormatBool(v.Bool()))
	case v.CanInt():
		return yamlScalar("!!int", strconv.FormatInt(v.Int(), 10))
	case f.Secret && v.String() != "":
		return str(Redacted)
	case f.Format == "url":
		return str(redactURL(v.String()))
	}
	return str(v.String())
}

// escapePlaceholders writes s so that the loader reads it back as s:
// every run of $ before a {NAME} doubled (expandPlaceholders reads each
// pair as one $).
func escapePlaceholders(s string) string {
	return dollarsBeforePlaceholder.ReplaceAllStringFunc(s, func(m string) string {
		i := strings.IndexByte(m, '{')
		return m[:i] + m[:i] + m[i:]
	})
}

// mapKeys is the set of a map's keys.
func mapKeys(v reflect.Value) map[string]bool {
	keys := make(map[string]bool, v.Len())
	for _, k := range v.MapKeys() {
		keys[k.String()] = true
	}
	return keys
}

// redactURL replaces the password of a URL, if it has one.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, has := u.User.Password(); !has {
		return s
	}
	u.User = url.User(u.User.Username())
	// The first @ ends the user information (a user name's own is escaped).
	return strings.Replace(u.String(), "@", ":"+Redacted+"@", 1)
}

// FormatDuration writes d in its shortest form: 1h rather than 1h0m0s,
// 2m30s, 500ms, 0s.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// formatFloat writes f so that YAML reads it back as a float (1.0, not 1).
func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return ".nan"
	case math.IsInf(f, 1):
		return ".inf"
	case math.IsInf(f, -1):
		return "-.inf"
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

func str(s string) *yaml.Node { return yamlScalar("!!str", s) }

func yamlScalar(tag, value string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
}
