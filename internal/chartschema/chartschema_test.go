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

// The chart's copy takes a number for a string and a ${VAR} for a number
// or a boolean, as sf2loki's loader does; enumerations and patterned
// numbers stay as they are.
func TestMergeLoosensToWhatTheLoaderAccepts(t *testing.T) {
	cfg := `{"properties": {
		"tenant": {"type": "string"},
		"rate": {"type": "number", "minimum": 0},
		"on": {"type": "boolean"},
		"mode": {"type": "string", "enum": ["a", "b"]},
		"size": {"type": ["string", "number"], "pattern": "^[0-9]+$"},
		"timeout": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
		"url": {"type": "string", "format": "uri"}}}`
	out, err := Merge([]byte(cfg), []byte(`{"properties": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Properties struct {
			Config struct {
				Properties map[string]map[string]any `json:"properties"`
			} `json:"config"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	p := got.Properties.Config.Properties
	for name, want := range map[string]string{
		"tenant": `["string","number"]`, "rate": `["number","string"]`, "on": `["boolean","string"]`,
		"mode": `"string"`, "size": `["string","number"]`,
		// A pattern or a format holds only for strings: widened, a bare
		// number (a duration without a unit) would pass.
		"timeout": `"string"`, "url": `"string"`,
	} {
		b, _ := json.Marshal(p[name]["type"])
		if string(b) != want {
			t.Errorf("%s: type %s, want %s", name, b, want)
		}
	}
	if p["rate"]["pattern"] != envReference || p["rate"]["minimum"] != float64(0) || p["on"]["pattern"] != envReference {
		t.Errorf("rate %v, on %v: want the ${VAR} pattern beside the minimum", p["rate"], p["on"])
	}
	if p["size"]["pattern"] != "^[0-9]+$" || p["tenant"]["pattern"] != nil {
		t.Errorf("size %v, tenant %v: patterns changed", p["size"], p["tenant"])
	}
}
