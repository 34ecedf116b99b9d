package config

import (
	"errors"
	"fmt"
	"os"

	"gopkg.in/yaml.v3"
)

// parseOlderYAML decodes the first document of data into maps, lists and
// scalars, like yaml.Unmarshal into an any, but in time linear in the
// document: yaml.v3's decoder compares every key of a mapping with every
// other to find duplicates, which takes minutes on a mapping of 50,000
// keys. Duplicates are found here with a set. Mapping keys are strings
// (a key like 1 or true becomes "1" or "true"); merge keys (<<) merge as
// in yaml.v3: keys written in the mapping win, then earlier merged
// mappings.
//
// It first rewrites the older implementation's spellings (rewriteOlder),
// and returns the notes and the problems of the rewrite too.
func parseOlderYAML(data []byte) (any, []Note, []Problem, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, nil, err
	}
	notes, problems := rewriteOlder(&doc, len(data), os.Getenv)
	// Aliases may expand a document far beyond its size; a configuration
	// never needs more than a few times its size.
	c := &yamlConverter{left: 4*len(data) + 100_000}
	v, err := c.value(&doc)
	return v, notes, problems, err
}

var errAliasExpansion = errors.New("aliases expand the document too far")

type yamlConverter struct{ left int }

func (c *yamlConverter) value(n *yaml.Node) (any, error) {
	if c.left--; c.left < 0 {
		return nil, errAliasExpansion
	}
	switch n.Kind {
	case 0: // an empty file
		return nil, nil
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return c.value(n.Content[0])
	case yaml.AliasNode:
		return c.value(n.Alias)
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, err
		}
		return v, nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, it := range n.Content {
			v, err := c.value(it)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		return c.mapping(n)
	}
	return nil, fmt.Errorf("line %d: unexpected YAML node", n.Line)
}

func (c *yamlConverter) mapping(n *yaml.Node) (map[string]any, error) {
	out := make(map[string]any, len(n.Content)/2)
	lines := make(map[string]int, len(n.Content)/2)
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.AliasNode {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: a mapping key must be a plain value, not a mapping or a list", k.Line)
		}
		if k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if line, dup := lines[k.Value]; dup {
			return nil, fmt.Errorf("line %d: mapping key %q already defined at line %d", k.Line, k.Value, line)
		}
		lines[k.Value] = k.Line
		val, err := c.value(v)
		if err != nil {
			return nil, err
		}
		out[k.Value] = val
	}
	for _, m := range merges {
		srcs := []*yaml.Node{m}
		if r := resolveAlias(m); r.Kind == yaml.SequenceNode {
			srcs = r.Content
		}
		for _, src := range srcs {
			v, err := c.value(src)
			if err != nil {
				return nil, err
			}
			mm, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("line %d: << must merge a mapping or a list of mappings", src.Line)
			}
			for k, v := range mm {
				if _, set := out[k]; !set {
					out[k] = v
				}
			}
		}
	}
	return out, nil
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}
