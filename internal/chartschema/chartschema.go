// Package chartschema converts sf2loki's configuration schema (draft
// 2020-12, from `sf2loki config schema`) into the config value of the Helm
// chart's values.schema.json (draft-07, which every Helm 3 checks values
// against): $defs become the chart schema's definitions. It imports only
// the standard library.
//
// The chart's copy accepts what sf2loki's loader accepts and the stricter
// configuration schema does not: a number where a string is wanted
// (tenant_id: 12345, which YAML reads as a number and sf2loki as text),
// and a ${VAR} reference where a number or a boolean is wanted (expanded
// when sf2loki loads the file).
package chartschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// configDescription replaces the configuration schema's own description.
const configDescription = "The sf2loki configuration, rendered into config.yaml (docs/config-reference.md lists every key). " +
	"Generated from configs/sf2loki.schema.json by make chart-files: it checks key names, types and enumerations; " +
	"sf2loki check remains the verdict on the rules between keys."

// Merge returns the chart schema with its config property and definitions
// replaced by the converted configuration schema.
func Merge(cfgData, chartData []byte) ([]byte, error) {
	var cfg, chart map[string]any
	if err := json.Unmarshal(cfgData, &cfg); err != nil {
		return nil, fmt.Errorf("the configuration schema: %w", err)
	}
	if err := json.Unmarshal(chartData, &chart); err != nil {
		return nil, fmt.Errorf("the chart schema: %w", err)
	}
	props, ok := chart["properties"].(map[string]any)
	if !ok {
		return nil, errors.New("the chart schema has no properties")
	}
	defs, _ := cfg["$defs"].(map[string]any)
	for _, k := range []string{"$schema", "$comment", "$defs", "title", "description"} {
		delete(cfg, k)
	}
	cfg["description"] = configDescription
	cfg["type"] = "object"
	if err := rewriteRefs(cfg); err != nil {
		return nil, err
	}
	if err := rewriteRefs(defs); err != nil {
		return nil, err
	}
	loosen(cfg)
	loosen(defs)
	props["config"] = cfg
	if len(defs) > 0 {
		chart["definitions"] = defs
	} else {
		delete(chart, "definitions")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(chart); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// envReference is the pattern of a string standing for a number or a
// boolean: a ${VAR} sf2loki expands when it loads the file.
const envReference = `^\$\{[A-Za-z_][A-Za-z0-9_]*\}$`

// loosen widens every type of the schema to what the loader accepts: a
// string without a pattern or a format also takes a number; an integer, a number or a boolean also
// takes a string holding a ${VAR} reference (pattern applies to strings
// only, minimum and maximum to numbers only, so both keep their meaning).
// Enumerations stay as they are.
func loosen(v any) {
	switch v := v.(type) {
	case map[string]any:
		if _, enum := v["enum"]; !enum {
			switch t := v["type"]; t {
			case "string":
				// A pattern or a format constrains strings only: a number
				// would slip past it (a duration without a unit, a URL),
				// and the loader refuses those.
				_, pattern := v["pattern"]
				_, format := v["format"]
				if !pattern && !format {
					v["type"] = []any{"string", "number"}
				}
			case "integer", "number", "boolean":
				if _, has := v["pattern"]; !has {
					v["type"] = []any{t, "string"}
					v["pattern"] = envReference
				}
			}
		}
		for _, e := range v {
			loosen(e)
		}
	case []any:
		for _, e := range v {
			loosen(e)
		}
	}
}

// rewriteRefs points every "#/$defs/X" at "#/definitions/X".
func rewriteRefs(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if k == "$ref" {
				ref, _ := e.(string)
				name, ok := strings.CutPrefix(ref, "#/$defs/")
				if !ok {
					return fmt.Errorf("a $ref outside #/$defs: %q", ref)
				}
				v[k] = "#/definitions/" + name
				continue
			}
			if err := rewriteRefs(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := rewriteRefs(e); err != nil {
				return err
			}
		}
	}
	return nil
}
