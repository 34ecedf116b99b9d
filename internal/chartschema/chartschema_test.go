package chartschema

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestMerge(t *testing.T) {
	cfg := `{"$schema": "https://json-schema.org/draft/2020-12/schema", "$comment": "generated", "title": "t",
		"description": "d", "type": ["object", "null"], "additionalProperties": false,
		"properties": {"orgs": {"type": "array", "items": {"$ref": "#/$defs/org"}}, "note": {"type": "string", "pattern": "<&>"}},
		"$defs": {"org": {"type": "object", "properties": {"sources": {"$ref": "#/$defs/sources"}}}, "sources": {"type": "object"}}}`
	chart := `{"$schema": "http://json-schema.org/draft-07/schema#", "additionalProperties": false,
		"properties": {"replicaCount": {"type": "integer"}, "config": {"type": "object"}},
		"definitions": {"stale": {}}}`
	out, err := Merge([]byte(cfg), []byte(chart))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got["$schema"] != "http://json-schema.org/draft-07/schema#" {
		t.Errorf("$schema %v: the chart's draft-07 must stay", got["$schema"])
	}
	c := got["properties"].(map[string]any)["config"].(map[string]any)
	for _, k := range []string{"$schema", "$comment", "$defs", "title"} {
		if _, ok := c[k]; ok {
			t.Errorf("config keeps %s", k)
		}
	}
	if c["type"] != "object" || c["description"] != configDescription {
		t.Errorf("config type %v, description %v", c["type"], c["description"])
	}
	s := string(out)
	for _, want := range []string{`"$ref": "#/definitions/org"`, `"$ref": "#/definitions/sources"`, `"pattern": "<&>"`, `"replicaCount"`} {
		if !strings.Contains(s, want) {
			t.Errorf("the merged schema has no %s:\n%s", want, s)
		}
	}
	if strings.Contains(s, "$defs") || strings.Contains(s, "stale") {
		t.Errorf("the merged schema keeps $defs or old definitions:\n%s", s)
	}
	again, err := Merge([]byte(cfg), out)
	if err != nil || string(again) != s {
		t.Errorf("merging twice changes the file (%v)", err)
	}
}

func TestMergeRefusesForeignRefs(t *testing.T) {
	cfg := `{"properties": {"a": {"$ref": "https://example.com/a.json"}}}`
	if _, err := Merge([]byte(cfg), []byte(`{"properties": {}}`)); err == nil || !strings.Contains(err.Error(), "example.com") {
		t.Errorf("a $ref outside $defs: %v", err)
	}
	if _, err := Merge([]byte(`{}`), []byte(`{}`)); err == nil {
		t.Error("a chart schema without properties was accepted")
	}
}
