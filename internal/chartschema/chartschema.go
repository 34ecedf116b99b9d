// Package chartschema converts sf2loki's configuration schema (draft
// 2020-12, from `sf2loki config schema`) into the config value of the Helm
// chart's values.schema.json (draft-07, which every Helm 3 checks values
// against): $defs become the chart schema's definitions.
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
