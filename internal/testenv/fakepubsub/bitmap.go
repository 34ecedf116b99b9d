package fakepubsub

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// Bitmaps encodes field names the way the Pub/Sub API sends a change
// event header's changedFields, nulledFields and diffFields ("Event
// Deserialization Considerations" in Salesforce's Pub/Sub API guide): the
// first element a hexadecimal bitmap over the schema's top-level
// non-compound fields (bit i for the field at position i), then one
// "<position>-<bitmap>" element per compound field, over its nested
// fields. A name is a top-level field, or Parent.Child for a compound
// field's. It panics on a name the schema lacks: a test's mistake.
//
// It is written apart from the source's decoder, with math/big, so that
// each checks the other.
func Bitmaps(schema string, names ...string) []any {
	top, nested := schemaFields(schema)
	var bits big.Int
	compound := map[int]*big.Int{}
	for _, n := range names {
		parent, child, isNested := strings.Cut(n, ".")
		p := slices.Index(top, parent)
		if p < 0 {
			panic(fmt.Sprintf("fakepubsub.Bitmaps: the schema has no field %s", parent))
		}
		if !isNested {
			bits.SetBit(&bits, p, 1)
			continue
		}
		c := slices.Index(nested[p], child)
		if c < 0 {
			panic(fmt.Sprintf("fakepubsub.Bitmaps: %s has no nested field %s", parent, child))
		}
		if compound[p] == nil {
			compound[p] = new(big.Int)
		}
		compound[p].SetBit(compound[p], c, 1)
	}
	out := []any{}
	if bits.Sign() != 0 {
		out = append(out, "0x"+strings.ToUpper(bits.Text(16)))
	}
	for _, p := range slices.Sorted(mapsKeys(compound)) {
		out = append(out, fmt.Sprintf("%d-0x%s", p, strings.ToUpper(compound[p].Text(16))))
	}
	return out
}

func mapsKeys(m map[int]*big.Int) func(func(int) bool) {
	return func(yield func(int) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// schemaFields reads a record schema's top-level field names and, for
// each field that holds a record (or a union of null and a record), its
// nested names.
func schemaFields(schema string) (top []string, nested [][]string) {
	var doc struct {
		Fields []struct {
			Name string          `json:"name"`
			Type json.RawMessage `json:"type"`
		} `json:"fields"`
	}
	if err := json.Unmarshal([]byte(schema), &doc); err != nil {
		panic(err)
	}
	for _, f := range doc.Fields {
		top = append(top, f.Name)
		nested = append(nested, recordFields(f.Type))
	}
	return top, nested
}

func recordFields(t json.RawMessage) []string {
	var rec struct {
		Type   string `json:"type"`
		Fields []struct {
			Name string `json:"name"`
		} `json:"fields"`
	}
	if json.Unmarshal(t, &rec) == nil && rec.Type == "record" {
		var out []string
		for _, f := range rec.Fields {
			out = append(out, f.Name)
		}
		return out
	}
	var union []json.RawMessage
	if json.Unmarshal(t, &union) == nil {
		for _, b := range union {
			if names := recordFields(b); names != nil {
				return names
			}
		}
	}
	return nil
}
